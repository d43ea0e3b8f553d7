"""The cost of CUDA green lists on a CPU, as ratios measured in the same run (2-core CPU here).

Run: .venv/bin/python -m bench.cuda_rng [--tokens 64] [--repeats 3]

1. Generation on the embedded model (batch 8): KGW (or --methods) with rng=cuda (emulated) against rng=cpu,
   arms interleaved, each repetition with a fresh watermark (cold green-list cache). Target ≤ 1.10×.
3. One green list: the emulation against torch.randperm on the CPU generator, 200 seeds per vocabulary size.
2. Re-detection of 400 texts of the paper's QA logs (200 watermarked, 200 references): JSL-MedLlama-3's
   128,256-token vocabulary against BioMistral's 32,000, cold caches. Target ≤ 2×.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, median_seconds
from fwsapp.data.loaders import load_dataset
from fwsapp.generation.generate import generate_batch
from fwsapp.generation.run_config import DEFAULT_SAMPLING
from fwsapp.orchestration.importer import LogFile, import_logs
from fwsapp.models import load_model
from fwsapp.detection.redetect import redetect
from fwsapp.store import Store
from fwsapp.models.tokenizers import load_tokenizer
from fwsapp.watermark.factory import create

PAPER = ROOT.parent / "shared" / "data" / "paper"


def generation(tokens: int, repeats: int, methods: list[str]) -> None:
    lm = load_model()
    prompts = [sample.prompt for sample in load_dataset("qa")[:8]]
    sampling = {**DEFAULT_SAMPLING, "min_new_tokens": tokens}
    arms = {f"{method} {rng}": (method, rng) for method in methods for rng in ("cpu", "cuda")}
    generate_batch(lm, prompts, tokens, sampling, 1)  # warm-up, numba compilation included
    create("KGW", lm.vocab_size).green_lists.packed(1)
    times = {name: [] for name in arms}
    for _ in range(repeats):
        for name, (method, rng) in arms.items():
            watermark = create(method, lm.vocab_size, {"rng": rng}, lm=lm)
            times[name].append(median_seconds(lambda: generate_batch(lm, prompts, tokens, sampling, 1, watermark), 1))
    for method in methods:
        cpu, cuda = statistics.median(times[f"{method} cpu"]), statistics.median(times[f"{method} cuda"])
        print(f"generation {method}, batch 8, {tokens} tokens, median of {repeats}: rng=cpu {cpu:.2f} s, "
              f"rng=cuda {cuda:.2f} s, ratio {cuda / cpu:.2f}x")


def redetection(repeats: int) -> None:
    results = {}
    for model, tokenizer_name in (("biomistral", "mistral-v1"), ("jsl", "llama-3")):
        tokenizer = load_tokenizer(tokenizer_name)
        runs = []
        for _ in range(repeats):
            with tempfile.TemporaryDirectory() as folder:
                store = Store(Path(folder) / "bench.duckdb")
                stem = PAPER / f"KGW-g0.5-d2-{model}-HQA2"
                run_id = import_logs(store, method="KGW", model=model, task_name="qa",
                                     generations=LogFile.from_path(f"{stem}.generations.json"))
                store.row("UPDATE generations SET unwatermarked_text = NULL")  # 400 texts
                started = time.perf_counter()
                redetect(store, run_id, "KGW", {}, tokenizer)
                runs.append(time.perf_counter() - started)
                store.close()
        results[tokenizer.vocab_size] = statistics.median(runs)
        print(f"re-detect 400 texts, {model} ({tokenizer.vocab_size:,} tokens): {results[tokenizer.vocab_size]:.1f} s "
              f"(median of {repeats})")
    print(f"ratio 128,256 / 32,000: {results[128256] / results[32000]:.2f}x")


def green_list_costs() -> None:
    import torch

    from fwsapp.watermark import cuda_rng

    cuda_rng.green_mask(1000, 1, 500)  # compiled before timing
    for n in (32000, 49152, 128256):
        emulated = median_seconds(lambda: [cuda_rng.green_mask(n, seed, n // 2) for seed in range(200)], 1) / 200
        generator = torch.Generator()
        cpu = median_seconds(lambda: [torch.randperm(n, generator=generator.manual_seed(seed)) for seed in range(200)], 1) / 200
        print(f"one green list at {n:,} tokens: emulated CUDA {emulated * 1000:.2f} ms, torch CPU {cpu * 1000:.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--methods", nargs="+", default=["KGW"], help="e.g. KGW DiPmark SWEET")
    args = parser.parse_args()
    generation(args.tokens, args.repeats, args.methods)
    redetection(args.repeats)
    green_list_costs()


if __name__ == "__main__":
    main()
