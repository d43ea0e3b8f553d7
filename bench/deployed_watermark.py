"""What a deployed watermark does to medical text: vLLM-Gumbel (what `vllm serve --watermark-config` applies) against
KGW and EXP on the three tasks, through fwsapp's pipeline into one resumable database.

Run: .venv/bin/python -m bench.deployed_watermark [--n 32] [--seed 0] [--db cache/bench-deployed.duckdb]

Each method generates the same prompts at the same seed (the embedded model, batch 16; 64 new tokens, so a table
fits a CPU session), is scored (Auto-FWS's metrics) and analysed (disease mentions, trained recognizer), and is
attacked with word deletion, synonym substitution and typos at 30 % of the words, then detected again. It prints one
markdown table per task:
- detection: AUROC, and TPR at 1 % FPR where n allows (the method's own scores), median tokens to detect at 1 % FPR;
- robustness: the share of watermarked texts past the method's own threshold, clean (detected from text as the attacked
  ones are) and after each attack;
- quality and factuality: Auto-FWS of the watermarked texts and of the unwatermarked ones, introduced disease
  names per text and the share of disease mentions the reference does not support.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from bench.common import ROOT
from bench.entity_watermark import DATASETS, complete, config, measures

METHODS = ("vLLM-Gumbel", "KGW", "EXP")
ATTACKS = (("word-deletion", {"ratio": 0.3}), ("synonym", {"ratio": 0.3}), ("typo", {"p": 0.3}))
NEW_TOKENS = 64


def robustness(store, run_id: str) -> dict[str, float | None]:
    """The share of watermarked texts past the method's own threshold, detected again from text: clean, and after each
    attack (a TPR at 1 % FPR needs more negatives than a CPU session's n)."""
    from fwsapp.robustness.attack_sets import CLEAN, summaries

    return {"clean" if row["attack_label"] == CLEAN else row["attack"]: row["still_detected"]
            for row in summaries(store, [run_id])}


def tokens_to_detect(store, run_id: str):
    from fwsapp.detection.length import length_summary, run_curves

    curves = run_curves(store, run_id)
    if curves is None:
        return None
    return length_summary(curves.method, curves.params, curves.positives, curves.negatives, 0.01)[
        "tokens_to_detect"]["median"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default=str(ROOT / "cache" / "bench-deployed.duckdb"))
    args = parser.parse_args()

    from fwsapp.models import load_model
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(Path(args.db))
    lm = load_model()
    loader = lambda name: lm  # noqa: E731
    for task in DATASETS:
        configs = [config(method, task, args.n, args.seed, NEW_TOKENS) for method in METHODS]
        run_ids = complete(store, configs, loader, task)
        for name, params in ATTACKS:
            pipeline.attack(store, run_ids, loader, attack=name, params=params, seed=args.seed)
        measured = measures(store, run_ids)
        print(f"\n### {task} (n = {args.n}, {NEW_TOKENS} new tokens, seed {args.seed})\n")
        print("| method | AUROC | TPR@1% | tokens to detect (median) | detected, clean | "
              + " | ".join(f"after {name}" for name, _ in ATTACKS)
              + " | Auto-FWS wm | Auto-FWS unwm | introduced / text | unsupported % |")
        print("|---" * (9 + len(ATTACKS)) + "|")
        for method, run_id in zip(METHODS, run_ids):
            row, survived = measured[run_id], robustness(store, run_id)

            def number(value, digits=3):
                return "–" if value is None else f"{value:.{digits}f}"

            print(f"| {method} | {number(row['auroc'])} | {number(row['tpr1'])} | {tokens_to_detect(store, run_id)} | "
                  f"{number(survived.get('clean'))} | "
                  + " | ".join(number(survived.get(name)) for name, _ in ATTACKS)
                  + f" | {number(row['fws'])} | {number(row['fws_plain'])} | {number(row['introduced'], 2)} | "
                    f"{number(row['hallucination'], 1)} |")
    store.close()


if __name__ == "__main__":
    main()
