"""The vocabulary projection on CPU (fwsapp/models/vocabulary_projection.py): the embedded model's head alone, and a
generate of a batch × 16 new tokens, with the few-rows product and with torch's plain `linear`, on 1 and 2 threads.
Both arms run twice in one process, alternated, and the second run of each is kept; medians of `--repeats`
generates and four times as many head products.

    .venv/bin/python -m bench.generation_step [--repeats 3] [--out bench/results/generation_step.json]
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from bench.common import ROOT, median_seconds

ARMS = ("linear", "few rows")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "generation_step.json"))
    args = parser.parse_args(argv)

    from fwsapp.generation.generate import generate_batch
    from fwsapp.generation.run_config import DEFAULT_SAMPLING
    from fwsapp.models import load_model
    from fwsapp.models.vocabulary_projection import FewRowsProjection

    lm = load_model()
    head = lm.model.get_output_embeddings()
    assert type(head) is FewRowsProjection
    classes = {"linear": torch.nn.Linear, "few rows": FewRowsProjection}
    sampling = {**DEFAULT_SAMPLING, "min_new_tokens": 16}
    rows = []
    for threads in (1, 2):
        os.environ["FWSAPP_THREADS"] = str(threads)  # a generation sets its threads by fwsapp's policy
        torch.set_num_threads(threads)
        for batch in (1, 2, 4, 8, 16):
            hidden = torch.randn(batch, 1, head.in_features)
            prompts = [f"What should a patient with condition {i} know?" for i in range(batch)]
            timed = {}
            for arm in ARMS * 2:  # alternated, so both arms see the same machine
                head.__class__ = classes[arm]
                with torch.inference_mode():
                    step = median_seconds(lambda: head(hidden), args.repeats * 4)
                generation = median_seconds(lambda: generate_batch(lm, prompts, 16, sampling, seed=0), args.repeats)
                timed[arm] = (step, generation)
            head.__class__ = FewRowsProjection
            row = {"threads": threads, "batch": batch}
            for arm in ARMS:
                row[f"head ms, {arm}"] = round(timed[arm][0] * 1000, 2)
                row[f"generate s, {arm}"] = round(timed[arm][1], 3)
            row["head speed-up"] = round(timed["linear"][0] / timed["few rows"][0], 2)
            row["generate speed-up"] = round(timed["linear"][1] / timed["few rows"][1], 2)
            rows.append(row)
            print(row, flush=True)
    with open(args.out, "w") as out:
        json.dump(rows, out, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
