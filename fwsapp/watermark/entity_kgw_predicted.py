"""EntityKGW-Predict: EntityKGW that also leaves a step alone when the model is about to start a lexicon name.

EntityKGW never boosts a token that starts a lexicon name, while δ goes to the green tokens beside it. So when the
model wants to name a disease, the watermark pulls it towards a green alternative, and the name it then writes is
often one the lexicon does not hold: 73 of the 84 disease mentions that began under EntityKGW's bias were not lexicon
names (bench.entity_mechanism). A name is protected only once its first token is written.

This variant predicts the start from the context instead. Where the unwatermarked next-token distribution puts at
least `start_mass` of its probability on tokens that start a lexicon name, the step is not biased at all, so the model
starts the name it would have written, or not, as it would unwatermarked. Detection reads the same mass by teacher
forcing, so it needs the model, as SWEET's does.
"""
from __future__ import annotations

import numpy as np
import torch

from fwsapp.models.teacher_forcing import Statistic
from fwsapp.watermark import methods
from fwsapp.watermark.entity_kgw import EntityKGW, EntityKGWLogitsProcessor


def start_mass(starts: np.ndarray) -> Statistic:
    """The probability the next-token distribution puts on the tokens that start a lexicon name."""
    indices = torch.from_numpy(np.flatnonzero(starts))

    def compute(log_probs, chosen):
        return log_probs[:, indices[indices < log_probs.shape[1]].to(log_probs.device)].exp().sum(1)

    return Statistic("start_mass", compute)


class PredictedStartLogitsProcessor(EntityKGWLogitsProcessor):
    """EntityKGW's processor, whose model gate also withholds δ where a lexicon name is likely to start."""

    def __init__(self, green_lists, delta: float, trie, entropy_threshold: float, threshold: float):
        super().__init__(green_lists, delta, trie, entropy_threshold)
        self.threshold = threshold
        self.mass = start_mass(trie.starts)  # the statistic the detector teacher-forces, read here from the logits

    def model_allows(self, scores: torch.FloatTensor) -> torch.Tensor:
        mass = self.mass.compute(torch.log_softmax(scores.float(), dim=-1), None)
        return super().model_allows(scores) & (mass < self.threshold).cpu()


class EntityKGWPredicted(EntityKGW, info=methods.ENTITY_KGW_PREDICTED):
    def __init__(self, vocab_size: int, lm=None, tokenizer=None, **params):
        super().__init__(vocab_size, lm=lm, tokenizer=tokenizer, **params)
        if lm is None:
            raise ValueError("EntityKGW-Predict reads the model's next-token distribution to detect: load one first.")

    def logits_processor(self) -> PredictedStartLogitsProcessor:
        return PredictedStartLogitsProcessor(self.green_lists, self.params["delta"], self.trie,
                                             self.params["entropy_threshold"], self.params["start_mass"])

    def model_statistics(self) -> list:
        return [*super().model_statistics(), start_mass(self.trie.starts)]

    def model_spares(self, stats) -> np.ndarray:
        return super().model_spares(stats) | (stats["start_mass"] >= self.params["start_mass"])
