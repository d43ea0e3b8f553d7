"""The CUDA path, on a GPU: what the development machine can only emulate. Three parts (`--only`):

- `rng`: fwsapp's CPU emulation of CUDA's randperm (fwsapp/watermark/cuda_rng.py), which draws the green lists of the
  methods with `rng=cuda` wherever no GPU is at hand, against `torch.randperm` on this GPU's generator: whole
  permutations for the paper's and other vocabularies, the one-key shortcut of detection (`rank_below_by_key`), and a
  vocabulary past the grid this GPU keeps resident, emulated with its `cuda_blocks` cap;
- `methods`: each token-level method generates with a tiny model of each paper shape (tests/paper_shapes.py) loaded
  on the GPU, its green lists drawn by the real generator, and the ids are detected on the GPU and again in a process
  that sees no GPU (the emulated generator): the scores must be identical, and the watermark found;
- `speed`: a Mistral-7B-shaped model (random bf16 weights, saved as a model folder and loaded by `load_model` as a
  user's 7B model is) generates 16 prompts x 200 new tokens unwatermarked and with each method: tokens/s and each
  watermark's cost per step.

    python -m bench.cuda_path [--only rng,methods,speed] [--out bench/results/cuda_path.json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.common import ROOT

PARTS = ("rng", "methods", "speed")
# Whole vocabularies: MarkLLM's small test, Llama 2 and Mistral v0.1, Mistral v0.3, GPT-2, Llama 3, Qwen 2, Gemma.
VOCABULARIES = (700, 32000, 32768, 50257, 128256, 151936, 256000)
HASH_KEY = 15485863  # KGW's default: a green list is seeded by hash_key x the previous token
PROMPTS = (
    "What are the early signs of type 2 diabetes and how is it diagnosed?",
    "How should a patient with atrial fibrillation take warfarin?",
    "What is the recommended dose of amoxicillin for a child with otitis media?",
    "Summarize: my mother has had a persistent cough for three weeks and now has a fever; should she see a doctor?",
)


def markllm_seeds(vocabulary: int, count: int, rng: random.Random) -> list[int]:
    return [HASH_KEY * rng.randrange(vocabulary) for _ in range(count)]


def resident_blocks() -> int:
    """The blocks of 256 threads this GPU keeps resident: the cap of CUDA's random kernel's grid."""
    import torch

    from fwsapp.watermark import cuda_rng

    properties = torch.cuda.get_device_properties(0)
    return properties.multi_processor_count * (properties.max_threads_per_multi_processor // cuda_rng.BLOCK)


def rng_part(seeds_per_vocabulary: int) -> dict:
    import numpy as np
    import torch

    from fwsapp.watermark import cuda_rng

    generator = torch.Generator(device="cuda")
    blocks = resident_blocks()
    past_resident = blocks * cuda_rng.BLOCK + 4099  # one grid more than the GPU holds: the cap decides the draws
    cases = [(n, None) for n in VOCABULARIES] + [(past_resident, blocks)]
    draw = random.Random(0)
    rows = []
    for n, cap in cases:
        seeds = markllm_seeds(n, seeds_per_vocabulary, draw) + [0, 1, 42, 2**63 - 1]
        same, judged, judged_right = 0, 0, 0
        started = time.perf_counter()
        for seed in seeds:
            generator.manual_seed(seed)
            native = torch.randperm(n, generator=generator, device="cuda").cpu().numpy()
            emulated = cuda_rng.randperm(n, seed, cap)
            same += bool(np.array_equal(native, emulated))
            position = np.empty(n, dtype=np.int64)
            position[native] = np.arange(n)
            for token in (draw.randrange(n) for _ in range(8)):
                limit = n // 2
                answer = cuda_rng.rank_below_by_key(n, seed, token, limit, cap)
                if answer is not None:
                    judged += 1
                    judged_right += answer == (position[token] < limit)
        rows.append({"vocabulary": n, "cuda_blocks": cap, "seeds": len(seeds), "identical_permutations": same,
                     "one_key_judged": judged, "one_key_right": judged_right,
                     "seconds": round(time.perf_counter() - started, 2)})
        print(f"rng n={n} cap={cap}: {same}/{len(seeds)} permutations identical, one-key {judged_right}/{judged}",
              flush=True)
    return {"gpu": torch.cuda.get_device_name(0), "resident_blocks": blocks, "torch": torch.__version__,
            "cases": rows}


def token_level_methods() -> list[str]:
    from fwsapp.watermark import methods

    return [name for name in methods.watermark_names() if methods.info(name).unit == "token"]


def draws_natively(watermark) -> bool:
    """Whether the watermark draws its permutations from a CUDA generator (a VocabularyShuffle among its parts)."""
    from fwsapp.watermark.rng import VocabularyShuffle

    parts, seen = [watermark], set()
    while parts:
        part = parts.pop()
        if id(part) in seen or not hasattr(part, "__dict__"):
            continue
        seen.add(id(part))
        if isinstance(part, VocabularyShuffle):
            return part.native_cuda
        parts.extend(vars(part).values())
    return False


def methods_part(new_tokens: int) -> dict:
    import torch

    from fwsapp.generation.generate import generate_batch
    from fwsapp.generation.run_config import DEFAULT_SAMPLING
    from fwsapp.models import load_model
    from fwsapp.watermark import methods
    from fwsapp.watermark.factory import create
    from tests.paper_shapes import SHAPES, build

    sampling = {**DEFAULT_SAMPLING, "min_new_tokens": new_tokens}
    results = {}
    with tempfile.TemporaryDirectory() as root:
        for shape in SHAPES:
            folder = build(shape, Path(root) / shape)
            lm = load_model(str(folder), device="cuda")
            prompt_ids = [lm.tokenizer(prompt)["input_ids"] for prompt in PROMPTS]
            generated = {}
            for method in token_level_methods():
                # The tests' cheaper settings, but the green lists drawn as on a GPU whatever the tests draw with.
                params = {key: value for key, value in methods.info(method).test_params.items() if key != "rng"}
                try:
                    watermark = create(method, lm.vocab_size, params, lm=lm)
                    marked = generate_batch(lm, list(PROMPTS), new_tokens, sampling, 7, watermark)
                    texts = [(ids, context) for ids, context in zip(marked.token_ids, prompt_ids)]
                    found = watermark.detect_many(texts)
                    generated[method] = {"params": params, "texts": texts,
                                         "gpu_scores": [detection.score for detection in found],
                                         "found": sum(watermark.is_watermarked(detection) for detection in found),
                                         "native_generator": draws_natively(watermark)}
                except Exception as error:  # a method this machine lacks something for: say what, go on
                    generated[method] = {"error": f"{type(error).__name__}: {error}"}
            del lm
            torch.cuda.empty_cache()
            request = Path(root) / f"{shape}.json"
            request.write_text(json.dumps({"folder": str(folder), "methods": {
                method: {key: entry[key] for key in ("params", "texts")}
                for method, entry in generated.items() if "texts" in entry}}))
            # The same ids detected where no GPU is seen: the green lists come from the emulation.
            subprocess.run([sys.executable, "-m", "bench.cuda_path", "--detect-on-cpu", str(request)], check=True,
                           cwd=ROOT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
            cpu_scores = json.loads(request.with_suffix(".scores.json").read_text())
            for method, entry in generated.items():
                if "texts" not in entry:
                    print(f"methods {shape} {method}: {entry['error']}", flush=True)
                    continue
                cpu = cpu_scores[method]
                entry["cpu_scores"] = cpu
                entry["identical"] = cpu == entry["gpu_scores"]
                entry["tokens"] = [len(ids) for ids, _ in entry.pop("texts")]
                print(f"methods {shape} {method}: {entry['found']}/{len(PROMPTS)} found, GPU and CPU scores "
                      f"{'identical' if entry['identical'] else 'DIFFER'} (native generator: "
                      f"{entry['native_generator']})", flush=True)
            results[shape] = generated
    return results


def detect_on_cpu(request_path: str) -> None:
    """The `methods` part's other process: detect each method's ids with no GPU in sight."""
    import torch

    from fwsapp.models import load_model
    from fwsapp.watermark.factory import create

    assert not torch.cuda.is_available()
    request = json.loads(Path(request_path).read_text())
    lm = load_model(request["folder"], device="cpu")
    scores = {}
    for method, entry in request["methods"].items():
        watermark = create(method, lm.vocab_size, entry["params"], lm=lm)
        scores[method] = [detection.score for detection in watermark.detect_many(
            [(ids, context) for ids, context in entry["texts"]])]
    Path(request_path).with_suffix(".scores.json").write_text(json.dumps(scores))


def mistral_7b_folder(folder: Path) -> Path:
    """Mistral-7B-v0.1's architecture with random weights and its own tokenizer, saved as a model folder."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM

    from tests.paper_shapes import tokenizer_for

    tokenizer, _ = tokenizer_for("biomistral", folder)
    config = MistralConfig(vocab_size=len(tokenizer), hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                           num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=32768,
                           sliding_window=4096, rope_theta=10000.0, bos_token_id=tokenizer.bos_token_id,
                           eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = MistralForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    del model
    torch.cuda.empty_cache()
    return folder


def speed_part(new_tokens: int, budget_seconds: float) -> dict:
    import torch

    from fwsapp.generation.generate import generate_batch
    from fwsapp.generation.run_config import DEFAULT_SAMPLING
    from fwsapp.models import load_model
    from fwsapp.watermark.factory import create

    prompts = [PROMPTS[index % len(PROMPTS)] for index in range(16)]
    sampling = {**DEFAULT_SAMPLING, "min_new_tokens": new_tokens}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=ROOT / "cache") as root:
        folder = mistral_7b_folder(Path(root) / "mistral-7b-shape")
        saved = time.perf_counter()
        lm = load_model(str(folder), device="cuda", dtype="bf16")
        loaded = time.perf_counter()
        print(f"speed: 7B folder saved in {saved - started:.1f} s, loaded by load_model in {loaded - saved:.1f} s "
              f"({lm.description})", flush=True)

        def timed(watermark) -> dict:
            torch.cuda.synchronize()
            batch = generate_batch(lm, prompts, new_tokens, sampling, 3, watermark)
            torch.cuda.synchronize()
            tokens = sum(len(ids) for ids in batch.token_ids)
            row = {"seconds": round(batch.seconds, 3), "tokens": tokens, "tokens_per_s": round(tokens / batch.seconds)}
            if watermark is not None:
                found = watermark.detect_many([(ids, ()) for ids in batch.token_ids])
                row["found"] = sum(watermark.is_watermarked(detection) for detection in found)
            return row

        generate_batch(lm, prompts[:2], 8, {**sampling, "min_new_tokens": 8}, 1)  # warm-up
        rows = {"unwatermarked": timed(None)}
        for method in token_level_methods():
            if time.perf_counter() - loaded > budget_seconds:
                rows[method] = {"error": "not timed: the part's time budget was spent"}
                continue
            try:
                rows[method] = timed(create(method, lm.vocab_size, {}, lm=lm))
            except Exception as error:
                rows[method] = {"error": f"{type(error).__name__}: {error}"}
            print(f"speed {method}: {rows[method]}", flush=True)
        rows["unwatermarked, again"] = timed(None)
        plain = min(rows["unwatermarked"]["seconds"], rows["unwatermarked, again"]["seconds"])
        for row in rows.values():
            if "seconds" in row:
                row["ratio_to_unwatermarked"] = round(row["seconds"] / plain, 3)
        print(f"speed unwatermarked: {rows['unwatermarked']} / {rows['unwatermarked, again']}", flush=True)
    return {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "model": lm.description,
            "batch": len(prompts), "new_tokens": new_tokens, "save_seconds": round(saved - started, 1),
            "load_seconds": round(loaded - saved, 1), "arms": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(PARTS), help="comma-separated parts: " + ", ".join(PARTS))
    parser.add_argument("--seeds", type=int, default=100, help="seeds per vocabulary in the rng part")
    parser.add_argument("--tokens", type=int, default=48, help="new tokens per text in the methods part")
    parser.add_argument("--speed-tokens", type=int, default=200)
    parser.add_argument("--speed-budget", type=float, default=150, help="seconds of the speed part's method arms")
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "cuda_path.json"))
    parser.add_argument("--detect-on-cpu", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.detect_on_cpu:
        detect_on_cpu(args.detect_on_cpu)
        return 0
    import torch

    parts = [part.strip() for part in args.only.split(",") if part.strip()]
    unknown = sorted(set(parts) - set(PARTS))
    if unknown:
        parser.error(f"--only: unknown part(s) {', '.join(unknown)}; choose from {', '.join(PARTS)}.")
    if not torch.cuda.is_available():
        parser.error("this benchmark needs a CUDA GPU that torch can use (torch.cuda.is_available() is False).")
    out = Path(args.out)
    record = json.loads(out.read_text()) if out.exists() else {}
    runs = {"rng": lambda: rng_part(args.seeds), "methods": lambda: methods_part(args.tokens),
            "speed": lambda: speed_part(args.speed_tokens, args.speed_budget)}
    failed = False
    for part in parts:
        started = time.perf_counter()
        try:
            record[part] = runs[part]()
        except Exception:  # one part's failure is reported and the others still run
            failed = True
            record[part] = {"error": traceback.format_exc()}
            print(record[part]["error"], flush=True)
        record[part]["part_seconds"] = round(time.perf_counter() - started, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(record, indent=1) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
