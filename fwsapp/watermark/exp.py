"""EXP (Aaronson, 2023): the exponential, or Gumbel, watermark.

At each step the last `prefix_length` tokens seed a generator that draws r_v ~ U(0, 1) for every token v, and the
token taken is argmax_v r_v^(1/p_v): an exact sample from p over random r, made deterministic by the key.
Detection redraws each token's r and sums −log(1 − r_t): for text the key did not choose, each term is Exp(1), so
the sum over n tokens is Gamma(n, 1), and its survival function is the p-value (lower = watermarked).

Random numbers are MarkLLM 0.1.5's EXP: `torch.rand(V)` on a CPU generator seeded with
hash_key × (product of the last prefix_length tokens mod V), so its scores are reproduced
(tests/test_watermarks.py). The scheme vLLM ships natively is this one.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from scipy.stats import gamma as gamma_distribution
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import ExponentialSum
from fwsapp.watermark.base import Detection, Watermark
from fwsapp.watermark.kgw import multiplied_seed


class KeyedUniforms:
    """r ~ U(0, 1)^V for the token after a prefix, from a CPU generator seeded as MarkLLM seeds it."""

    def __init__(self, vocab_size: int, hash_key: int, prefix_length: int):
        self.vocab_size = vocab_size
        self.hash_key = hash_key
        self.prefix_length = prefix_length
        self.generator = torch.Generator(device="cpu")

    def draw(self, prefix: Sequence[int]) -> torch.Tensor:
        self.generator.manual_seed(multiplied_seed(prefix, self.prefix_length, self.hash_key, self.vocab_size))
        return torch.rand(self.vocab_size, generator=self.generator)


def exponential_choice(probs: torch.Tensor, uniforms: torch.Tensor, top_k: int = 0) -> torch.Tensor:
    """argmax r^(1/p) per row (among the top_k likeliest when top_k > 0), as log(r)/p to stay finite."""
    keys = torch.where(probs > 0, torch.log(uniforms) / probs, torch.tensor(float("-inf")))
    if top_k > 0:
        kept = torch.topk(probs, min(top_k, probs.shape[-1]), dim=-1).indices
        keys = torch.full_like(keys, float("-inf")).scatter(1, kept, keys.gather(1, kept))
    return keys.argmax(dim=-1)


class EXPLogitsProcessor(LogitsProcessor):
    """Every logit but the chosen token's becomes −inf, so the sampler after it returns that token."""

    def __init__(self, uniforms: KeyedUniforms, top_k: int):
        self.uniforms = uniforms
        self.top_k = top_k

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.uniforms.prefix_length:
            return scores
        width = min(scores.shape[-1], self.uniforms.vocab_size)
        probs = torch.softmax(scores[:, :width].float(), dim=-1).cpu()
        draws = torch.stack([self.uniforms.draw(row)[:width] for row in input_ids.tolist()])
        chosen = exponential_choice(probs, draws, self.top_k).to(scores.device)
        return torch.full_like(scores, float("-inf")).scatter(1, chosen.unsqueeze(1), 0.0)


class EXP(Watermark, info=methods.EXP):
    evidence = ExponentialSum()

    def __init__(self, vocab_size: int, lm=None, **params):
        super().__init__(vocab_size, lm, **params)
        self.uniforms = KeyedUniforms(vocab_size, self.params["hash_key"], self.params["prefix_length"])

    def logits_processor(self) -> LogitsProcessor:
        return EXPLogitsProcessor(self.uniforms, self.params["top_k"])

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        prefix_length = self.params["prefix_length"]
        context = list(context_ids)[-prefix_length:]
        full = context + [int(token) for token in token_ids]
        flags, values, total = [], [], 0.0
        for end in range(len(context), len(full)):
            token = full[end]
            if end < prefix_length or not 0 <= token < self.vocab_size:
                flags.append(-1)
                values.append(0.5)
                continue
            evidence = -float(np.log1p(-float(self.uniforms.draw(full[:end])[token])))
            total += evidence
            flags.append(int(evidence > np.log(2)))  # above the median of Exp(1): half of unwatermarked tokens are
            values.append(evidence / (evidence + 1))  # 0.5 at Exp(1)'s mean, as MarkLLM's view
        scored = sum(flag >= 0 for flag in flags)
        p_value = float(gamma_distribution.sf(total, scored)) if scored else 1.0
        return Detection(score=p_value, p=p_value, statistic=total, num_tokens_scored=scored, token_flags=flags,
                         token_values=values)
