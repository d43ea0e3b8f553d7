"""Spoofing by watermark stealing (Jovanović et al., ICML 2024), as MarkLLM's STEAL runs it: a forgery, not a removal.

The adversary observes watermarked answers and the unwatermarked answers to the same prompts, tokenised with its own
tokenizer. For each context (the tokens before a position, as many as seed the method's green list, taken as a set, as
STEAL's unordered default), it counts which tokens follow in each corpus. A token that follows a context at least
`min_count` times in the watermarked answers and more often, relative to the context's other tokens, than in the
unwatermarked ones is learned as favoured: its boost is the frequency ratio clipped to [1, clip], over clip, scaled so
the context's strongest token has 1 (a token never seen in the unwatermarked answers counts as strongest). It then
writes answers to prompts it never observed with its own model, adding strength × boost to each token's logit.

Those answers are detected with the run's method and key: the share called watermarked is the forgery success.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from functools import cached_property

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.robustness.attacks.base import Attacked, AttackInput, Forgery


def context_counts(texts: list[list[int]], width: int) -> dict[tuple[int, ...], Counter]:
    """For each context (the `width` tokens before a position, as a sorted tuple), how often each token follows it."""
    counts: dict[tuple[int, ...], Counter] = defaultdict(Counter)
    for tokens in texts:
        for position in range(width, len(tokens)):
            counts[tuple(sorted(tokens[position - width:position]))][tokens[position]] += 1
    return counts


class StolenWatermark:
    """What the adversary learned: per context, a boost in (0, 1] for each token it takes the watermark to favour."""

    def __init__(self, watermarked: list[list[int]], unwatermarked: list[list[int]], width: int, min_count: int,
                 clip: float):
        self.width, self.min_count, self.clip = width, min_count, clip
        self.watermarked = context_counts(watermarked, width)
        self.unwatermarked = context_counts(unwatermarked, width)
        self._boosts: dict[tuple[int, ...], dict[int, float]] = {}

    def boosts(self, context: tuple[int, ...]) -> dict[int, float]:
        """Token -> boost after `context` (a sorted tuple); empty where nothing was learned."""
        if context not in self._boosts:
            self._boosts[context] = self._learned(self.watermarked.get(context, Counter()),
                                                  self.unwatermarked.get(context, Counter()))
        return self._boosts[context]

    def _learned(self, marked: Counter, plain: Counter) -> dict[int, float]:
        marked_total, plain_total = sum(marked.values()), sum(plain.values())
        ratios = {token: (count / marked_total) / (plain[token] / plain_total)
                  for token, count in marked.items() if count >= self.min_count and plain[token]}
        unseen = [token for token, count in marked.items() if count >= self.min_count and not plain[token]]
        strongest = max([1.0, *ratios.values()]) + 1e-3
        ratios.update({token: strongest for token in unseen})
        clipped = {token: min(ratio, self.clip) / self.clip for token, ratio in ratios.items() if ratio >= 1}
        top = max(clipped.values(), default=0.0)
        return {token: value / top for token, value in clipped.items()} if top else {}

    @property
    def contexts(self) -> int:
        """Contexts with at least one token learned as favoured."""
        return sum(bool(self.boosts(context)) for context in self.watermarked)


class StolenBias(LogitsProcessor):
    """Adds strength × boost to the logits of the tokens learned as favoured after each row's context."""

    def __init__(self, stolen: StolenWatermark, strength: float):
        self.stolen, self.strength = stolen, strength
        self.steps = self.biased = 0

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        width = self.stolen.width
        for row in range(input_ids.shape[0]):
            self.steps += 1
            if input_ids.shape[1] < width:
                continue
            boosts = self.stolen.boosts(tuple(sorted(input_ids[row, input_ids.shape[1] - width:].tolist())))
            if boosts:
                self.biased += 1
                tokens = torch.tensor(list(boosts), device=scores.device)
                scores[row, tokens] += self.strength * torch.tensor(list(boosts.values()), device=scores.device,
                                                                    dtype=scores.dtype)
        return scores


class Spoofing(Forgery):
    """Resources: `adversary` (its loaded model), `observed` ((watermarked texts, unwatermarked texts) of the observed
    prompts), `context_width` (the tokens that seed the method's green list), `max_new_tokens` and `sampling` (the
    run's)."""

    @classmethod
    def answers(cls, params: dict) -> int:
        return params["forgeries"]

    @classmethod
    def prepare(cls, run: dict, params: dict, observed, model_loader) -> tuple[dict, str]:
        """The adversary's model (loaded), the observed answers, the width of the method's seeding context, and the run's
        answer length and sampling, so the forged answers are like the run's."""
        from fwsapp.generation.run_config import DEFAULT_SAMPLING
        from fwsapp.models import EMBEDDED_MODEL
        from fwsapp.watermark import methods

        if model_loader is None:
            raise ValueError("A forgery writes answers with the adversary's model: give a model loader.")
        config, declared = run["config"], methods.info(run["method"])
        # An imported run records no generation settings: the forger then writes as fwsapp generates, up to 200 tokens.
        length = config.get("max_new_tokens") or 200
        sampling = config.get("sampling") or {**DEFAULT_SAMPLING, "min_new_tokens": length}
        model = params["adversary"] or EMBEDDED_MODEL
        return {"adversary": model_loader(model),
                "observed": (list(observed.watermarked_text), list(observed.unwatermarked_text)),
                "context_width": declared.seeding_context(declared.checked_params(run["params"])),
                "max_new_tokens": length, "sampling": sampling}, model

    @cached_property
    def stolen(self) -> StolenWatermark:
        encode = self.resources["adversary"].tokenizer
        watermarked, unwatermarked = self.resources["observed"]
        ids = [encode(texts, add_special_tokens=False)["input_ids"] if texts else [] for texts in (watermarked, unwatermarked)]
        return StolenWatermark(*ids, self.resources["context_width"], self.params["min_count"], self.params["clip"])

    def attack_many(self, inputs: list[AttackInput]) -> list[Attacked]:
        from fwsapp.generation.generate import generate_batch

        adversary = self.resources["adversary"]
        forged = []
        for item in inputs:  # one at a time, each from its own seed: a sample's forgery is the same in any batch
            bias = StolenBias(self.stolen, self.params["strength"])
            seed = int(np.random.default_rng([self.seed, item.sample_idx]).integers(2**31))
            batch = generate_batch(adversary, [item.prompt], self.resources["max_new_tokens"], self.resources["sampling"],
                                   seed, processors=(bias,))
            forged.append(Attacked(batch.texts[0], note=f"biased {bias.biased} of {bias.steps} tokens; learned "
                                                        f"{self.stolen.contexts:,} contexts"))
        return forged

    def attack(self, item: AttackInput, rng: np.random.Generator) -> Attacked:
        return self.attack_many([item])[0]
