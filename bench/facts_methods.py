"""Every registered watermark on the embedded model: what it does to the clinical facts of its answers. Each method
writes QA answers (HealthQA) at its registered defaults, watermarked and unwatermarked under one seed; each answer is
held against the reference by concept (`fwsapp.entities.changes`), and W − U is paired by prompt as in
`bench.facts_paper`.

Run: .venv/bin/python -m bench.facts_methods [--n 32] [--new-tokens 64] [--methods ...] [--out bench/results/facts_methods.json]
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import pandas as pd

from bench.common import ROOT
from bench.facts_paper import MEASURES, differences
from fwsapp.entities.changes import BY_CONCEPT, changes, counted, word_count
from fwsapp.entities.facts import FactFinder
from fwsapp.watermark.methods import watermark_names

DATA = ROOT.parent / "shared" / "data"


def measured(store, run_id: str, finder: FactFinder) -> pd.DataFrame:
    rows = store.generations(run_id)
    texts = [text if isinstance(text, str) else "" for row in rows.itertuples()
             for text in (row.watermarked_text, row.unwatermarked_text, row.reference)]
    facts = finder.find_many(texts)
    found = []
    for index, row in enumerate(rows.itertuples()):
        (w, u, r), (fw, fu, fr) = texts[3 * index:3 * index + 3], facts[3 * index:3 * index + 3]
        entry = {"prompt": int(row.sample_idx), "W words": word_count(w), "U words": word_count(u)}
        for side, text, own in (("W", w, fw), ("U", u, fu)):
            changed = changes(text, own, r, fr, by=BY_CONCEPT)
            for measure, (kind, unsupported_only, _) in MEASURES.items():
                entry[f"{side} {measure}"] = counted(changed, kind, unsupported_only)
        found.append(entry)
    return pd.DataFrame(found)


def main(argv: list[str] | None = None) -> int:
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models import load_model
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--methods", nargs="+", choices=watermark_names(), default=watermark_names())
    parser.add_argument("--resamples", type=int, default=9999)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "facts_methods.json")
    args = parser.parse_args(argv)
    lm, finder = load_model(), FactFinder()
    results = []
    with tempfile.TemporaryDirectory() as folder:
        store = Store(Path(folder) / "bench.duckdb")
        for method in args.methods:
            started = time.perf_counter()
            config = RunConfig(task="qa", method=method, dataset=str(DATA / "healthqa_qa.json"), n=args.n,
                               max_new_tokens=args.new_tokens, batch_size=16, seed=0)
            try:
                [run_id] = pipeline.generate(store, [config], lambda name: lm)
            except Exception as error:  # one method that cannot run here is reported, the others go on
                results.append({"method": method, "failed": f"{type(error).__name__}: {error}"})
                print(json.dumps(results[-1]), flush=True)
                continue
            rows = measured(store, run_id, finder)
            results.append({"method": method, "seconds": time.perf_counter() - started, "prompts": len(rows),
                            "words per answer (W, U)": [float(rows["W words"].mean()), float(rows["U words"].mean())],
                            "differences": differences(rows, args.resamples)})
            print(json.dumps(results[-1], default=float), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"recognizers": finder.labels, "n": args.n, "new_tokens": args.new_tokens,
                                    "methods": results}, indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
