"""SWEET (Lee et al., 2024): KGW that watermarks, and detects, only high-entropy positions.

Code is low-entropy text where a green-list bias would either fail or spoil the output; medical text has
such stretches too (drug names, fixed phrases). At generation, δ is added only where the entropy of the
next-token distribution exceeds τ. Detection recomputes those entropies with the model and counts only
high-entropy tokens:  z = (N_h^G − γ·N_h) / sqrt(N_h·γ·(1 − γ)).

Green lists use SWEET's seeding in MarkLLM 0.1.5 (hash key × previous token), so they differ from KGW's.
"""
from __future__ import annotations

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.models.teacher_forcing import token_entropy
from fwsapp.watermark import methods
from fwsapp.watermark.kgw import KGW, KGWLogitsProcessor


class SWEETLogitsProcessor(KGWLogitsProcessor):
    def __init__(self, green_lists, delta: float, entropy_threshold: float):
        super().__init__(green_lists, delta)
        self.entropy_threshold = entropy_threshold

    def green_mask(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        high_entropy = (token_entropy(scores) > self.entropy_threshold).cpu().unsqueeze(-1)
        return self.green_lists.batch_mask(input_ids) & high_entropy


class SWEET(KGW, info=methods.SWEET):
    seeding = "sweet"

    def logits_processor(self) -> LogitsProcessor:
        return SWEETLogitsProcessor(self.green_lists, self.params["delta"], self.params["entropy_threshold"])

    def model_statistics(self) -> list:
        return ["entropy"]

    def model_spares(self, stats) -> np.ndarray:
        """A token drawn where the entropy was at or below τ carries no bias, and is not scored (nor is the first token
        of a text with no context, whose entropy is unknown, −inf)."""
        return ~(stats["entropy"] > self.params["entropy_threshold"])
