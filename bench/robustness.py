"""Robustness: what each watermark buys. Its texts attacked, then detected again against the same negatives.

Run: .venv/bin/python -m bench.robustness [--n 64] [--new-tokens 128] [--db cache/bench-robustness.duckdb]
     [--only generate|attack|paraphrase|paper|speed|table] [--paraphrase-methods KGW ...]

1. The embedded model generates QA answers (../shared/data, seed 0, batch 16) with KGW, SWEET, DiPmark, EXP-edit,
   Unigram, SynthID and EntityKGW at their defaults. Each run is attacked by word deletion 0.3, synonym 0.5 with and
   without keep_entities, typo 0.05, copy-paste (3 spans of 25 %), entity-swap (2 mentions) and a local paraphrase
   (the embedded model, MarkLLM's prompt at temperature 0.2), each detected again; the table gives TPR at 1 % FPR,
   AUROC and entity survival per method × attack.
2. The paper's BioMistral and JSL KGW QA texts (200 each, GPU output, imported) under the non-LLM attacks, detected
   from text with their real tokenizers.
3. Speed: on the paper's BioMistral QA texts (200 texts of 200 tokens), each non-LLM attack and its re-detection
   against re-detecting the clean texts (both texts of each sample), each timed on a fresh copy of the database,
   medians of 3, in one run; the measurements after it (ROUGE-L and encoder similarity) are timed apart.
Everything goes through fwsapp's pipeline into one resumable database: an interrupted bench goes on where it stopped.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
METHODS = ("KGW", "SWEET", "DiPmark", "EXP-edit", "Unigram", "SynthID", "EntityKGW")
# The attacks: (attack, its parameters), the published presets.
ATTACKS = (("word-deletion", {"ratio": 0.3}), ("synonym", {"ratio": 0.5}),
           ("synonym", {"ratio": 0.5, "keep_entities": True}), ("typo", {"p": 0.05}),
           ("copy-paste", {"spans": 3, "span_share": 0.25}), ("entity-swap", {"k": 2}))
PARAPHRASE = ("paraphrase", {"backend": "local", "max_tokens": 160})
PAPER_MODELS = {"biomistral": "mistral-v1", "jsl": "llama-3"}
MEASURES = ("TPR at 1% FPR", "TPR at 5% FPR", "AUROC", "Still detected (share)", "Entity survival")


def generate(store, loader, n: int, new_tokens: int) -> list[str]:
    from fwsapp.orchestration import pipeline
    from fwsapp.generation.run_config import RunConfig

    configs = [RunConfig(task="qa", method=method, dataset=str(DATA / "healthqa_qa.json"), n=n,
                         max_new_tokens=new_tokens, batch_size=16, seed=0) for method in METHODS]
    return pipeline.generate(store, configs, loader,
                             progress=lambda done, total, note="": print(f"\rgenerate: {done}/{total}", end=""))


def attack_all(store, loader, run_ids: list[str], attacks) -> None:
    from fwsapp.orchestration import pipeline

    for name, params in attacks:
        started = time.perf_counter()
        pipeline.attack(store, run_ids, loader, attack=name, params=params)
        print(f"{name} {params}: {time.perf_counter() - started:.0f} s", flush=True)


def paper_runs(store) -> list[str]:
    from tests.test_redetect import import_paper

    return [import_paper(store, model, "qa") for model in PAPER_MODELS]


def table(store, run_ids: list[str], measure: str) -> str:
    from fwsapp.robustness.attack_sets import method_by_attack, summary_frame
    from fwsapp.results.robustness_table import labelled

    frame = summary_frame(store, run_ids)
    runs = store.runs()
    frame = labelled(frame, runs[runs.run_id.isin(run_ids)])
    frame["run"] = [f"{method} ({model})" for method, model in zip(frame.method, frame.model)]
    wide = method_by_attack(frame, measure)
    clean = clean_row(store, run_ids, measure)
    wide.insert(0, "clean", [clean.get(run) for run in wide.index])
    header = "| method | " + " | ".join(wide.columns) + " |"
    lines = [header, "|" + "---|" * (len(wide.columns) + 1)]
    for name, row in wide.iterrows():
        lines.append(f"| {name} | " + " | ".join("–" if value is None or value != value else f"{value:.2f}"
                                                 for value in row) + " |")
    return "\n".join(lines)


def clean_row(store, run_ids: list[str], measure: str) -> dict:
    """The measure on the clean texts (the detection sets the attacks compared with), per run label."""
    import json

    from fwsapp.watermark import methods
    from fwsapp.detection.roc import level_key
    from fwsapp.detection.redetect import set_summaries

    runs = store.runs().set_index("run_id")
    found = {}
    for run_id, sets in set_summaries(store, run_ids).items():
        entry, method = sets[0], runs.loc[run_id, "method"]
        scores = store.redetections([entry["set_id"]]).query("text_kind == 'watermarked'").score.dropna()
        params = entry["params"] if isinstance(entry["params"], dict) else json.loads(entry["params"])
        still = sum(methods.info(method).is_watermarked(score, params) for score in scores) / len(scores)
        tpr = entry["tpr_at_fpr"] or {}
        found[f"{method} ({runs.loc[run_id, 'model']})"] = {
            "AUROC": entry["auroc"], "TPR at 1% FPR": tpr.get(level_key(0.01)), "TPR at 5% FPR": tpr.get(level_key(0.05)),
            "Still detected (share)": still, "Entity survival": 1.0}[measure]
    return found


def speed(db: Path, repeats: int = 3) -> list[tuple[str, float, float]]:
    """(attack, seconds to re-detect the clean texts, seconds to attack and re-detect the attacked ones) on the
    paper's BioMistral QA texts, each on a fresh copy of a database holding only the imported run."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.test_redetect import import_paper

    source = db.with_name("bench-robustness-speed.duckdb")
    source.unlink(missing_ok=True)
    store = Store(source)
    run_id = import_paper(store, "biomistral", "qa")
    store.close()
    no_model = lambda name: None  # noqa: E731  (KGW detects from the text alone)

    def timed(work) -> float:
        times = []
        for _ in range(repeats):
            copy = source.with_name("bench-robustness-copy.duckdb")
            shutil.copy(source, copy)
            fresh = Store(copy)
            started = time.perf_counter()
            work(fresh)
            times.append(time.perf_counter() - started)
            fresh.close()
            copy.unlink()
        return sorted(times)[len(times) // 2]

    clean = timed(lambda fresh: pipeline.detect(fresh, [run_id], no_model))
    rows = []
    for name, params in ATTACKS:
        # The clean set first (untimed), as it stands before an attack; then the attack and its re-detection.
        def attacked(fresh, name=name, params=params):
            return pipeline.attack(fresh, [run_id], no_model, attack=name, params=params, measure=False)

        both = timed(lambda fresh, attacked=attacked: (pipeline.detect(fresh, [run_id], no_model), attacked(fresh)))
        rows.append((f"{name} {params}", clean, both - clean))
        print(f"speed {name}: clean {clean:.2f} s, attack + re-detection {both - clean:.2f} s", flush=True)
    from fwsapp.models.encoder import load_encoder
    from fwsapp.robustness.attack_sets import measure_changes

    encoder = load_encoder()

    def measured(fresh):
        [attacked] = [entry for entry in pipeline.attack(fresh, [run_id], no_model, attack="typo", measure=False)
                      if entry.attack_set]
        started = time.perf_counter()
        measure_changes(fresh, attacked.attack_set, encoder)
        return time.perf_counter() - started

    copy = source.with_name("bench-robustness-copy.duckdb")
    shutil.copy(source, copy)
    fresh = Store(copy)
    print(f"measuring ROUGE-L, similarity and disease mentions of 200 attacked texts afterwards: {measured(fresh):.2f} s", flush=True)
    fresh.close()
    copy.unlink()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-robustness.duckdb"))
    parser.add_argument("--only", choices=("generate", "attack", "paraphrase", "paper", "speed", "table"))
    parser.add_argument("--no-paraphrase", action="store_true")
    parser.add_argument("--paraphrase-methods", nargs="+", default=list(METHODS),
                        help="the runs the local paraphrase attacks (16 texts at a time, about 2 s a text on a 2-core CPU)")
    args = parser.parse_args()

    from functools import lru_cache

    from fwsapp.models import load_model
    from fwsapp.store import Store

    loader = lru_cache(maxsize=None)(load_model)
    if args.only == "speed":
        rows = speed(Path(args.db))
        print("| attack | re-detect clean (s) | attack + re-detect attacked (s) | ratio |\n|---|---|---|---|")
        for name, clean, attacked in rows:
            print(f"| {name} | {clean:.2f} | {attacked:.2f} | {attacked / clean:.2f} |")
        return
    store = Store(args.db)
    run_ids = generate(store, loader, args.n, args.new_tokens) if args.only in (
        None, "generate", "attack", "paraphrase", "table") else []
    print()
    if args.only in (None, "attack"):
        attack_all(store, loader, run_ids, ATTACKS)
    if args.only in (None, "paraphrase") and not args.no_paraphrase:
        runs = store.runs().set_index("run_id")
        attack_all(store, loader, [run_id for run_id in run_ids if runs.loc[run_id, "method"] in args.paraphrase_methods],
                   (PARAPHRASE,))
    paper = paper_runs(store) if args.only in (None, "paper", "table") else []
    if args.only in (None, "paper"):
        attack_all(store, loader, paper, ATTACKS)
    for measure in MEASURES:
        if run_ids:
            print(f"\n### Embedded model, QA, {args.n} texts × {args.new_tokens} tokens: {measure}\n")
            print(table(store, run_ids, measure))
        if paper:
            print(f"\n### The paper's KGW texts (QA, 200 each), detected from text: {measure}\n")
            print(table(store, paper, measure))
    store.close()


if __name__ == "__main__":
    main()
