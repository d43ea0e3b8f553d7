"""Watermark speed, as ratios measured in the same run on the embedded model (2-core CPU here).

Run: .venv/bin/python -m bench.watermarks [--tokens 32] [--repeats 3] [--methods KGW EntityKGW]
                                          [--only exp-edit generation detection] [--texts 32] [--batch 8] [--no-loop]

1. EXP-edit detection: the vectorised alignment vs the plain recurrence (MarkLLM's loop, in Python), on
   a 200-token text with the 49k vocabulary and pseudo_length 256 (one test statistic each; the
   permutation test repeats it n_runs + 1 times in both).
2. Batched generation (batch 8, or --batch) vs a per-sample loop like MarkLLM's (unless --no-loop), for each method.
3. Each processor's overhead vs plain `generate` at the same batch size and length.
4. Detectors that read the model (SWEET's entropies, LogRank, Fast-DetectGPT): `detect_many`, which
   teacher-forces the texts in batches of 16, vs `detect` one text at a time, on HealthQA references.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from bench.common import median_seconds as seconds
from fwsapp.data.loaders import load_dataset
from fwsapp.generation.generate import generate_batch
from fwsapp.generation.run_config import DEFAULT_SAMPLING
from fwsapp.models import load_model
from fwsapp.watermark.methods import watermark_names
from fwsapp.watermark.factory import create
from fwsapp.watermark.exp_edit import ExpEdit, key_sequence, test_statistic
from tests.test_watermarks import plain_statistic  # the reference the tests keep


def exp_edit_detection(vocab_size: int) -> None:
    xi = key_sequence(42, 256, vocab_size)
    tokens = np.random.default_rng(0).integers(0, vocab_size, 200)
    fast = seconds(lambda: test_statistic(xi[:, tokens]), 3)
    started = time.perf_counter()
    reference = plain_statistic(tokens.tolist(), xi, 0.0)
    plain = time.perf_counter() - started
    assert abs(reference - test_statistic(xi[:, tokens])) < 1e-3
    detector = ExpEdit(vocab_size)
    whole = seconds(lambda: detector.detect(tokens.tolist()), 1)
    print(f"EXP-edit statistic, 200 tokens, V={vocab_size}, n=256: plain {plain:.2f} s, fast {fast * 1000:.1f} ms, "
          f"speed-up {plain / fast:.0f}x; full p-value (101 statistics) {whole:.2f} s")


def generation(lm, tokens: int, repeats: int, methods: list[str], batch: int = 8, loop: bool = True) -> None:
    """Batched vs looped generation, and each processor against plain generate. The arms are interleaved
    round-robin after a warm-up, so drifts in the machine's speed hit them all alike."""
    prompts = [sample.prompt for sample in load_dataset("qa")[:batch]]
    sampling = {**DEFAULT_SAMPLING, "min_new_tokens": tokens}
    marks = {method: create(method, lm.vocab_size, {"n_runs": 10} if method == "EXP-edit" else {}, lm=lm)
             for method in methods}
    generate_batch(lm, prompts, tokens, sampling, 1)  # warm-up
    batched = {name: [] for name in ["plain", *marks]}
    for _ in range(repeats):
        for name in batched:
            batched[name].append(seconds(lambda: generate_batch(lm, prompts, tokens, sampling, 1, marks.get(name)), 1))
    plain = statistics.median(batched["plain"])
    print(f"plain generate, batch {batch}, {tokens} new tokens: {plain:.2f} s (median of {repeats}, interleaved)")
    print(f"{'method':>10} | batched s | loop s | loop/batched | overhead vs plain")
    for method, watermark in marks.items():
        median = statistics.median(batched[method])
        if loop:
            looped = seconds(lambda: [generate_batch(lm, [prompt], tokens, sampling, 1, watermark) for prompt in prompts], 1)
            print(f"{method:>10} | {median:9.2f} | {looped:6.2f} | {looped / median:11.1f}x | {median / plain:.2f}x")
        else:
            print(f"{method:>10} | {median:9.2f} |      – |            – | {median / plain:.2f}x")


def model_detection(lm, texts: int, repeats: int) -> None:
    """Batched vs one-at-a-time detection for the detectors that run the model over each text."""
    pairs = [(lm.tokenizer(sample.reference, add_special_tokens=False)["input_ids"][:200], lm.tokenizer(sample.prompt)["input_ids"])
             for sample in load_dataset("qa")[:texts]]
    length = statistics.fmean(len(tokens) for tokens, _ in pairs)
    print(f"detection of {len(pairs)} texts ({length:.0f} tokens on average, after their prompts), median of {repeats}")
    print(f"{'method':>14} | one at a time s | batched s | speed-up")
    for method in ("SWEET", "LogRank", "Fast-DetectGPT"):
        detector = create(method, lm.vocab_size, lm=lm)
        alone = seconds(lambda: [detector.detect(tokens, context) for tokens, context in pairs], repeats)
        batched = seconds(lambda: detector.detect_many(pairs), repeats)
        print(f"{method:>14} | {alone:15.2f} | {batched:9.2f} | {alone / batched:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--methods", nargs="+", default=watermark_names(), help="the processors to time (default: all)")
    parser.add_argument("--only", nargs="+", choices=["exp-edit", "generation", "detection"],
                        default=["exp-edit", "generation", "detection"])
    parser.add_argument("--texts", type=int, default=32, help="texts for the detection timing")
    parser.add_argument("--batch", type=int, default=8, help="texts per generated batch")
    parser.add_argument("--no-loop", action="store_true", help="skip the one-text-at-a-time generation arm")
    args = parser.parse_args()
    lm = load_model()
    if "exp-edit" in args.only and "EXP-edit" in args.methods:
        exp_edit_detection(lm.vocab_size)
    if "generation" in args.only:
        generation(lm, args.tokens, args.repeats, args.methods, args.batch, not args.no_loop)
    if "detection" in args.only:
        model_detection(lm, args.texts, args.repeats)


if __name__ == "__main__":
    main()
