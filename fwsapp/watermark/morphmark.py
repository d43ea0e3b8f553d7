"""MorphMark (Wang et al., 2025): KGW's green lists with a strength that adapts to the green mass.

At each step let P be the probability the model already puts on the green list. Below p₀ nothing changes:
steering a step with little green mass costs quality and buys little evidence. Above it a share r(P) of the red
mass moves to the green tokens, in proportion to their probabilities, with r rising with P (linear k·P,
exponential e^(kP) − 1, or logarithmic ln(kP + 1)); a share above 1 moves all of it. So the watermark pushes
where pushing is cheap, and the paper's claim, strength rising with green mass, is tested directly
(tests/test_watermarks.py). Detection is KGW's z-score; the green lists are MarkLLM's KGW ("time" f-scheme),
per row of a batch (MarkLLM's processor sums the green mass over the whole batch).
"""
from __future__ import annotations


import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.kgw import KGW, GreenLists


def strength(green_mass: torch.Tensor, kind: str, k: float, p_0: float) -> torch.Tensor:
    """r(P): the share of the red mass moved to green, 0 below p₀."""
    rising = {"linear": lambda mass: k * mass, "exp": lambda mass: torch.exp(k * mass) - 1,
              "log": lambda mass: torch.log(k * mass + 1)}[kind](green_mass)
    return torch.where(green_mass < p_0, torch.zeros_like(green_mass), rising)


def morph(probs: torch.Tensor, green: torch.Tensor, shares: torch.Tensor) -> torch.Tensor:
    """Rows of `probs` with the share `shares` (per row, capped at 1) of their red mass moved to green tokens."""
    green = green.to(probs.dtype)
    green_mass = (probs * green).sum(-1, keepdim=True)
    moved = shares.clamp(0, 1)[:, None] * (1 - green_mass)
    gained = probs * green * (1 + moved / green_mass.clamp_min(1e-12))
    kept = probs * (1 - green) * (1 - moved / (1 - green_mass).clamp_min(1e-12))
    return gained + kept


class MorphMarkLogitsProcessor(LogitsProcessor):
    def __init__(self, green_lists: GreenLists, kind: str, k: float, p_0: float):
        self.green_lists, self.kind, self.k, self.p_0 = green_lists, kind, k, p_0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.green_lists.prefix_length:
            return scores
        width = min(scores.shape[-1], self.green_lists.vocab_size)
        probs = torch.softmax(scores[:, :width].float(), dim=-1)
        green = self.green_lists.batch_mask(input_ids)[:, :width].to(probs.device)
        shares = strength((probs * green).sum(-1), self.kind, self.k, self.p_0)
        morphed = scores.clone()
        morphed[:, :width] = torch.log(morph(probs, green, shares)).to(scores.dtype)
        return morphed


class MorphMark(KGW, info=methods.MORPHMARK):

    def logits_processor(self) -> LogitsProcessor:
        p = self.params
        return MorphMarkLogitsProcessor(self.green_lists, p["type"], p[f"k_{p['type']}"], p["p_0"])


