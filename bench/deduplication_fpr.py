"""False positives on human text at a nominal 1 %, with and without deduplication (issue 47, item 3).

Run: .venv/bin/python -m bench.deduplication_fpr [--per-task 300] [--model-per-task 60]
Every method a context seeds, at its defaults, detects human texts the embedded model's tokenizer splits:
- the references of the three tasks (HealthQA completion and QA, MeQSum), up to `--per-task` of each;
- a deliberately repetitive set built from them, as medical notes repeat themselves:
  - "sentence ×": each reference's first sentence, repeated;
  - "template": each sentence of a reference after the same instruction line, as a discharge note's fields.
Each text is cut to 200 tokens. A text is a false positive when its statistic passes the nominal 1 % threshold: z above
Φ⁻¹(0.99) = 2.326 (SynthID's and DiPmark's standardised z), or p below 0.01. Each rate comes with its exact 95 %
interval. SWEET and EWD run the model to detect, so they see `--model-per-task` texts of each task. vLLM's methods
deduplicate by their own option (`deduplicate_contexts`): their rows compare `none` with vLLM's default `single_turn`.
"""
from __future__ import annotations

import argparse
import json
import re

from scipy import stats

from bench.common import ROOT
from fwsapp.detection.deduplication import deduplicated
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.watermark.factory import create
from fwsapp.watermark.methods import METHODS

DATA = ROOT.parent / "shared" / "data"
TASK_FILES = {"completion": "healthqa_completion.json", "qa": "healthqa_qa.json", "summarization": "meqsum_summarization.json"}
TOKENS = 200
NOMINAL = 0.01
TEMPLATE_LINE = "Instructions for the patient, please read carefully: "


def sentences(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"(?<=[.!?])\s+", text) if part.strip()]


def human_sets(per_task: int) -> dict[str, list[str]]:
    references = [record["natural"] for name in TASK_FILES.values()
                  for record in json.loads((DATA / name).read_text())[:per_task] if record["natural"].strip()]
    return {
        "references": references,
        "sentence ×": [" ".join([sentences(text)[0]] * 30) for text in references],
        "template": [" ".join(TEMPLATE_LINE + sentence for sentence in sentences(text)) for text in references],
    }


def statistic(watermark, detection) -> float:
    """The detection's test statistic: its p where it is a p-value, else its z (standardised where it is not one)."""
    info = watermark.info
    if info.score_label == "p":
        return detection.score
    arrays = info.evidence.arrays(detection, watermark.params)
    return float(info.evidence.statistics(arrays, watermark.params)[-1]) if detection.token_flags else 0.0


def false_positive(watermark, value: float) -> bool:
    return value < NOMINAL if watermark.info.score_label == "p" else value > stats.norm.isf(NOMINAL)


def shown(flags: list[bool]) -> str:
    hits, total = sum(flags), len(flags)
    interval = stats.binomtest(hits, total).proportion_ci(method="exact")
    return f"{hits / total:.1%} ({interval.low:.1%}–{interval.high:.1%})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--per-task", type=int, default=300)
    parser.add_argument("--model-per-task", type=int, default=60)
    args = parser.parse_args()
    from fwsapp.models import load_model
    from fwsapp.models.tokenizers import load_tokenizer

    tokenizer = load_tokenizer(EMBEDDED_MODEL)
    lm = None
    print("| method | human texts | texts | achieved FPR, each pair scored | achieved FPR, each pair once |")
    print("|---|---|---:|---|---|")
    for entry in METHODS:
        own = entry.deduplication_param  # vLLM's methods deduplicate by their own option: its first choice, then default
        if entry.seeding_context is None and own is None:
            continue
        needs_model = entry.detector_needs_model({})
        if needs_model and lm is None:
            lm = load_model(EMBEDDED_MODEL)
        every_pair = {own: entry.params[own][1].choices[0]} if own else {}
        watermark = create(entry.name, tokenizer.vocab_size, every_pair,
                           lm=lm if needs_model else None, tokenizer=tokenizer)
        engine_once = create(entry.name, tokenizer.vocab_size, {}) if own else None
        for name, texts in human_sets(args.model_per_task if needs_model else args.per_task).items():
            ids = [token_ids[:TOKENS] for token_ids in tokenizer.encode_many(texts)]
            found = watermark.detect_many([(token_ids, ()) for token_ids in ids])
            plain = [false_positive(watermark, statistic(watermark, result)) for result in found]
            if engine_once is not None:
                once = [false_positive(engine_once, statistic(engine_once, result))
                        for result in engine_once.detect_many([(token_ids, ()) for token_ids in ids])]
            else:
                once = [false_positive(watermark, statistic(watermark, deduplicated(watermark, result, token_ids)))
                        for result, token_ids in zip(found, ids)]
            label = f"{entry.name} (its {own} {every_pair[own]}, {entry.defaults[own]})" if own else entry.name
            print(f"| {label} | {name} | {len(ids)} | {shown(plain)} | {shown(once)} |", flush=True)


if __name__ == "__main__":
    main()
