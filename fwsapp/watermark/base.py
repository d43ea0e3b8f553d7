"""The interface every watermark shares: a batched logits processor and a detector.

Modelled on transformers' generation/watermarking.py: the processor biases or samples logits during
`generate`, and the detector scores token ids after the fact. Detectors score generated tokens only;
the prompt is context (it seeds the first green list), never scored (MarkLLM issue #65).
"""
from __future__ import annotations

import math
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


@dataclass(frozen=True)
class Param:
    """What values a parameter takes, with one line of help: a numeric range, or a set of choices."""

    help: str
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.choices:
            return "one of " + ", ".join(self.choices)
        if self.low is not None and self.high is not None:
            return f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"
        if self.low is not None:
            return f"{'>' if self.open_low else '≥'} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.open_high else '≤'} {self.high:g}"
        return "a finite number"

    def check(self, method: str, name: str, value) -> None:
        if self.choices:
            valid = value in self.choices
        elif isinstance(value, str) or not math.isfinite(value):
            valid = False
        else:
            valid = not (
                (self.low is not None and (value <= self.low if self.open_low else value < self.low))
                or (self.high is not None and (value >= self.high if self.open_high else value > self.high))
            )
        if not valid:
            raise ValueError(f"{method}: {name}={value!r} is out of range; it must be {self.describe()} ({self.help}).")


# Shared by the seeded green-list methods (KGW, SWEET, DiPmark).
RNG_PARAMS = {
    "rng": Param("green-list generator: cuda = MarkLLM on a GPU (the paper), cpu = MarkLLM on a CPU",
                 choices=("cuda", "cpu")),
    "cuda_blocks": Param("cap on CUDA randperm's grid, as a smaller GPU applies it (0 = none; 492 = RTX 3090 "
                         "at 128,256 tokens)", low=0),
}
GAMMA = Param("share of the vocabulary that is green", low=0, high=1, open_low=True, open_high=True)
DELTA = Param("logit bias added to green tokens")
Z_THRESHOLD = Param("z-score above which a text is called watermarked")
KEY = Param("secret key seeding the watermark")


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
    # Each parameter's valid values and help; checked before any work, shown on the Generate page and in --help.
    param_specs: ClassVar[dict[str, Param]] = {}

    def __init__(self, vocab_size: int, lm=None, **params):
        self.params = self.checked_params(params)
        if self.needs_model and lm is None:
            raise ValueError(f"{self.name} needs the model to detect: load one first.")
        self.vocab_size = vocab_size
        self.lm = lm

    @classmethod
    def checked_params(cls, params: dict) -> dict:
        """The defaults updated with `params`, each checked against its spec; a clear error otherwise."""
        unknown = set(params) - set(cls.defaults)
        if unknown:
            raise ValueError(
                f"{cls.name} has no parameter {', '.join(sorted(unknown))}; "
                f"its parameters are {', '.join(cls.defaults)}."
            )
        merged = {**cls.defaults, **params}
        for name, value in merged.items():
            spec = cls.param_specs.get(name)
            if spec is not None or not isinstance(cls.defaults[name], str):
                (spec or Param(name)).check(cls.name, name, value)
        return merged

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
