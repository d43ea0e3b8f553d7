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
from functools import cached_property
from math import sqrt
from typing import Sequence

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from scipy.stats import norm
from transformers import LogitsProcessor
from transformers.generation.logits_process import SynthIDTextWatermarkLogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import MeanG
from fwsapp.watermark.detector import TokenDetector


# Contexts the processor remembers to mask a repeated one (transformers' context_history_size).
CONTEXT_HISTORY = 1024


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


class SynthID(TokenDetector, info=methods.SYNTHID):
    """On the skeleton: a token's evidence is its n-gram's g-values averaged over the layers, its context the n − 1
    tokens before it, a repeated context not scored (transformers' rule); the score is their mean."""

    evidence = MeanG()

    def keys(self) -> list[int]:
        """One key per tournament layer, derived from the single key shown in the UI."""
        return [int.from_bytes(hashlib.sha256(f"{self.params['key']}:{layer}".encode()).digest()[:4], "little") % 1000
                for layer in range(self.params["depth"])]

    def _processor_arguments(self) -> dict:
        return dict(ngram_len=self.params["ngram_len"], keys=self.keys(), sampling_table_size=2**16,
                    sampling_table_seed=0, context_history_size=CONTEXT_HISTORY,
                    device=torch.device("cpu") if self.lm is None else self.lm.device)

    def logits_processor(self) -> LogitsProcessor:
        # A fresh processor per generate call: it keeps per-batch state (context history).
        if self.params["top_k"] > 0:
            return TopKSynthIDProcessor(self.params["top_k"], **self._processor_arguments())
        return SynthIDTextWatermarkLogitsProcessor(**self._processor_arguments())

    @cached_property
    def g_values(self) -> SynthIDTextWatermarkLogitsProcessor:
        """transformers' processor, for the g-values of any n-gram (stateless there)."""
        return SynthIDTextWatermarkLogitsProcessor(**{**self._processor_arguments(), "device": torch.device("cpu")})

    def scores_repeated_contexts(self) -> bool:
        return False

    def repeated_contexts(self, contexts: np.ndarray, context_ids: Sequence[int]) -> np.ndarray:
        """transformers' rule (`compute_context_repetition_mask`): a context is repeated when it is among the
        CONTEXT_HISTORY contexts before it, the prompt's own included."""
        width = self.context_width()
        prompt = np.asarray(list(context_ids), dtype=np.int64)
        history = sliding_window_view(prompt[:-1], width).tolist() if len(prompt) > width else []
        last_seen, repeated = {}, []
        for index, context in enumerate(history + contexts.tolist()):
            key = tuple(context)
            if index >= len(history):
                repeated.append(key in last_seen and index - last_seen[key] <= CONTEXT_HISTORY)
            last_seen[key] = index
        return np.asarray(repeated, dtype=bool)

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The token's n-gram's g-values, averaged over the layers."""
        ngrams = torch.from_numpy(np.concatenate([contexts, tokens[:, None]], axis=1))[None]
        g_values = self.g_values.sample_g_values(self.g_values.compute_ngram_keys(ngrams))[0]
        return g_values.double().mean(-1).numpy()

    def statistic(self, evidence: np.ndarray, weights: np.ndarray | None = None) -> float:
        """The mean g-value; a half (what unwatermarked text averages) where nothing is scored."""
        return float(evidence.mean()) if len(evidence) else 0.5

    def z(self, statistic: float, scored: int) -> float:
        """The g-values taken as independent fair coins."""
        return (statistic - 0.5) / (0.5 / sqrt(scored * self.params["depth"])) if scored else 0.0

    def p_value(self, statistic: float, scored: int) -> float:
        """The normal tail of the z (the g-values as independent fair coins): the p the detection service answers, the
        Playground shows and the key audit counts false positives at."""
        return float(norm.sf(self.z(statistic, scored))) if scored else 1.0

    def score(self, statistic: float, scored: int, z: float | None, p: float | None) -> float:
        return statistic

    def token_values(self, evidence: np.ndarray) -> np.ndarray:
        return evidence
