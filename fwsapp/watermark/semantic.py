"""Semantic watermarks: keyed on the meaning of each sentence, not on its tokens (SemStamp, k-SemStamp).

Each sentence's embedding falls in one of a few regions of the embedding space (an LSH signature, or a k-means
cluster). The region of one sentence keys which regions are valid for the next, a share γ of them, as MarkLLM keys them:
a permutation of the regions drawn from torch's generator seeded by key × region. Generation samples candidate
sentences until one lands in a valid region, clear of the regions' borders by a margin (fwsapp.generation.sentences);
detection embeds a text's sentences again and counts those in a valid region, a z-test over sentences, the first
sentence only keying the second. A paraphrase that keeps each sentence's meaning keeps its region, which is what makes
these watermarks robust where token-level ones are not.

A sentence's verdict is flagged on its last token (green 1, red 0), so the token view shows where each sentence was
scored, and the length view's statistic after T tokens is the z over the sentences complete by then: a green count
(fwsapp.watermark.evidence.GreenCount) whose N counts sentences, not tokens.
"""
from __future__ import annotations

from abc import abstractmethod
from functools import cached_property

import numpy as np
import torch

from fwsapp.watermark.base import BatchedDetector, Detection, GenerationBatch, Texts
from fwsapp.watermark.evidence import GreenCount, green_p_value, green_z

# Abbreviations after which a full stop ends no sentence, for the untrained Punkt splitter (nltk's trained English model
# is a download, which this machine cannot make).
ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "dr", "mr", "mrs", "ms", "prof", "fig", "approx", "no", "st", "mg", "ml"}


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The character spans of `text`'s sentences (nltk's Punkt, its rules without a trained model)."""
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    parameters = PunktParameters()
    parameters.abbrev_types = set(ABBREVIATIONS)
    return list(PunktSentenceTokenizer(parameters).span_tokenize(text))


class SemanticWatermark(BatchedDetector):
    """A sentence-level watermark: `regions` regions of the embedding space, a region for each sentence embedding and
    whether it is clear of the borders by the margin. Generation goes through `fwsapp.generation.sentences`."""

    evidence = GreenCount()  # one flag per sentence, on its last token

    def __init__(self, vocab_size: int, lm=None, tokenizer=None, encoder=None, **params):
        """`tokenizer` (a tokenizers.TextTokenizer; `factory.create` gives the model's own where none is named) turns
        token ids back into text; `encoder` embeds sentences (the shipped MiniLM by default)."""
        super().__init__(vocab_size, lm, **params)
        if tokenizer is None:
            raise ValueError(f"{self.name} needs the tokenizer to turn token ids back into sentences.")
        self.tokenizer = tokenizer
        self._encoder = encoder

    @cached_property
    def encoder(self):
        from fwsapp.models.encoder import load_encoder

        return self._encoder or load_encoder()

    @property
    @abstractmethod
    def regions(self) -> int:
        """How many regions the embedding space is cut into."""

    @abstractmethod
    def placed(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(each unit-length embedding's region, whether it is clear of the region's borders by the margin)."""

    def valid_regions(self, region: int) -> set[int]:
        """The regions valid after a sentence in `region`: the first γ share of a permutation keyed by key × region."""
        generator = torch.Generator().manual_seed(int(self.params["key"]) * int(region))
        accepted = int(self.regions * self.params["gamma"])
        return set(torch.randperm(self.regions, generator=generator)[:accepted].tolist())

    def region_of(self, text: str) -> int:
        """The region of a text's embedding as a whole (the prompt, which keys the first sentence)."""
        return int(self.placed(self.encoder.encode([text]))[0][0])

    def judged(self, previous_region: int, candidates: list[str]) -> list[tuple[int, bool]]:
        """Each candidate sentence's region and whether generation keeps it: in a valid region and clear of its
        borders."""
        regions, clear = self.placed(self.encoder.encode(candidates))
        valid = self.valid_regions(previous_region)
        return [(int(region), bool(is_clear and region in valid)) for region, is_clear in zip(regions, clear)]

    # Generation is sentence by sentence (fwsapp.generation.sentences), never a logits processor.
    def logits_processor(self):
        return None

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        raise TypeError(f"{self.name} generates sentence by sentence with rejection sampling, not with logits processors.")

    def detect_many(self, texts: Texts) -> list[Detection]:
        decoded = [self.tokenizer.decode(list(token_ids)) for token_ids, _ in texts]
        spans = [sentence_spans(text) for text in decoded]
        sentences = [text[start:end] for text, own in zip(decoded, spans) for start, end in own]
        regions = iter(self.placed(self.encoder.encode(sentences))[0].tolist() if sentences else [])
        return [self._detection(list(token_ids), [next(regions) for _ in own], own)
                for (token_ids, _), own in zip(texts, spans)]

    def last_token(self, token_ids: list[int], end: int) -> int:
        """The token whose text reaches character `end` of the decoded text: the first prefix that long, found by
        bisection (a prefix's decoded length grows with it)."""
        low, high = 1, len(token_ids)
        while low < high:
            middle = (low + high) // 2
            if len(self.tokenizer.decode(token_ids[:middle])) >= end:
                high = middle
            else:
                low = middle + 1
        return low - 1

    def _detection(self, token_ids: list[int], regions: list[int], spans: list[tuple[int, int]]) -> Detection:
        """The z over sentences 2.. of a text, each scored against the regions its predecessor keys (MarkLLM's
        detector), its verdict flagged on the sentence's last token; p the exact binomial tail, as a text holds few
        sentences (3 of 3 valid at γ 0.25: z 3.0, normal p 0.0013, exact 0.016)."""
        flags = [-1] * len(token_ids)
        valid = [int(region in self.valid_regions(previous)) for previous, region in zip(regions, regions[1:])]
        for green, (_, end) in zip(valid, spans[1:]):
            flags[self.last_token(token_ids, end)] = green
        green, gamma = sum(valid), self.params["gamma"]
        z = float(green_z(green, len(valid), gamma))
        return Detection(score=z, num_tokens_scored=len(valid), z=z, p=green_p_value(green, len(valid), gamma),
                         token_flags=flags)
