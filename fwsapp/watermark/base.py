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

from fwsapp.watermark.evidence import Evidence
from fwsapp.watermark.methods import MethodInfo

# The texts a detector scores in one call: (token ids, context ids) pairs.
Texts = Sequence[tuple[Sequence[int], Sequence[int]]]


@dataclass
class Detection:
    """One text's detection result. `score` is what thresholds and ROC curves use."""

    score: float
    num_tokens_scored: int
    z: float | None = None
    p: float | None = None
    # The test statistic the p-value comes from, where it is neither the score nor z: the sum of the tokens' evidence
    # of EXP and vLLM's Gumbel watermarks (vLLM's detector answers it as its `score`).
    statistic: float | None = None
    # Per token: 1 green, 0 red, -1 not scored (context or too short a prefix), evidence.REPEATED not scored as its
    # (context, token) pair came before (a deduplicated detection).
    token_flags: list[int] = field(default_factory=list)
    # Per token, how much it counts in the score (EWD's entropy weights); empty when every scored token counts 1.
    token_weights: list[float] = field(default_factory=list)
    # Per token, continuous evidence in [0, 1], 0.5 being what an unwatermarked token shows on average (EXP's
    # r-values, SynthID's g-values averaged over its layers, Unbiased's log-likelihood ratios); empty for methods that
    # only flag green and red.
    token_values: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class GenerationBatch:
    """What a method may need of one batch it watermarks: how many texts, the batch's seed, the decoding settings
    (temperature, top_k, top_p, do_sample) and each prompt's token ids, padding left out."""

    size: int
    seed: int
    sampling: dict = field(default_factory=dict)
    prompt_ids: list[list[int]] = field(default_factory=list)


class Watermark(ABC):
    """A watermarking method: parameters, a logits processor for generation, a detector."""

    # Bound from the method's declaration in fwsapp.watermark.methods (`class KGW(Watermark, info=methods.KGW)`).
    info: ClassVar[MethodInfo]
    name: ClassVar[str]
    defaults: ClassVar[dict]
    param_specs: ClassVar[dict]
    score_direction: ClassVar[str]
    needs_model: ClassVar[bool]
    post_hoc: ClassVar[bool]
    threshold_param: ClassVar[str]
    # The per-token evidence its detector adds up (fwsapp.watermark.evidence), from which its statistic after every
    # token follows; None when the score is no such sum.
    evidence: ClassVar[Evidence | None] = None

    def __init_subclass__(cls, info: MethodInfo | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        if info is not None:
            cls.info = info
            cls.name, cls.threshold_param = info.name, info.threshold_param
            cls.defaults, cls.param_specs = info.defaults, info.param_specs
            cls.score_direction, cls.needs_model, cls.post_hoc = info.score_direction, info.needs_model, info.post_hoc

    def __init__(self, vocab_size: int, lm=None, **params):
        # What is stored and shown (a key kept in an environment variable as `$VAR sha256:…`), and what the watermark
        # computes with (that key read from the variable).
        self.recorded_params = self.checked_params(params)
        self.params = self.info.with_keys(self.recorded_params)
        if self.needs_model and lm is None:
            raise ValueError(f"{self.name} needs the model to detect: load one first.")
        self.vocab_size = vocab_size
        self.lm = lm

    @classmethod
    def checked_params(cls, params: dict) -> dict:
        """The defaults updated with `params`, each checked against its spec; a clear error otherwise."""
        return cls.info.checked_params(params)

    @classmethod
    def fit(cls, references: list[str], params: dict) -> dict:
        """For a method declared `fitted_on_references`: the part of its key fitted on a run's references, as JSON
        that its constructor takes back as `fitted`, saying under `references` how many it was fitted on."""
        raise NotImplementedError(f"{cls.name} fits nothing on references.")

    @abstractmethod
    def logits_processor(self) -> LogitsProcessor:
        """A processor for `model.generate(logits_processor=[...])`, batched over rows."""

    def generation_kwargs(self, batch: GenerationBatch) -> dict:
        """Extra `generate` arguments for one batch: by default, this method's logits processor."""
        return {"logits_processor": [self.logits_processor()]}

    @abstractmethod
    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        """Score `token_ids`; `context_ids` (the prompt) only seed the first positions."""

    def detect_many(self, texts: Texts) -> list[Detection]:
        """`detect` for each (token ids, context ids) text."""
        return [self.detect(token_ids, context_ids) for token_ids, context_ids in texts]

    def is_watermarked(self, detection: Detection) -> bool:
        return self.info.is_watermarked(detection.score, self.params)

    def smallest_p_value(self) -> float:
        """The smallest p-value its detector can answer: 0 where the p-value has no floor."""
        return 0.0


class BatchedDetector(Watermark):
    """A detector written for a batch of texts, because it reads the model and a GPU wants texts together;
    `detect` is a batch of one."""

    def detect(self, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> Detection:
        return self.detect_many([(token_ids, context_ids)])[0]

    @abstractmethod
    def detect_many(self, texts: Texts) -> list[Detection]:
        """One detection per (token ids, context ids) text, in order."""
