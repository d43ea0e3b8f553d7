"""Sampling in a batch where each row draws from its own seed.

transformers samples every row of a batch from one generator, so a row's text depends on the rows beside it. Here
each row samples by the Gumbel-max trick: argmax(logits / T + G), with G drawn from a generator seeded by the row's
seed and the step. That is an exact draw from softmax(logits / T) (Gumbel 1954; as in Kuditipudi et al.'s EXP), and
it is the same in any batch, so a resumed job rewrites a sample as an uninterrupted one would.
"""
from __future__ import annotations

import torch
from transformers import LogitsProcessor

STEP_STRIDE = 1_000_003  # seeds of one row's steps never meet another row's


class RowSeededSampling(LogitsProcessor):
    """Use with greedy decoding (`do_sample=False`): the argmax of the processed scores is the sample."""

    def __init__(self, seeds: list[int], temperature: float, prompt_length: int):
        if temperature <= 0:
            raise ValueError("RowSeededSampling samples at a positive temperature; decode greedily at 0.")
        self.seeds, self.temperature, self.prompt_length = list(seeds), temperature, prompt_length

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_length
        uniform = torch.stack([
            torch.rand(scores.shape[1], generator=torch.Generator().manual_seed((seed * STEP_STRIDE + step) % 2**63))
            for seed in self.seeds
        ]).to(scores.device)
        gumbel = -torch.log(-torch.log(uniform.clamp(1e-20, 1.0 - 1e-7)))
        return scores.float() / self.temperature + gumbel
