"""Does KGW (γ 0.5, δ 2) change the clinical facts of real 7B answers more than chance? The paper's published answers
of Meditron, BioMistral and JSL-MedLlama on its three tasks (200 prompts each), watermarked and unwatermarked, each
held against the reference by concept (`fwsapp.entities.changes`), and the two paired by prompt.

Run: .venv/bin/python -m bench.facts_paper [--samples 200] [--resamples 9999] [--out bench/results/facts_paper.json]

Per text, against the reference: the facts of each kind (diseases, drugs, doses, durations: the registry's kinds) the
reference does not state, facts whose assertion it contradicts (negation flips), and corrupted medical terms per 1,000
words. The unwatermarked answer is chance's baseline: it was sampled from the same model for the same prompt without the
watermark, so W − U is what the watermark adds. Intervals: BCa bootstrap over prompts; p: a permutation test that swaps
W and U within a prompt (`fwsapp.results.paired.paired_difference`). Also, for context, the changes of W against U
itself.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pandas as pd

from bench.common import ROOT
from fwsapp.data.tasks import strip_prompt
from fwsapp.entities.changes import BY_CONCEPT, changes, counted, word_count
from fwsapp.entities.facts import FactFinder
from fwsapp.entities.recognizers import KINDS
from fwsapp.results.paired import paired_difference

PAPER = ROOT.parent / "shared" / "data" / "paper"
MODELS = ("meditron", "biomistral", "jsl")
TASKS = {"HQA": "completion", "HQA2": "qa", "MEQS": "summarization"}
# Each kind of fact's change, then the assertions' and the corruptions'.
CHANGES = (*(kind.change for kind in KINDS.values()), "negation", "corruption")
# Measure -> (change kind, whether it counts only facts the other text lacks, per 1,000 words)
MEASURES = {
    **{f"unsupported {kind.plural} / text": (kind.change, True, False) for kind in KINDS.values()},
    "negation flips / text": ("negation", False, False),
    "corrupted terms / 1,000 words": ("corruption", False, True),
}


def measure_file(finder: FactFinder, path: Path, samples: int) -> list[dict]:
    records = json.loads(path.read_text())[:samples]
    texts = []
    for record in records:
        texts += [strip_prompt(record[key], record["prompt"]) for key in
                  ("watermarked_text", "unwatermarked_text", "natural_text")]
    facts = finder.find_many(texts)
    rows = []
    for index in range(len(records)):
        (w, u, r), (fw, fu, fr) = texts[3 * index:3 * index + 3], facts[3 * index:3 * index + 3]
        sides = {"W": changes(w, fw, r, fr, by=BY_CONCEPT), "U": changes(u, fu, r, fr, by=BY_CONCEPT)}
        between = changes(w, fw, u, fu)
        row = {"prompt": index, "W words": word_count(w), "U words": word_count(u),
               "W drugs": sum(f.kind == "chemical" for f in fw), "U drugs": sum(f.kind == "chemical" for f in fu),
               "R drugs": sum(f.kind == "chemical" for f in fr),
               "W doses": sum(f.kind == "dose" for f in fw), "W negated": sum(f.assertion == "negated" for f in fw)}
        for side, found in sides.items():
            for measure, (kind, unsupported_only, _) in MEASURES.items():
                row[f"{side} {measure}"] = counted(found, kind, unsupported_only)
        for kind in CHANGES:
            row[f"W vs U {kind}"] = counted(between, kind, False)
        rows.append(row)
    return rows


def differences(rows: pd.DataFrame, resamples: int) -> list[dict]:
    found = []
    for measure, (_, _, per_words) in MEASURES.items():
        sums = pd.DataFrame({
            "candidate_sum": rows[f"W {measure}"], "baseline_sum": rows[f"U {measure}"],
            "candidate_count": rows["W words"] / 1000 if per_words else 1.0,
            "baseline_count": rows["U words"] / 1000 if per_words else 1.0, "texts": 2})
        found.append({"measure": measure, **paired_difference(sums, resamples)})
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=9999)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "facts_paper.json")
    args = parser.parse_args(argv)
    finder = FactFinder()
    print(f"recognizers: {finder.labels}")
    started, results, pooled = time.perf_counter(), [], []
    for model in MODELS:
        for log, task in TASKS.items():
            rows = pd.DataFrame(measure_file(finder, PAPER / f"KGW-g0.5-d2-{model}-{log}.generations.json", args.samples))
            rows["prompt"] = f"{model}:{task}:" + rows["prompt"].astype(str)
            pooled.append(rows)
            summary = {"model": model, "task": task, "texts with a drug (W, U, R)": [
                int((rows[f"{side} drugs"] > 0).sum()) for side in "WUR"],
                "W vs U changes / text": {kind: float(rows[f"W vs U {kind}"].mean())
                                          for kind in CHANGES},
                "differences": differences(rows, args.resamples)}
            results.append(summary)
            print(json.dumps(summary, default=float), flush=True)
    every = pd.concat(pooled, ignore_index=True)
    report = {"recognizers": finder.labels, "seconds": time.perf_counter() - started, "per_log": results,
              "pooled": differences(every, args.resamples),
              "pooled W vs U changes / text": {kind: float(every[f"W vs U {kind}"].mean())
                                               for kind in CHANGES}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=float))
    print(json.dumps(report["pooled"], indent=1, default=float))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
