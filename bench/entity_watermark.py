"""EntityKGW against KGW and SWEET on the same prompts: detectability, what it costs, and what it spares.

Run: .venv/bin/python -m bench.entity_watermark [--n 200] [--seeds 0 1 2] [--db cache/bench-entity.duckdb]
     [--recognizer trained|mesh|scispacy]
     .venv/bin/python -m bench.entity_watermark --only table --tasks completion --seeds 0 1 2 --from-record
The three methods run at the same γ, δ and seed on the three tasks of ../shared/data (200 new tokens
for completion and QA, 64 for summarization, batch 16, the embedded model). Each run is then scored
(SimCSE, ROUGE, F1 and the factual-consistency stand-in, for Auto-FWS) and analysed (disease entities,
entropies), all through fwsapp's pipeline into one resumable database: an interrupted bench goes on
where it stopped. Each measured run of the table and the sweep is also merged into a committed record
(bench/results/entity_watermark.csv, one row per task, method, seed, n, new tokens, δ and recognizer), because a
session's database does not outlive it while its figures should: `--from-record` prints the table and the
sweep from that record, so seeds measured in different sessions make one table. It prints markdown tables:

1. per method and task, the mean over seeds and their spread (sd): AUROC, TPR at 1% FPR, tokens scored
   per text, introduced entities per text and the hallucination rate (watermarked), the entropy shift
   inside entities (watermarked − unwatermarked, nats), and Auto-FWS (watermarked); then the disease
   mentions pooled over seeds, with Fisher's exact test of EntityKGW's unsupported share against KGW's;
2. the issue's acceptance check: 64 HealthQA questions, seed 0, 64 new tokens, batch 16;
3. a δ sweep of EntityKGW and KGW on QA (seed 0): AUROC against Auto-FWS, the FWS page's trade-off;
4. robustness: mean z and TPR at z > 4 after replacing 10, 20 and 30% of the words of the same
   watermarked texts at random (words drawn from the references), EntityKGW against KGW.
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fwsapp.watermark.methods import watermark_names  # noqa: E402  (after the path is set)

DATA = ROOT.parent / "shared" / "data"
DATASETS = {"completion": "healthqa_completion.json", "qa": "healthqa_qa.json",
            "summarization": "meqsum_summarization.json"}
NEW_TOKENS = {"completion": 200, "qa": 200, "summarization": 64}
METHODS = ("KGW", "SWEET", "EntityKGW")
METRICS = ("simcse", "simcse_reference", "rouge", "f1", "factuality")
EDIT_RATES = (0.1, 0.2, 0.3)
KGW_DELTA = 2.0
RECORD = ROOT / "bench" / "results" / "entity_watermark.csv"
RECORD_KEY = ["task", "method", "seed", "n", "new_tokens", "delta", "recognizer"]
# Rows recorded before the recognizer was part of the key were all measured with the MeSH matcher.
EARLIER_RECOGNIZER = "mesh"


def config(method: str, task: str, n: int, seed: int, new_tokens: int, batch_size: int = 16, **params):
    from fwsapp.generation.run_config import RunConfig

    return RunConfig(task=task, method=method, dataset=str(DATA / DATASETS[task]), n=n, max_new_tokens=new_tokens,
                     batch_size=batch_size, seed=seed, params=params)


def complete(store, configs, loader, label: str, recognizer: str = "trained") -> list[str]:
    """Generate, score and analyse the configs' runs (each step skips what is stored)."""
    from fwsapp.orchestration import pipeline

    started = __import__("time").perf_counter()
    run_ids = pipeline.generate(store, configs, loader, progress=lambda d, t, note="": print(f"\r{label}: {d}/{t}", end=""))
    pipeline.score(store, run_ids, loader, metrics=METRICS)
    pipeline.analyze(store, run_ids, loader, recognizer=recognizer)
    print(f"\r{label}: done in {__import__('time').perf_counter() - started:.0f} s", flush=True)
    return run_ids


def run_row(report_run: dict, summary, detections, entities) -> dict:
    """One run's measures from the report, the entity summary, its detection rows and its entities."""
    own = detections[(detections.run_id == report_run["run_id"]) & (detections.text_kind == "watermarked")]
    mentions = entities[(entities.run_id == report_run["run_id"]) & (entities.text_kind == "watermarked")]
    own_summary = summary[summary.run_id == report_run["run_id"]]
    row = own_summary.iloc[0] if not own_summary.empty else {}
    fws_auto = (report_run["quality"] or {}).get("fws_auto") or {}
    return {
        "auroc": report_run["detection"]["auroc"], "tpr1": report_run["detection"]["tpr_at_fpr"]["0.01"],
        "tokens": float(own.num_tokens_scored.mean()),
        "introduced": row.get("introduced per text (watermarked)"),
        "hallucination": row.get("unsupported by the reference % (watermarked)"),
        "mentions": len(mentions), "unsupported": int(mentions.hallucinated.sum()),
        "fws": fws_auto.get("watermarked"), "fws_plain": fws_auto.get("unwatermarked"),
    }


def entity_entropy_shift(store, run_id: str) -> float | None:
    """Mean entropy of the tokens inside disease entities, watermarked minus unwatermarked (nats)."""
    entities = store.entities([run_id])
    means = entities.dropna(subset=["entropy"]).groupby("text_kind").entropy.mean()
    if {"watermarked", "unwatermarked"} <= set(means.index):
        return float(means["watermarked"] - means["unwatermarked"])
    return None


def cell(values: list, digits: int = 3) -> str:
    values = [value for value in values if value is not None]
    if not values:
        return "–"
    mean = statistics.fmean(values)
    return f"{mean:.{digits}f}" + (f" ± {statistics.stdev(values):.{digits}f}" if len(values) > 1 else "")


def measures(store, run_ids: list[str], recognizer: str = "trained") -> dict[str, dict]:
    from fwsapp.entities.introduced import one_recognizer, with_mesh_headings
    from fwsapp.results.entity_table import entity_summary
    from fwsapp.entities.recognizers import recognizer_label
    from fwsapp.results.report import build_report

    report = {run["run_id"]: run for run in build_report(store)["runs"]}
    # Only the named recognizer's analyses: a database analysed with two never pools them.
    entities, analyses = one_recognizer(store.entities(run_ids), store.entity_analyses(run_ids),
                                        recognizer_label(recognizer))
    summary = entity_summary(with_mesh_headings(entities), analyses,
                             store.runs()[lambda frame: frame.run_id.isin(run_ids)])
    detections = store.detections(run_ids)
    return {run_id: {**run_row(report[run_id], summary, detections, entities),
                     "entropy_shift": entity_entropy_shift(store, run_id)} for run_id in run_ids}


COLUMNS = (("auroc", "AUROC", 3), ("tpr1", "TPR@1%", 3), ("tokens", "tokens scored / text", 1),
           ("introduced", "introduced / text", 2), ("hallucination", "hallucination %", 1),
           ("entropy_shift", "entity entropy shift", 3), ("fws", "Auto-FWS", 3))


def table(rows: dict[tuple[str, str], list[dict]]) -> str:
    lines = ["| task | method | runs | " + " | ".join(label for _, label, _ in COLUMNS) + " |",
             "|---|---|---|" + "---|" * len(COLUMNS)]
    for (task, method), runs in rows.items():
        lines.append(f"| {task} | {method} | {len(runs)} | "
                     + " | ".join(cell([run[key] for run in runs], digits) for key, _, digits in COLUMNS) + " |")
    return "\n".join(lines)


def pooled(rows: dict[tuple[str, str], list[dict]]) -> str:
    """Disease mentions in the watermarked texts pooled over seeds, and Fisher's exact test of EntityKGW's
    unsupported share against KGW's. Mentions in one text are not independent, so p is optimistic."""
    from scipy.stats import fisher_exact

    lines = ["| task | method | runs | unsupported of mentions | % | Fisher's p against KGW |", "|---|---|---|---|---|---|"]
    def counts(runs: list[dict]) -> tuple[int, int]:
        return sum(int(run["unsupported"]) for run in runs), sum(int(run["mentions"]) for run in runs)

    for (task, method), runs in rows.items():
        unsupported, mentions = counts(runs)
        p = "–"
        if method == "EntityKGW" and (task, "KGW") in rows:
            base_unsupported, base_mentions = counts(rows[(task, "KGW")])
            p = f"{fisher_exact([[unsupported, mentions - unsupported], [base_unsupported, base_mentions - base_unsupported]]).pvalue:.3f}"
        share = f"{unsupported / mentions * 100:.1f}" if mentions else "–"
        lines.append(f"| {task} | {method} | {len(runs)} | {unsupported} of {mentions} | {share} | {p} |")
    return "\n".join(lines)


def record(path: Path, runs: list[dict]) -> None:
    """Merge measured runs into the record: a rerun of a key replaces its row, every other row stays."""
    import pandas as pd

    from bench.common import merge_record

    merge_record(path, pd.DataFrame(runs), RECORD_KEY, read=_read)


def _read(path: Path):
    import pandas as pd

    frame = pd.read_csv(path)
    return frame.assign(recognizer=frame.get("recognizer", pd.Series(index=frame.index, dtype=object))
                        .fillna(EARLIER_RECOGNIZER))


def recorded(path: Path, **key) -> dict[tuple, dict]:
    """The record's runs whose key matches: a value, or a list of allowed values, per key column."""

    if not path.exists():
        raise SystemExit(f"No record at {path}: run the bench without --from-record first.")
    frame = _read(path)
    for column, allowed in key.items():
        frame = frame[frame[column].isin(allowed if isinstance(allowed, list) else [allowed])]
    frame = frame.astype(object).where(frame.notna(), None)
    return {tuple(row[column] for column in RECORD_KEY): row for row in frame.to_dict("records")}


def edited(text: str, rate: float, vocabulary: list[str], rng: random.Random) -> str:
    words = text.split()
    for index in rng.sample(range(len(words)), int(round(rate * len(words)))):
        words[index] = rng.choice(vocabulary)
    return " ".join(words)


def robustness(store, lm, run_ids: dict[str, str]) -> str:
    """z after random word replacement of the same watermarked texts, per method."""
    from fwsapp.watermark.factory import create

    lines = ["| method | edit rate | mean z | TPR at z > 4 | tokens scored |", "|---|---|---|---|---|"]
    for method, run_id in run_ids.items():
        run = store.run(run_id)
        watermark = create(method, lm.vocab_size, run["params"], lm=lm)
        rows = store.generations(run_id)
        vocabulary = sorted({word for text in rows.reference.dropna() for word in text.split()})
        for rate in (0.0, *EDIT_RATES):
            rng = random.Random(0)
            scores, scored = [], []
            for row in rows.itertuples():
                text = edited(row.watermarked_text, rate, vocabulary, rng) if rate else row.watermarked_text
                ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
                found = watermark.detect(ids, lm.tokenizer(row.prompt)["input_ids"])
                scores.append(found.score)
                scored.append(found.num_tokens_scored)
            lines.append(f"| {method} | {rate:.0%} | {statistics.fmean(scores):.2f} | "
                         f"{sum(score > 4 for score in scores) / len(scores):.3f} | {statistics.fmean(scored):.1f} |")
    return "\n".join(lines)


def measured(store, keys: dict[str, tuple], path: Path) -> dict[tuple, dict]:
    """The runs' measures by record key (its last part the recognizer), merged into the record on the way."""
    found = measures(store, list(keys), recognizer=next(iter(keys.values()))[-1])
    runs = {key: {**dict(zip(RECORD_KEY, key)), **found[run_id]} for run_id, key in keys.items()}
    record(path, list(runs.values()))
    return runs


def print_table(args, tokens: dict[str, int], runs: dict[tuple, dict]) -> None:
    rows = {(task, method): [runs[key] for key in sorted(runs) if key[:2] == (task, method)]
            for task in args.tasks for method in args.methods}
    rows = {key: found for key, found in rows.items() if found}
    print(f"\n## {', '.join(args.methods)}: n = {args.n} per run, new tokens {tokens}, seeds {args.seeds}, "
          f"recognizer {args.recognizer} (mean ± sd over seeds)\n")
    print(table(rows))
    print("\nDisease mentions in the watermarked texts, pooled over seeds:\n")
    print(pooled(rows))


def print_sweep(args, runs: dict[tuple, dict]) -> None:
    print(f"\n## δ sweep on QA (n = {args.n}, seed 0): detectability against Auto-FWS\n")
    print("| method | δ | AUROC | TPR@1% | Auto-FWS | hallucination % |")
    print("|---|---|---|---|---|---|")
    for (_, method, _, _, _, delta), row in runs.items():
        print(f"| {method} | {delta} | {row['auroc']:.3f} | {row['tpr1']:.3f} | {cell([row['fws']])} | "
              f"{cell([row['hallucination']], 1)} |")


def print_from_record(args, tokens: dict[str, int]) -> None:
    if "table" in args.only:
        print_table(args, tokens, {key: row for task in args.tasks for key, row in recorded(
            args.record, task=task, seed=args.seeds, n=args.n, new_tokens=tokens[task], delta=KGW_DELTA,
            recognizer=args.recognizer).items()})
    if "sweep" in args.only:
        print_sweep(args, recorded(args.record, task="qa", method=["KGW", "EntityKGW"], seed=0, n=args.n,
                                   new_tokens=tokens["qa"], delta=args.deltas, recognizer=args.recognizer))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--tasks", nargs="+", default=list(DATASETS))
    parser.add_argument("--methods", nargs="+", choices=watermark_names(), default=list(METHODS),
                        help="the table's methods, any registered watermark (two processes with their own --db can "
                             "share a seed); each at its defaults, recorded with delta = 2.0 (KGW's default δ)")
    parser.add_argument("--new-tokens", type=int, help="for every task (default: 200, and 64 for summarization)")
    parser.add_argument("--deltas", type=float, nargs="+", default=[0.5, 1.0, 2.0, 4.0])
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-entity.duckdb"))
    parser.add_argument("--only", choices=["check", "table", "sweep", "robustness"], nargs="+",
                        default=["check", "table", "sweep", "robustness"])
    parser.add_argument("--record", type=Path, default=RECORD, help="the committed record of measured runs")
    parser.add_argument("--recognizer", choices=["trained", "mesh", "scispacy"], default="trained",
                        help="the disease recognizer of the entity figures (a part of each record's key)")
    parser.add_argument("--from-record", action="store_true",
                        help="print the table and the sweep from the record: no model, no database")
    args = parser.parse_args()
    tokens = {task: args.new_tokens or NEW_TOKENS[task] for task in DATASETS}
    if args.from_record:
        print_from_record(args, tokens)
        return
    from functools import lru_cache

    from fwsapp.models import load_model
    from fwsapp.store import Store

    store = Store(args.db)
    loader = lru_cache(maxsize=None)(load_model)
    lm = loader(config("KGW", "qa", 1, 0, 1).model)

    if "check" in args.only:
        runs = {method: complete(store, [config(method, "qa", 64, 0, 64)], loader, f"check {method}", args.recognizer)[0]
                for method in ("KGW", "EntityKGW")}
        found = measures(store, list(runs.values()), args.recognizer)
        print("\n## Acceptance check: 64 HealthQA questions, seed 0, 64 new tokens, batch 16\n")
        print("| method | AUROC | TPR@1% | tokens scored / text | hallucination % (watermarked) | introduced / text |")
        print("|---|---|---|---|---|---|")
        for method, run_id in runs.items():
            row = found[run_id]
            print(f"| {method} | {row['auroc']:.3f} | {row['tpr1']:.3f} | {row['tokens']:.1f} | "
                  f"{cell([row['hallucination']], 1)} | {cell([row['introduced']], 2)} |")

    if "table" in args.only:
        keys = {}
        for seed in args.seeds:
            for task in args.tasks:
                for method in args.methods:
                    [run_id] = complete(store, [config(method, task, args.n, seed, tokens[task])], loader,
                                        f"{method} {task} seed {seed}", args.recognizer)
                    keys[run_id] = (task, method, seed, args.n, tokens[task], KGW_DELTA, args.recognizer)
        print_table(args, tokens, measured(store, keys, args.record))

    if "sweep" in args.only:
        keys = {}
        for method in ("KGW", "EntityKGW"):
            for delta in args.deltas:
                # The default δ is left implicit, so that point is the main table's run (same id, no rerun).
                params = {} if delta == KGW_DELTA else {"delta": delta}
                [run_id] = complete(store, [config(method, "qa", args.n, 0, tokens["qa"], **params)], loader,
                                    f"sweep {method} δ={delta}", args.recognizer)
                keys[run_id] = ("qa", method, 0, args.n, tokens["qa"], delta, args.recognizer)
        print_sweep(args, measured(store, keys, args.record))

    if "robustness" in args.only:
        runs = {method: complete(store, [config(method, "qa", args.n, 0, tokens["qa"])], loader,
                                 f"{method} qa seed 0", args.recognizer)[0] for method in ("KGW", "EntityKGW")}
        print(f"\n## Robustness to random word replacement (QA, n = {args.n}, seed 0)\n")
        print(robustness(store, lm, runs))


if __name__ == "__main__":
    main()
