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
from typing import Callable, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark.base import Detection, Param, Watermark

MASK_MODEL_VARIABLE = "FWSAPP_DETECTGPT_MASK_MODEL"


def token_log_probs(lm, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> torch.Tensor:
    """Log-softmax rows predicting each of `token_ids` (one row per token), given all before it."""
    context = list(context_ids) or [lm.tokenizer.bos_token_id or lm.tokenizer.eos_token_id]
    ids = torch.tensor([context + list(token_ids)], device=lm.device)
    with torch.inference_mode():
        logits = lm.model(ids).logits[0].float()
    return torch.log_softmax(logits[len(context) - 1: -1], dim=-1).cpu()


class PostHoc(Watermark):
    """A detector with nothing to add at generation time."""

    needs_model = True
    post_hoc = True

    def logits_processor(self) -> LogitsProcessor | None:
        return None

    def generation_kwargs(self, batch_size: int, seed: int) -> dict:
        return {}


class LogRank(PostHoc):
    name = "LogRank"
    description = "Post-hoc: minus the mean log-rank of the tokens under the scoring model (no watermark)."
    defaults = {"threshold": -1.0}
    threshold_param = "threshold"

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        if not token_ids:
            return Detection(score=float("nan"), num_tokens_scored=0)
        log_probs = token_log_probs(self.lm, token_ids, context_ids)
        targets = torch.tensor(list(token_ids)).clamp(max=log_probs.shape[1] - 1)
        chosen = log_probs.gather(1, targets[:, None])
        ranks = (log_probs > chosen).sum(dim=1) + 1
        return Detection(score=-float(torch.log(ranks.float()).mean()), num_tokens_scored=len(token_ids))


class FastDetectGPT(PostHoc):
    name = "Fast-DetectGPT"
    description = "Post-hoc: analytic sampling discrepancy under the scoring model itself (no watermark)."
    defaults = {"threshold": 2.0}
    threshold_param = "threshold"

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        if not token_ids:
            return Detection(score=float("nan"), num_tokens_scored=0)
        log_probs = token_log_probs(self.lm, token_ids, context_ids)
        probs = log_probs.exp()
        targets = torch.tensor(list(token_ids)).clamp(max=log_probs.shape[1] - 1)
        observed = log_probs.gather(1, targets[:, None]).squeeze(1).sum()
        expected = (probs * log_probs).sum(1)
        variance = (probs * log_probs.square()).sum(1) - expected.square()
        score = float((observed - expected.sum()) / variance.sum().clamp_min(1e-12).sqrt())
        return Detection(score=score, z=score, num_tokens_scored=len(token_ids))


class DetectGPT(PostHoc):
    name = "DetectGPT"
    description = "Post-hoc: log-likelihood drop under T5 mask-and-refill perturbations (needs a mask-filling model)."
    defaults = {"perturbations": 20, "span_length": 2, "mask_fraction": 0.15, "seed": 0, "threshold": 1.0}
    param_specs = {
        "perturbations": Param("perturbed copies per text", low=1), "span_length": Param("words per masked span", low=1),
        "mask_fraction": Param("share of words masked", low=0, high=1, open_low=True, open_high=True),
    }
    threshold_param = "threshold"

    def __init__(self, vocab_size: int, lm=None, filler: Callable[[list[str]], list[str]] | None = None, **params):
        super().__init__(vocab_size, lm, **params)
        self.filler = filler or load_t5_filler()

    def log_likelihood(self, text: str, context_ids: Sequence[int]) -> float:
        ids = self.lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            return float("nan")
        log_probs = token_log_probs(self.lm, ids, context_ids)
        return float(log_probs.gather(1, torch.tensor(ids)[:, None]).sum() / len(ids))

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        text = self.lm.tokenizer.decode(list(token_ids), skip_special_tokens=True)
        rng = random.Random(self.params["seed"])
        masked = [mask_spans(text, self.params["span_length"], self.params["mask_fraction"], rng)
                  for _ in range(self.params["perturbations"])]
        perturbed = self.filler(masked)
        original = self.log_likelihood(text, context_ids)
        values = np.array([self.log_likelihood(variant, context_ids) for variant in perturbed])
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
    source = os.environ.get(MASK_MODEL_VARIABLE)
    if not source:
        raise ValueError(
            f"DetectGPT needs a mask-filling model (T5 in the original): set {MASK_MODEL_VARIABLE} to a local "
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
