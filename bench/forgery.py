"""Removal and forgery (issue 49): what a watermark buys against a determined adversary, for medical answers.

Run: .venv/bin/python -m bench.forgery [--n 48] [--semantic-n 8] [--new-tokens 64] [--observed 16 32]
     [--forgeries 16] [--db cache/bench-forgery.duckdb] [--only table]

The embedded model answers HealthQA questions (../shared/data, seed 0) with KGW (one-token context), KGW with a
four-token context, SynthID and EntityKGW (n prompts each), and with SemStamp and k-SemStamp (semantic-n prompts: each
answer is sentence-level rejection sampling, about 15 s on this CPU). Every run is detected clean and after synonym
substitution (ratio 0.5); each token-level run is spoofed by watermark stealing from `observed` of its answers, the
forger (the embedded model, strength 4) answering `forgeries` prompts it never saw. The table gives, per method: AUROC
and TPR at 5 % FPR clean and after synonyms, the forgery success at the method's threshold and at 5 % FPR against the
run's negatives, the forgeries' similarity to the model's own answers, and the seconds and rejections per answer.
Everything goes through fwsapp's pipeline into one resumable database.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DATA = ROOT.parent / "shared" / "data"
TOKEN_LEVEL = {"KGW (1-token context)": ("KGW", {}), "KGW (4-token context)": ("KGW", {"prefix_length": 4}),
               "SynthID": ("SynthID", {}), "EntityKGW": ("EntityKGW", {})}
SEMANTIC = {"SemStamp": ("SemStamp", {}), "k-SemStamp": ("k-SemStamp", {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=48)
    parser.add_argument("--semantic-n", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--observed", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--forgeries", type=int, default=16)
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-forgery.duckdb"))
    parser.add_argument("--only", choices=("table",))
    args = parser.parse_args()

    from fwsapp.generation.generate import RunConfig
    from fwsapp.models import load_model
    from fwsapp.models.threads import adapt
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(args.db)
    runs = {}
    for label, (method, params) in {**TOKEN_LEVEL, **SEMANTIC}.items():
        n = args.semantic_n if label in SEMANTIC else args.n
        runs[label] = RunConfig(task="qa", dataset=str(DATA / "healthqa_qa.json"), method=method, params=params, n=n,
                                max_new_tokens=args.new_tokens, batch_size=16, seed=0).run_id()
    if args.only != "table":
        lm = load_model()
        adapt()
        for label, (method, params) in {**TOKEN_LEVEL, **SEMANTIC}.items():
            n = args.semantic_n if label in SEMANTIC else args.n
            config = RunConfig(task="qa", dataset=str(DATA / "healthqa_qa.json"), method=method, params=params, n=n,
                               max_new_tokens=args.new_tokens, batch_size=16, seed=0)
            pipeline.generate(store, [config], lambda name: lm)
            pipeline.attack(store, [runs[label]], lambda name: lm, attack="synonym", params={"ratio": 0.5})
            if label in TOKEN_LEVEL:
                for observed in args.observed:
                    pipeline.attack(store, [runs[label]], lambda name: lm, attack="spoofing",
                                    params={"observed": observed, "forgeries": args.forgeries})
            print(f"{label}: done", flush=True)
    print(table(store, runs, args.observed))


def table(store, runs: dict[str, str], observed: list[int]) -> str:
    """The markdown table of removal and forgery, one row per method."""
    from fwsapp.robustness.attack_sets import summaries

    rows = ["| method | texts | AUROC clean | TPR @5 % clean | AUROC synonym 0.5 | TPR @5 % synonym | "
            + " | ".join(f"forged @threshold / @5 % FPR, {count} observed" for count in observed)
            + " | forgeries' similarity | s per answer | rejections per answer |",
            "|---" * (8 + len(observed)) + "|"]
    for label, run_id in runs.items():
        found = summaries(store, [run_id])
        if not found:
            continue
        clean = next(row for row in found if row["attack"] is None)
        synonym = next((row for row in found if row["attack"] == "synonym"), None)
        forged = {row["params"]["observed"]: row for row in found if row["attack"] == "spoofing"}
        generations = store.generations(run_id)
        rejections = generations.watermarked_rejections.mean() if "watermarked_rejections" in generations else None

        def tpr(row):
            return f"{row['tpr_at_fpr']['0.05']:.2f}" if row and row["tpr_at_fpr"] and row["tpr_at_fpr"].get("0.05") \
                is not None else "–"

        cells = [label, str(clean["texts"]), f"{clean['auroc']:.3f}", tpr(clean),
                 f"{synonym['auroc']:.3f}" if synonym else "–", tpr(synonym)]
        cells += [f"{forged[count]['still_detected']:.2f} / {tpr(forged[count])}" if count in forged else "n/a (no seeded list)"
                  if label in SEMANTIC else "–" for count in observed]
        similarity = [row["similarity"] for row in forged.values() if row["similarity"] is not None]
        cells += [f"{sum(similarity) / len(similarity):.2f}" if similarity else "–",
                  f"{generations.watermarked_seconds.mean():.1f}",
                  f"{rejections:.1f}" if rejections == rejections and rejections is not None else "–"]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


if __name__ == "__main__":
    main()
