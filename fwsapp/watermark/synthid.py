"""SynthID-Text (Dathathri et al., 2024), through transformers' SynthIDTextWatermarkLogitsProcessor.

Tournament sampling over `depth` keyed g-functions of the last `ngram_len` tokens, among the `top_k`
most likely tokens (40, as in the SynthID paper; 0 uses the whole vocabulary, as transformers does).
transformers scores every vocabulary entry at every step, a cost that grows with the batch; restricting
the tournament to the top-k candidates keeps it small, and detection is unchanged (g-values depend only
on the context and the token). SynthID's Bayesian
detector must be trained on watermarked and unwatermarked text from the same model; fwsapp uses the
untrained mean-score detector instead: the mean g-value over the generated tokens' n-grams (0.5 for
unwatermarked text), skipping repeated contexts as the processor does. The z-value beside it treats
the g-values as independent fair coins.
"""
from __future__ import annotations

import hashlib
from math import sqrt
from typing import Sequence

import torch
from transformers import LogitsProcessor
from transformers.generation.logits_process import SynthIDTextWatermarkLogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import MeanG
from fwsapp.watermark.base import Detection, Watermark


class TopKSynthIDProcessor(SynthIDTextWatermarkLogitsProcessor):
    """transformers' processor, run on each row's top-k candidates; every other token gets -inf."""

    def __init__(self, top_k: int, **kwargs):
        super().__init__(**kwargs)
        self.top_k = top_k
        self._candidates: torch.Tensor | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        top_scores, self._candidates = scores.topk(min(self.top_k, scores.shape[-1]), dim=-1)
        updated = super().__call__(input_ids, top_scores)
        return torch.full_like(scores, float("-inf")).scatter(1, self._candidates, updated)

    def _compute_keys(self, n_minus_1_grams: torch.LongTensor, indices: torch.LongTensor):
        # The parent passes positions 0..k-1; the keys must hash the candidates' real token ids.
        candidates = self._candidates if self._candidates is not None else indices
        return super()._compute_keys(n_minus_1_grams, candidates)


class SynthID(Watermark, info=methods.SYNTHID):
    evidence = MeanG()

    def keys(self) -> list[int]:
        """One key per tournament layer, derived from the single key shown in the UI."""
        return [int.from_bytes(hashlib.sha256(f"{self.params['key']}:{layer}".encode()).digest()[:4], "little") % 1000
                for layer in range(self.params["depth"])]

    def _processor_arguments(self) -> dict:
        return dict(ngram_len=self.params["ngram_len"], keys=self.keys(), sampling_table_size=2**16,
                    sampling_table_seed=0, context_history_size=1024,
                    device=torch.device("cpu") if self.lm is None else self.lm.device)

    def logits_processor(self) -> LogitsProcessor:
        # A fresh processor per generate call: it keeps per-batch state (context history).
        if self.params["top_k"] > 0:
            return TopKSynthIDProcessor(self.params["top_k"], **self._processor_arguments())
        return SynthIDTextWatermarkLogitsProcessor(**self._processor_arguments())

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        processor = SynthIDTextWatermarkLogitsProcessor(**self._processor_arguments())  # g-values for any token
        context = list(context_ids)
        ids = torch.tensor([context + list(token_ids)], device=processor.device)
        ngram = self.params["ngram_len"]
        # A text too short to hold an n-gram, or all of whose n-grams repeat, scores nothing: every token a half, as
        # the length view's evidence reads it.
        nothing = Detection(score=0.5, z=0.0, num_tokens_scored=0, token_flags=[-1] * len(token_ids),
                            token_values=[0.5] * len(token_ids))
        if ids.shape[1] < ngram:
            return nothing
        g_values = processor.compute_g_values(ids)[0].float()  # (positions, depth); position p ends at token p + ngram − 1
        mask = processor.compute_context_repetition_mask(ids)[0].bool()
        ends = torch.arange(ngram - 1, ids.shape[1], device=ids.device)
        mask &= ends >= len(context)  # only n-grams that end in a generated token
        scored = g_values[mask]
        count = int(mask.sum())
        if count == 0:
            return nothing
        mean = float(scored.mean())
        z = (mean - 0.5) / (0.5 / sqrt(scored.numel()))
        flags, values = [-1] * len(token_ids), [0.5] * len(token_ids)
        for position, end in enumerate(ends.tolist()):
            if mask[position]:
                values[end - len(context)] = float(g_values[position].mean())  # the score is the mean of these
                flags[end - len(context)] = int(values[end - len(context)] > 0.5)
        return Detection(score=mean, z=z, num_tokens_scored=count, token_flags=flags, token_values=values)
