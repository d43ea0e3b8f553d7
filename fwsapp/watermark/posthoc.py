"""Post-hoc detectors: no watermark at generation; they tell model text (positives) from the dataset's
human reference text (negatives) by how the scoring model sees them. Larger scores mean model-written.

- LogRank: minus the mean log-rank of each token under the scoring model (model text ranks low).
- Fast-DetectGPT (Bao et al., 2024): conditional probability curvature, in its analytic form with the
  scoring model as its own sampler: (log p(x) − E[log p(x̃)]) / sqrt(Var[log p(x̃)]), where x̃ is drawn
  token by token from the model's own conditionals. Runs offline on the embedded model.
- DetectGPT (Mitchell et al., 2023): the log-likelihood drop under mask-and-refill perturbations, which
  needs a mask-filling model (T5 in the original): set FWSAPP_DETECTGPT_MASK_MODEL to a local T5 folder.
"""
from __future__ import annotations

import os
import random
from abc import abstractmethod
from typing import Callable, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.models.teacher_forcing import TokenStats, teacher_force
from fwsapp.watermark.base import BatchedDetector, Detection, GenerationBatch, Texts, Watermark



def scored_tokens(lm, texts: Texts, statistics: Sequence[str], batch_size: int = 16) -> list[TokenStats]:
    """Teacher-forced statistics of every token of each (token ids, context ids) text, in batches; a text with no
    context starts after BOS (or EOS)."""
    start = lm.tokenizer.bos_token_id if lm.tokenizer.bos_token_id is not None else lm.tokenizer.eos_token_id
    return teacher_force(lm, [(context_ids, token_ids) for token_ids, context_ids in texts], statistics, batch_size,
                         start_token=start)


class PostHoc(Watermark):
    """A detector with nothing to add at generation time."""

    def logits_processor(self) -> LogitsProcessor | None:
        return None

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        return {}


class TokenStatsDetector(BatchedDetector, PostHoc):
    """A post-hoc detector whose score is a function of the scoring model's statistics of the text's tokens."""

    # The teacher_forcing.STATISTICS the score reads.
    statistics: tuple[str, ...] = ()

    def detect_many(self, texts: Texts) -> list[Detection]:
        stats = scored_tokens(self.lm, texts, self.statistics)
        return [self.scored(found, len(token_ids)) if len(token_ids) else Detection(score=float("nan"), num_tokens_scored=0)
                for found, (token_ids, _) in zip(stats, texts)]

    @abstractmethod
    def scored(self, stats: TokenStats, length: int) -> Detection:
        """The detection of a text of `length` tokens from its stats."""


class LogRank(TokenStatsDetector, info=methods.LOGRANK):
    statistics = ("rank",)

    def scored(self, stats: TokenStats, length: int) -> Detection:
        return Detection(score=-float(np.log(stats["rank"]).mean()), num_tokens_scored=length)


class FastDetectGPT(TokenStatsDetector, info=methods.FAST_DETECTGPT):
    statistics = ("log_prob", "entropy", "log_prob_square")

    def scored(self, stats: TokenStats, length: int) -> Detection:
        # Under the model's own sampling, log p(x̃_t) has mean −H_t and variance E[(log p)²] − H_t².
        entropy = stats["entropy"]
        variance = (stats["log_prob_square"] - entropy ** 2).sum()
        score = float((stats["log_prob"].sum() + entropy.sum()) / np.sqrt(max(variance, 1e-12)))
        return Detection(score=score, z=score, num_tokens_scored=length)


class DetectGPT(PostHoc, info=methods.DETECTGPT):

    def __init__(self, vocab_size: int, lm=None, filler: Callable[[list[str]], list[str]] | None = None, **params):
        super().__init__(vocab_size, lm, **params)
        self.filler = filler or load_t5_filler()

    def log_likelihoods(self, texts: list[str], context_ids: Sequence[int]) -> np.ndarray:
        """Mean log p of each text's tokens after the context (NaN for an empty text)."""
        ids = [self.lm.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        stats = scored_tokens(self.lm, [(tokens, context_ids) for tokens in ids], ("log_prob",))
        return np.array([float(found["log_prob"].mean()) if tokens else float("nan") for found, tokens in zip(stats, ids)])

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        text = self.lm.tokenizer.decode(list(token_ids), skip_special_tokens=True)
        rng = random.Random(self.params["seed"])
        masked = [mask_spans(text, self.params["span_length"], self.params["mask_fraction"], rng)
                  for _ in range(self.params["perturbations"])]
        original, *perturbed = self.log_likelihoods([text, *self.filler(masked)], context_ids)
        values = np.array(perturbed)
        spread = values.std() or 1.0
        score = float((original - values.mean()) / spread)
        return Detection(score=score, z=score, num_tokens_scored=len(token_ids))


def mask_spans(text: str, span_length: int, fraction: float, rng: random.Random) -> str:
    """Replace about `fraction` of the words, in spans of `span_length`, with T5 sentinels."""
    words = text.split()
    spans = max(1, int(len(words) * fraction / span_length))
    starts = sorted(rng.sample(range(max(1, len(words) - span_length + 1)), min(spans, max(1, len(words) - span_length + 1))))
    out, position, sentinel = [], 0, 0
    for start in starts:
        if start < position:
            continue
        out.extend(words[position:start])
        out.append(f"<extra_id_{sentinel}>")
        sentinel += 1
        position = start + span_length
    out.extend(words[position:])
    return " ".join(out)


def load_t5_filler() -> Callable[[list[str]], list[str]]:
    """A T5 mask filler from FWSAPP_DETECTGPT_MASK_MODEL; a clear error when none is available."""
    source = os.environ.get(methods.MASK_MODEL_VARIABLE)
    if not source:
        raise ValueError(
            f"DetectGPT needs a mask-filling model (T5 in the original): set {methods.MASK_MODEL_VARIABLE} to a local "
            "t5-large (or t5-small) folder. Fast-DetectGPT needs none and runs offline."
        )
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForSeq2SeqLM.from_pretrained(source).eval()
    except OSError as error:
        raise ValueError(f"DetectGPT's mask-filling model {source!r} could not be loaded: {error}") from None

    def fill(masked: list[str]) -> list[str]:
        encoded = tokenizer(masked, return_tensors="pt", padding=True)
        with torch.inference_mode():
            outputs = model.generate(**encoded, max_new_tokens=64, do_sample=True, top_p=1.0)
        fills = tokenizer.batch_decode(outputs, skip_special_tokens=False)
        return [refill(text, fill_text) for text, fill_text in zip(masked, fills)]

    return fill


def refill(masked: str, generated: str) -> str:
    """Put T5's span predictions back at their sentinels (missing spans become empty)."""
    import re

    parts = re.split(r"<extra_id_\d+>", generated.replace("<pad>", "").replace("</s>", ""))[1:]
    result = masked
    for index in range(masked.count("<extra_id_")):
        result = result.replace(f"<extra_id_{index}>", parts[index].strip() if index < len(parts) else "", 1)
    return " ".join(result.split())
