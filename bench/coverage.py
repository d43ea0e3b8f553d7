"""Coverage: how much of a run's output carries the watermark (issue 60, item 3).

Run: .venv/bin/python -m bench.coverage [--n 16] [--tokens 96]
QA runs of the embedded model, generated in process, for vLLM's Gumbel watermark under each of its deduplication
settings and under greedy decoding, beside KGW, SynthID, SWEET (whose entropy gate leaves the near-certain
tokens alone) and EntityKGW (which leaves lexicon names alone); each run's coverage (`fwsapp.detection.coverage`), its
flags, and the detection rate of its watermarked answers at the method's threshold, in a Markdown table for
docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import bench.common  # noqa: F401  (puts the project on the path)
from fwsapp.detection.coverage import stored_coverage
from fwsapp.generation.run_config import RunConfig
from fwsapp.models import load_model
from fwsapp.orchestration import pipeline
from fwsapp.store import Store
from fwsapp.watermark import methods

SETTINGS = [
    ("vLLM-Gumbel", {"deduplicate_contexts": "single_turn"}, {}),
    ("vLLM-Gumbel", {"deduplicate_contexts": "all"}, {}),
    ("vLLM-Gumbel", {"deduplicate_contexts": "none"}, {}),
    ("vLLM-Gumbel", {"deduplicate_contexts": "single_turn"}, {"temperature": 0.0, "do_sample": False}),
    ("KGW", {}, {}),
    ("SynthID", {}, {}),
    ("SWEET", {}, {}),
    ("EntityKGW", {}, {}),
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=96)
    args = parser.parse_args(argv)
    lm = load_model()
    store = Store(Path(tempfile.mkdtemp()) / "coverage.duckdb")
    print("| method | settings | decoding | tokens | watermarked share | not watermarked | same without the watermark | "
          "flags | watermarked answers detected |")
    print("|---|---|---|---:|---:|---|---|---|---:|")
    for method, params, sampling in SETTINGS:
        config = RunConfig(task="qa", method=method, params=params, sampling=sampling, n=args.n,
                           max_new_tokens=args.tokens, batch_size=args.n, seed=7)
        run_id = pipeline.generate(store, [config], lambda name: lm)[0]
        found = stored_coverage(store, run_id)
        scores = store.detections([run_id])
        marked = scores[scores.text_kind == "watermarked"].score
        detected = sum(methods.info(method).is_watermarked(score, params) for score in marked)
        reasons = "; ".join(f"{reason} {count}" for reason, count in found["not_watermarked"].items()) or "–"
        decoding = "greedy" if sampling else "sampled (T = 1)"
        print(f"| {method} | {', '.join(f'{k}={v}' for k, v in params.items()) or 'defaults'} | {decoding} | "
              f"{found['tokens']} | {found['share']:.1%} | {reasons} | {found['identical_answers']} of "
              f"{found['answers']} | {'; '.join(found['flags']) or '–'} | {detected} of {len(marked)} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
