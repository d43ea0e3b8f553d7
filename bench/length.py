"""Detection by length (issue 34): how many tokens each watermark needs, a pasted span found by WinMax, and methods
compared at equal strength.

Run: .venv/bin/python -m bench.length [--only embedded|paper|winmax|strength|speed] [--n 64]

1. Tokens to detect and TPR after T tokens at 1 % FPR for the seven embedded runs of bench.robustness (KGW, SWEET,
   DiPmark, EXP-edit, Unigram, SynthID, EntityKGW; QA, 64 samples of 128 tokens, the same database: generated there
   if missing). `pipeline.lengths` gives each text its scores by length: from the detection where the run was
   generated after they were kept, else detected again from text (EXP-edit at the LENGTH_GRID prefixes).
2. The same for the paper's BioMistral and JSL KGW QA texts (200 each, GPU output, imported), detected from text with
   their real tokenizers.
3. WinMax: 40 tokens of each embedded KGW text (z > 4) pasted at token 200 of a 400-token text of HealthQA reference
   answers; how many spans the best window finds at 1 % FPR, against the whole-text verdict, and how many reference
   texts alone it flags.
4. Equal strength: experiments/strength.toml (KGW and EntityKGW at δ 0.5, 1, 2, 4) on the paper's HealthQA file with
   64 samples, then the settings that reach TPR 0.9 at 1 % FPR after 64 and after 32 tokens, with FWS (Auto) and the
   share of disease mentions unsupported by the reference there.
5. Speed: re-detecting the paper's BioMistral QA texts (200 samples, both texts) with each text's scores at every
   length kept, against the same without them, each on a fresh copy of the database, medians of 7, in one run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
FPR = 0.01


def length_table(store, run_ids: list[str]) -> str:
    from fwsapp.detection.length import LENGTH_GRID, length_summary, run_curves

    runs = store.runs().set_index("run_id")
    sizes = [str(size) for size in LENGTH_GRID if size <= 256]
    lines = ["| method (model) | verdict at | tokens to detect: median (IQR) | never detected | "
             + " | ".join(f"TPR after {size}" for size in sizes) + " | TPR at full length | FPR after 32 |",
             "|" + "---|" * (len(sizes) + 6)]
    for run_id in run_ids:
        curves = run_curves(store, run_id)
        summary = length_summary(curves.method, curves.params, curves.positives, curves.negatives, FPR)
        found, rates = summary["tokens_to_detect"], summary["tpr_at_length"]

        def rate(key: str, field: str = "tpr") -> str:
            value = rates.get(key, {}).get(field)
            return "–" if value is None else f"{value:.2f}"

        lines.append(f"| {curves.method} ({runs.loc[run_id, 'model']}) | {summary['threshold'].split(' (')[0]} | "
                     f"{_shown(found['median'])} ({_shown(found['iqr'][0])}–{_shown(found['iqr'][1])}) | "
                     f"{found['never_detected']} of {found['n']} | " + " | ".join(rate(size) for size in sizes)
                     + f" | {rate('full')} | {rate('32', 'fpr')} |")
    return "\n".join(lines)


def _shown(value) -> str:
    return value if isinstance(value, str) else "–" if value is None else f"{value:g}"


def winmax_table(store, lm, run_id: str) -> str:
    from fwsapp.detection import length
    from fwsapp.watermark.factory import create

    run = store.run(run_id)
    watermark = create("KGW", lm.vocab_size, run["params"])
    references = [lm.tokenizer(" " + sample["natural"], add_special_tokens=False)["input_ids"]  # the human answers
                  for sample in json.loads((DATA / "healthqa_qa.json").read_text())]
    pool = [token for ids in references for token in ids]
    hosts = [pool[start:start + 400] for start in range(0, min(len(pool), 400 * 100) - 399, 400)]
    flagged_hosts = sum(length.winmax("KGW", watermark.params, watermark.detect(host), 40).detected for host in hosts)
    spans = [list(ids)[10:50] for ids in store.generations(run_id).watermarked_ids
             if len(ids) >= 50 and watermark.detect(list(ids)).score > 4]
    whole = windowed = 0
    for number, span in enumerate(spans):
        host = hosts[number % len(hosts)]
        found = watermark.detect(host[:200] + span + host[200:360])
        whole += found.score > 4
        windowed += length.winmax("KGW", watermark.params, found, 40).detected
    return ("| texts | whole-text verdict (z > 4) | WinMax, 40-token windows, 1 % FPR |\n|---|---|---|\n"
            f"| {len(spans)} KGW spans of 40 tokens pasted into 400-token reference texts | {whole} of {len(spans)} | "
            f"{windowed} of {len(spans)} |\n| {len(hosts)} reference texts of 400 tokens alone | – | "
            f"{flagged_hosts} of {len(hosts)} flagged |")


def strength(store, loader, n: int) -> str:
    from fwsapp.orchestration import pipeline
    from fwsapp.orchestration.grid import load_spec
    from fwsapp.results.report import build_report
    from fwsapp.detection.strength import equal_strength

    spec = load_spec(ROOT / "experiments" / "strength.toml")
    spec.runs = [replace(config, dataset=str(DATA / "healthqa_qa.json"), n=n) for config in spec.runs]
    pipeline.grid(store, spec, loader, progress=lambda done, total, note="": print(f"\rgrid: {done}/{total} {note}"[:120],
                                                                                   end="", flush=True))
    print()
    run_ids = [config.run_id() for config in spec.runs]
    report = build_report(store)
    blocks = []
    for tokens in (64, 32):
        points, table = equal_strength(store, report, 0.9, FPR, tokens, run_ids)
        lines = [f"TPR 0.9 at 1 % FPR after {tokens} tokens:", "",
                 "| method | δ matched | setting | FWS (Auto) | unsupported entities % | introduced per text |",
                 "|---|---|---|---|---|---|"]
        for _, row in table.iterrows():
            lines.append(f"| {row.method} | {row.value:.2f} | {row.setting} | {row['FWS (Auto)']:.3f} | "
                         f"{row['Unsupported entities %']:.1f} | {row['Introduced entities per text']:.2f} |")
        lines += ["", "| method | δ | TPR | threshold | FWS (Auto) | unsupported entities % |", "|---|---|---|---|---|---|"]
        for _, row in points.iterrows():
            lines.append(f"| {row.method} | {row.value:g} | {row.tpr:.2f} | {row.basis} | {row['FWS (Auto)']:.3f} | "
                         f"{row['Unsupported entities %']:.1f} |")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def speed(repeats: int = 7) -> tuple[float, float]:
    """Seconds to re-detect the paper's BioMistral QA texts without and with scores at every length."""
    from unittest import mock

    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.test_redetect import import_paper

    source = ROOT / "cache" / "bench-length-speed.duckdb"
    source.unlink(missing_ok=True)
    store = Store(source)
    run_id = import_paper(store, "biomistral", "qa")
    store.close()
    no_model = lambda name: None  # noqa: E731  (KGW detects from the text alone)

    def timed(without_curves: bool) -> float:
        copy = source.with_name("bench-length-copy.duckdb")
        shutil.copy(source, copy)
        fresh = Store(copy)
        started = time.perf_counter()
        if without_curves:
            with mock.patch("fwsapp.detection.length.prefix_statistics", lambda *args: None):
                pipeline.detect(fresh, [run_id], no_model)
        else:
            pipeline.detect(fresh, [run_id], no_model)
        seconds = time.perf_counter() - started
        fresh.close()
        copy.unlink()
        return seconds

    timed(False)  # warm: the tokenizer and green lists
    times = {False: [], True: []}
    for _ in range(repeats):  # round-robin, so a slow spell of the machine touches both arms
        for without in (True, False):
            times[without].append(timed(without))
    median = {key: sorted(values)[len(values) // 2] for key, values in times.items()}
    return median[True], median[False]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-robustness.duckdb"))
    parser.add_argument("--strength-db", default=str(ROOT / "cache" / "bench-strength.duckdb"))
    parser.add_argument("--only", choices=("embedded", "paper", "winmax", "strength", "speed"))
    args = parser.parse_args()

    from functools import lru_cache

    from bench.robustness import generate, paper_runs
    from fwsapp.orchestration import pipeline
    from fwsapp.models import EMBEDDED_MODEL, load_model
    from fwsapp.store import Store

    loader = lru_cache(maxsize=None)(load_model)
    wanted = lambda part: args.only in (None, part)  # noqa: E731
    if wanted("embedded") or wanted("paper") or wanted("winmax"):
        store = Store(args.db)
        embedded = generate(store, loader, args.n, 128)
        print()
        if wanted("embedded"):
            started = time.perf_counter()
            pipeline.lengths(store, embedded, loader)
            print(f"scores by length for the embedded runs: {time.perf_counter() - started:.0f} s")
            print(length_table(store, embedded))
        if wanted("paper"):
            paper = paper_runs(store)
            pipeline.lengths(store, paper, loader)
            print(length_table(store, paper))
        if wanted("winmax"):
            runs = store.runs().set_index("run_id")
            print(winmax_table(store, loader(EMBEDDED_MODEL),
                               next(run_id for run_id in embedded if runs.loc[run_id, "method"] == "KGW")))
        store.close()
    if wanted("strength"):
        store = Store(args.strength_db)
        print(strength(store, loader, args.n))
        store.close()
    if wanted("speed"):
        without, with_curves = speed()
        print(f"| re-detection of 400 texts | seconds (median of 7) |\n|---|---|\n| whole-text scores only | {without:.2f} |\n"
              f"| with the score after every token | {with_curves:.2f} |\n| ratio | {with_curves / without:.2f} |")


if __name__ == "__main__":
    main()
