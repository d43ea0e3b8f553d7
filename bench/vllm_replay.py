"""Each vLLM watermark replayed step by step against vLLM 0.33.0's own watermarker, and what it does to perplexity.

Run: .venv/bin/python -m bench.vllm_replay [--n 64] [--tokens 48] [--key 42] [--db cache/bench-vllm-replay.duckdb]

For each method a serving engine applies (the registry's `served_by`), fwsapp generates n answers to the paper's
HealthQA questions (../shared/data) with the embedded model, sampling at temperature 1 (fwsapp's defaults). At every
step its logits processor's input is recorded: the logits it saw (after temperature, top-k and top-p) and each row's
context. vLLM's `GumbelWatermarker` (for the dual key, its draft and target watermarkers) then picks from the same
logits and contexts, and the bench counts the steps where fwsapp's token is not vLLM's (for the dual key: neither
key's). The embedded model then reads every answer back (perplexity, teacher-forced on the answer's own ids), and the
bench reports the geometric mean of the watermarked answers' perplexity against the unwatermarked ones', paired by
prompt, with a bootstrap interval of the ratio. Results go to bench/results/vllm_replay.json.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from bench.common import ROOT

QUESTIONS = ROOT.parent / "shared" / "data" / "healthqa_qa.json"


def replay(n: int, tokens: int, key: int, db: Path, seed: int = 0) -> list[dict]:
    import torch

    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models import load_model
    from fwsapp.quality.perplexity import perplexity
    from fwsapp.store import Store
    from fwsapp.watermark import methods, vllm_gumbel
    from tests.vllm_oracle import vllm_watermarking

    vllm = vllm_watermarking()
    lm = load_model()
    store = Store(db)
    steps: list[tuple[torch.Tensor, np.ndarray, torch.Tensor]] = []
    original = vllm_gumbel.GumbelLogitsProcessor._choice

    def recorded(self, logits, contexts):
        chosen = original(self, logits, contexts)
        steps.append((logits.clone(), contexts.copy(), chosen.clone()))
        return chosen

    vllm_gumbel.GumbelLogitsProcessor._choice = recorded
    results = []
    try:
        for entry in methods.METHODS:
            if not entry.served_by:
                continue
            steps.clear()
            config = RunConfig(task="qa", method=entry.name, dataset=str(QUESTIONS), n=n, max_new_tokens=tokens,
                               batch_size=16, seed=seed, params={"key": key})
            run_id = run_generation(config, store, lm)
            params = entry.checked_params(config.params)
            width = params["context_width"]
            if entry.name == "vLLM-Gumbel-DualKey":
                oracle = vllm.DualKeyGumbelWatermarker(key, width, alpha=params["alpha"])
                oracles = (oracle.draft_watermarker, oracle.target_watermarker)
            else:
                oracles = (vllm.GumbelWatermarker(key, width),)
            compared = diverged = routed_b = 0
            for logits, contexts, chosen in steps:  # only the runs' new generations were recorded
                picks = [oracle._sample_watermarked(logits, torch.tensor(contexts)).token_ids for oracle in oracles]
                matches = torch.stack([pick == chosen for pick in picks])
                compared += len(chosen)
                diverged += int((~matches.any(dim=0)).sum())
                if len(picks) == 2:  # a row both keys agree on is routed to neither in particular
                    routed_b += int((matches[1] & ~matches[0]).sum())
            rows = store.generations(run_id)
            prompts = [lm.tokenizer(prompt)["input_ids"] for prompt in rows.prompt]
            marked = perplexity(lm, [(prompt, list(ids)) for prompt, ids in zip(prompts, rows.watermarked_ids)])
            plain = perplexity(lm, [(prompt, list(ids)) for prompt, ids in zip(prompts, rows.unwatermarked_ids)])
            kept = [(m, p) for m, p in zip(marked, plain) if m and p]
            log_ratio = np.log([m for m, _ in kept]) - np.log([p for _, p in kept])
            rng = np.random.default_rng(seed)
            boot = [float(np.exp(rng.choice(log_ratio, len(log_ratio)).mean())) for _ in range(2000)]
            results.append({
                "method": entry.name, "params": {name: value for name, value in params.items() if name != "key"},
                "answers": len(kept), "new_tokens": tokens, "steps_compared": compared, "steps_diverged": diverged,
                "routed_to_key_b_only": routed_b if len(oracles) == 2 else None,
                "ppl_watermarked_geomean": float(np.exp(np.log([m for m, _ in kept]).mean())),
                "ppl_unwatermarked_geomean": float(np.exp(np.log([p for _, p in kept]).mean())),
                "ppl_ratio": float(np.exp(log_ratio.mean())),
                "ppl_ratio_95ci": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                "run_id": run_id,
            })
            print(json.dumps(results[-1]), flush=True)
    finally:
        vllm_gumbel.GumbelLogitsProcessor._choice = original
        store.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--key", type=int, default=42)
    parser.add_argument("--db", type=Path, default=ROOT / "cache" / "bench-vllm-replay.duckdb")
    args = parser.parse_args()
    results = replay(args.n, args.tokens, args.key, args.db)
    out = ROOT / "bench" / "results" / "vllm_replay.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    for row in results:
        low, high = row["ppl_ratio_95ci"]
        print(f"| {row['method']} | {row['answers']} | {row['steps_diverged']} of {row['steps_compared']:,} | "
              f"{row['ppl_watermarked_geomean']:.1f} | {row['ppl_unwatermarked_geomean']:.1f} | "
              f"{row['ppl_ratio']:.3f} ({low:.3f}–{high:.3f}) |")
    assert math.isfinite(sum(row["ppl_ratio"] for row in results))


if __name__ == "__main__":
    main()
