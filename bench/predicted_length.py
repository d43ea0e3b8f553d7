"""How long must an answer be, predicted from its entropy, against measured (issue 60, item 5).

Run: .venv/bin/python -m bench.predicted_length [--n 24] [--tokens 300] [--only embedded|paper]

1. The embedded model on the three tasks' shared files (the first --n prompts), KGW (γ 0.5, δ 2) and vLLM's Gumbel
   watermark, sampled at T = 1 with answers free to end early (up to --tokens new tokens), generated in process. Each
   watermarked answer's tokens to detect at 1 % FPR is predicted from the model's distributions (spike entropy for the
   green list, the chosen token's probability for Gumbel; fwsapp.detection.predicted_length) and measured from the
   run's own scores by length; their medians, their rank correlation over answers, and the share of answers under 200
   tokens (the Code of Practice's line) detected by their end, each way.
2. The paper's published KGW answers of BioMistral and JSL-MedLlama (200 per task, 7B output on a GPU, imported, detected
   again from text with their own tokenizers): the measured share of answers under 200 tokens detected by their end,
   per task. Their 7B distributions are not on this machine, so there is no prediction for them.
A Markdown table each, for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import bench.common  # noqa: F401  (puts the project on the path)
from bench.common import ROOT

DATA = ROOT.parent / "shared" / "data"
FILES = {"completion": "healthqa_completion.json", "qa": "healthqa_qa.json", "summarization": "meqsum_summarization.json"}
METHODS = ("KGW", "vLLM-Gumbel")
PAPER_MODELS = ("biomistral", "jsl")


def _shown(value) -> str:
    return "–" if value is None else value if isinstance(value, str) else f"{value:.2f}" if isinstance(value, float) \
        else str(value)


def embedded(store, n: int, tokens: int) -> None:
    from fwsapp.detection.predicted_length import predicted_against_measured
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models import load_model
    from fwsapp.orchestration import pipeline

    lm = load_model()
    print("| task | method | answers | median length | predicted median | measured median | Spearman ρ | "
          "answers under 200 tokens | detectable (predicted) | detectable (measured) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for task, name in FILES.items():
        for method in METHODS:
            config = RunConfig(task=task, method=method, dataset=str(DATA / name), n=n, max_new_tokens=tokens,
                               batch_size=8, seed=7, sampling={"min_new_tokens": 1})
            [run_id] = pipeline.generate(store, [config], lambda _name: lm)
            pipeline.predict_lengths(store, [run_id], lambda _name: lm)
            found = predicted_against_measured(store, run_id)
            frame = found["per_answer"]
            print(f"| {task} | {method} | {found['answers']} | {int(frame.tokens.median())} | "
                  f"{_shown(found['predicted_median'])} | {_shown(found['measured_median'])} | "
                  f"{_shown(found['spearman'])} | {found['short_answers']} | "
                  f"{_shown(found['short_predicted_detectable'])} | {_shown(found['short_measured_detectable'])} |",
                  flush=True)


def paper(store) -> None:
    from fwsapp.detection.predicted_length import predicted_against_measured
    from fwsapp.models import load_model
    from fwsapp.orchestration import pipeline
    from tests.test_redetect import import_paper

    print("| task | model | answers | median length (tokens) | answers under 200 tokens | detectable (measured) | "
          "measured median tokens to detect |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for task in FILES:
        for model in PAPER_MODELS:
            run_id = import_paper(store, model, task)
            pipeline.lengths(store, [run_id], load_model)
            found = predicted_against_measured(store, run_id)
            frame = found["per_answer"]
            print(f"| {task} | {model} | {found['answers']} | {int(frame.tokens.median())} | {found['short_answers']} | "
                  f"{_shown(found['short_measured_detectable'])} | {_shown(found['measured_median'])} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    from fwsapp.store import Store

    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--tokens", type=int, default=300)
    parser.add_argument("--only", choices=("embedded", "paper"))
    args = parser.parse_args(argv)
    store = Store(Path(tempfile.mkdtemp()) / "predicted_length.duckdb")
    if args.only in (None, "paper"):
        paper(store)
    if args.only in (None, "embedded"):
        embedded(store, args.n, args.tokens)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
