"""One text's verdict as a detection service answers it: vLLM's four fields, a verdict in three states, and an
evidence record.

vLLM's reference detection server (vLLM 0.33, `examples/basic/online_serving/watermark_detection_server.py`) tokenises
a text without special tokens and answers `score`, `p_value`, `num_scored_tokens` and `is_watermarked`. Here every
watermark that detects from text answers the same fields with the same meanings, so a client written for vLLM reads
them unchanged:
- `score`: the test statistic, larger when watermarked: the sum of the tokens' evidence where the threshold reads a
  p-value that comes from one (vLLM's Gumbel watermarks, EXP), else the score the threshold reads (KGW's z, SynthID's
  mean g-value);
- `p_value`: the method's p-value (SynthID's: the normal tail of its z), or the one its z implies; None for a score
  with no nominal distribution (the post-hoc detectors');
- `is_watermarked`: the method's own threshold (vLLM-Gumbel's p_threshold, 0.01 as vLLM's server).

The verdict adds a third state, `too_short`: a text not called watermarked whose scored tokens are fewer than the
method needs to detect a watermarked answer at that threshold, as the length curves of a run measured it (the median
tokens to detect of its watermarked answers), or, where no run measured it, fewer than MIN_TOKENS_FOR_VERDICT (for a
watermark of sentences, fewer sentences than any marked text needs to pass its threshold). Such a "not watermarked"
means nothing, and says so.
"""
from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, fields
from typing import Sequence

from scipy.stats import norm

import fwsapp
from fwsapp.detection.length import DEFAULT_FPR, length_threshold, run_curves, tokens_summary
from fwsapp.secret_keys import fingerprint, is_recorded, is_reference
from fwsapp.watermark import methods

VERDICTS = ("watermarked", "not_watermarked", "too_short")
EVIDENCE_SCHEMA = "https://fwsapp.org/schemas/evidence-record/1"  # the `$id` of docs/evidence-record.schema.json


@dataclass(frozen=True)
class MinimumLength:
    """How many scored tokens a "not watermarked" needs before it means anything, and where the figure comes from."""

    tokens: int
    basis: str

    @classmethod
    def from_run(cls, store, run_id: str, method: str, params: dict) -> MinimumLength:
        """The median tokens to detect of the run's watermarked answers at its method's threshold for a 1 % FPR; the run
        must be of this method and these parameters (`params`: checked), with scores by length (`detect --by-length`).
        Its key and verdict threshold may differ: how many tokens a mark needs does not depend on which key drew it,
        and the threshold read here is the 1 % FPR one."""
        run = store.run(run_id)
        if run["method"] != method:
            raise ValueError(f"Run {run_id} is a {run['method']} run: its lengths say nothing of {method}; give a "
                             f"{method} run, or --min-tokens.")
        declared = methods.info(method)
        if declared.unit != "token":
            raise ValueError(f"{method} scores {declared.unit}s, and a run's lengths are measured in tokens: give "
                             f"--min-tokens as a count of scored {declared.unit}s.")
        measured = {**declared.defaults, **run["params"]}
        unlike = {declared.threshold_param, *declared.secret_params}
        differing = [name for name in declared.defaults if name not in unlike and measured[name] != params[name]]
        if differing:
            raise ValueError(f"Run {run_id}'s lengths were measured under "
                             f"{', '.join(f'{name}={measured[name]}' for name in differing)}, not "
                             f"{', '.join(f'{name}={params[name]}' for name in differing)}: give the run's values with "
                             "--param, a run of these parameters, or --min-tokens.")
        curves = run_curves(store, run_id)
        if curves is None:
            raise ValueError(f"Run {run_id} has no scores by length: run `python -m fwsapp detect --by-length --run "
                             f"{run_id}` first, or give --min-tokens.")
        summary = tokens_summary(curves.positives, length_threshold(method, params, DEFAULT_FPR))
        if not isinstance(summary["median"], int):
            raise ValueError(f"Run {run_id}: most of its watermarked answers are never detected, so no length is "
                             "enough; give --min-tokens.")
        return cls(summary["median"], f"median tokens to detect of run {run_id}'s {summary['n']} watermarked answers")

    @classmethod
    def of_run(cls, store, run_id: str, method: str, recorded_params: dict) -> MinimumLength:
        """The run's own minimum for texts re-detected under exactly its method and parameters, where its lengths give
        one; else the uncalibrated one, which claims nothing (other parameters need other lengths)."""
        run = store.run(run_id)
        if run["method"] != method or run["params"] != recorded_params:
            return cls.uncalibrated(methods.info(method), recorded_params)
        try:
            return cls.from_run(store, run_id, method, recorded_params)
        except ValueError:  # no scores by length, or most answers never detected: no calibration to claim
            return cls.uncalibrated(methods.info(method), recorded_params)

    @classmethod
    def uncalibrated(cls, info: methods.MethodInfo, params: dict) -> MinimumLength:
        """Where no run measured the length: for a watermark of tokens, the rule of thumb (UNCALIBRATED); for one of
        sentences, the fewest scored sentences at which a text whose every sentence is marked passes its threshold
        (4 for SemStamp's z > 3 at γ 0.25): an answer holds a few sentences, and a rule of 25 tokens read as 25
        sentences called every one of them too short."""
        if info.unit == "token":
            return UNCALIBRATED
        from fwsapp.watermark.base import Detection

        params = {**info.defaults, **params}
        marked = Detection(score=0.0, num_tokens_scored=MOST_SENTENCES, token_flags=[1] * MOST_SENTENCES)
        prefix_scores = info.evidence.scores(info.evidence.arrays(marked, params), params)
        fewest = next((count for count, score in enumerate(prefix_scores, start=1)
                       if info.is_watermarked(float(score), params)), MOST_SENTENCES)
        return cls(fewest, f"not calibrated: under {fwsapp.units(fewest, info.unit, 'scored')} no text passes "
                           f"{info.verdict_rule(params)}, however marked")


# Where no run measured the length: a z's normal approximation, and any verdict on it, needs a few dozen scored tokens;
# even an answer whose every token is green has z = √T at γ = ½, under KGW's threshold of 4 until T = 17. The Detect
# page's text box warns at the same length. (The service said "not_watermarked" of a 10-token text.)
MIN_TOKENS_FOR_VERDICT = 25
MOST_SENTENCES = 1000  # the longest fully marked text tried: more sentences than any threshold asks for
UNCALIBRATED = MinimumLength(MIN_TOKENS_FOR_VERDICT, f"not calibrated: under {MIN_TOKENS_FOR_VERDICT} scored tokens, the "
                             "rule of thumb (a run's lengths measure it: --lengths-from)")


@dataclass(frozen=True)
class TextVerdict:
    score: float
    p_value: float | None
    num_scored_tokens: int
    is_watermarked: bool
    verdict: str
    evidence: dict

    def as_dict(self) -> dict:
        # Shallow: `asdict` deep-copies the evidence record, 45 µs a verdict, and each verdict's record is its own.
        return {field.name: getattr(self, field.name) for field in fields(self)}


def key_fingerprints(info: methods.MethodInfo, recorded_params: dict) -> dict[str, str]:
    """Each secret parameter's fingerprint (never the key): the one recorded with a key kept in a variable, else one
    made now."""
    found = {}
    for name in info.secret_params:
        value = recorded_params[name]
        found[name] = value.split(" ", 1)[1] if is_reference(value) and is_recorded(value) else fingerprint(value)
    return found


def configuration_evidence(info: methods.MethodInfo, recorded_params: dict, tokenizer: str, minimum: MinimumLength,
                           deduplication: str | None = None) -> dict:
    """The part of an evidence record one detector's configuration fixes: the algorithm, its parameters, the key's
    fingerprint, the keyed draw, the tokenizer, the context and deduplication, the threshold and the shortest length
    that gives a verdict. A detector makes it once: a key's fingerprint is a deliberately slow scrypt."""
    secret = key_fingerprints(info, recorded_params)
    params = {**info.defaults, **recorded_params}
    return {
        "schema": EVIDENCE_SCHEMA,
        "fwsapp_version": fwsapp.__version__,
        "algorithm": info.name,
        "parameters": {name: value for name, value in sorted(params.items()) if name not in secret},
        "key_fingerprints": secret,
        "keyed_draw": {"name": info.keyed_draw.name, "reference": info.keyed_draw.reference},
        "tokenizer": tokenizer,
        "context_width": info.context_width(params),
        "deduplication": deduplication or (params[info.deduplication_param] if info.deduplication_param else "none"),
        "threshold": {info.threshold_param: params[info.threshold_param]},
        "min_tokens": {"tokens": minimum.tokens, "basis": minimum.basis},
    }


def evidence_record(configuration: dict, token_ids: Sequence[int], verdict: dict) -> dict:
    """What a regulator needs to check one verdict again, holding neither the text nor the key: its detector's
    `configuration_evidence`, the token ids' digest, the statistic and the verdict (docs/evidence-record.schema.json)."""
    return {
        **configuration,
        "token_ids_sha256": hashlib.sha256(json.dumps([int(token) for token in token_ids]).encode()).hexdigest(),
        "num_scored_tokens": verdict["num_scored_tokens"],
        "score": verdict["score"],
        "p_value": verdict["p_value"],
        "is_watermarked": verdict["is_watermarked"],
        "verdict": verdict["verdict"],
    }


def verdict_method(method: str):
    """The registered method named `method`, if it gives watermark verdicts; a post-hoc detector (no key) is refused
    before a model or tokenizer is loaded for it."""
    declared = methods.info(method)
    if declared.post_hoc:
        raise ValueError(f"{declared.name} is a post-hoc detector with no key: it gives no watermark verdict. "
                         f"Choose one of {', '.join(methods.watermark_names())}.")
    return declared


class TextDetector:
    """A method's detector for texts or token ids under one key and tokenizer. Detection runs under a lock, so one
    detector answers correctly from many threads (a watermark's caches are not written for concurrent use)."""

    def __init__(self, method: str, params: dict, tokenizer, lm=None, minimum: MinimumLength | None = None):
        from fwsapp.watermark.factory import create

        self.info = verdict_method(method)
        self.tokenizer = tokenizer
        self.watermark = create(self.info.name, tokenizer.vocab_size, params, lm=lm, tokenizer=tokenizer)
        self.minimum = minimum or MinimumLength.uncalibrated(self.info, self.watermark.params)
        self.configuration = configuration_evidence(self.info, self.watermark.recorded_params, tokenizer.name,
                                                    self.minimum)
        self._lock = threading.Lock()

    def check_ids(self, token_ids: Sequence[int]) -> list[int]:
        bad = [token for token in token_ids if not 0 <= int(token) < self.tokenizer.vocab_size]
        if bad:
            raise ValueError(f"Token id {bad[0]} is outside {self.tokenizer.name}'s vocabulary (0 to "
                             f"{self.tokenizer.vocab_size - 1}): send ids of the tokenizer the service detects with.")
        return [int(token) for token in token_ids]

    def verdict_of_text(self, text: str) -> TextVerdict:
        return self.verdict_of_ids(self.tokenizer.encode(text))

    def verdict_of_ids(self, token_ids: Sequence[int]) -> TextVerdict:
        token_ids = self.check_ids(token_ids)
        with self._lock:
            detection = self.watermark.detect(token_ids)
        verdict = verdict_fields(self.watermark, detection, self.minimum)
        return TextVerdict(**verdict, evidence=evidence_record(self.configuration, token_ids, verdict))


def nominal_p_value(info: methods.MethodInfo, detection) -> float | None:
    """The detector's p-value, or the normal tail of its z where the method's z is standard normal without the
    watermark; None for a score with no nominal distribution (the post-hoc detectors')."""
    if detection.p is not None:
        return float(detection.p)
    return float(norm.sf(detection.z)) if detection.z is not None and info.standard_score else None


def verdict_fields(watermark, detection, minimum: MinimumLength) -> dict:
    """vLLM's four fields and the three-state verdict of a watermark's `Detection` of one text."""
    info = watermark.info
    watermarked = bool(watermark.is_watermarked(detection)) if detection.num_tokens_scored else False
    # Where the threshold reads a p-value, the score is the statistic it comes from (vLLM's `score`); elsewhere it is
    # the score the threshold reads: SynthID's mean g-value, not its z, beside a threshold of mean g > 0.52.
    by_p_value = info.score_label == "p" and detection.statistic is not None
    return {
        "score": float(detection.statistic if by_p_value else detection.score),
        "p_value": nominal_p_value(info, detection),
        "num_scored_tokens": int(detection.num_tokens_scored),
        "is_watermarked": watermarked,
        "verdict": "watermarked" if watermarked else "too_short"
        if detection.num_tokens_scored < minimum.tokens else "not_watermarked",
    }
