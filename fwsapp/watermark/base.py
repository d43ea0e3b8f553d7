"""The interface every watermark shares: a batched logits processor and a detector.

Modelled on transformers' generation/watermarking.py: the processor biases or samples logits during
`generate`, and the detector scores token ids after the fact. Detectors score generated tokens only;
the prompt is context (it seeds the first green list), never scored (MarkLLM issue #65).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar, Sequence

from transformers import LogitsProcessor


@dataclass
class Detection:
    """One text's detection result. `score` is what thresholds and ROC curves use."""

    score: float
    num_tokens_scored: int
    z: float | None = None
    p: float | None = None
    # Per token: 1 green, 0 red, -1 not scored (context or too short a prefix).
    token_flags: list[int] = field(default_factory=list)


class Watermark(ABC):
    """A watermarking method: parameters, a logits processor for generation, a detector."""

    name: ClassVar[str]
    description: ClassVar[str]
    defaults: ClassVar[dict]
    # "higher": larger scores mean watermarked (z-scores); "lower": p-values.
    score_direction: ClassVar[str] = "higher"
    # The detector runs the model itself (SWEET's entropies, the post-hoc detectors).
    needs_model: ClassVar[bool] = False
    # Post-hoc detectors watermark nothing; they separate model text from human reference text.
    post_hoc: ClassVar[bool] = False
    threshold_param: ClassVar[str] = "z_threshold"

    def __init__(self, vocab_size: int, lm=None, **params):
        unknown = set(params) - set(self.defaults)
        if unknown:
            raise ValueError(
                f"{self.name} has no parameter {', '.join(sorted(unknown))}; "
                f"its parameters are {', '.join(self.defaults)}."
            )
        if self.needs_model and lm is None:
            raise ValueError(f"{self.name} needs the model to detect: load one first.")
        self.vocab_size = vocab_size
        self.lm = lm
        self.params = {**self.defaults, **params}

    @abstractmethod
    def logits_processor(self) -> LogitsProcessor:
        """A processor for `model.generate(logits_processor=[...])`, batched over rows."""

    def generation_kwargs(self, batch_size: int, seed: int) -> dict:
        """Extra `generate` arguments for one batch: by default, this method's logits processor."""
        return {"logits_processor": [self.logits_processor()]}

    @abstractmethod
    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        """Score `token_ids`; `context_ids` (the prompt) only seed the first positions."""

    def is_watermarked(self, detection: Detection) -> bool:
        threshold = self.params[self.threshold_param]
        return detection.score < threshold if self.score_direction == "lower" else detection.score > threshold
