"""Watermarking methods, registered by name (case-insensitive, with the paper's file spellings)."""
from __future__ import annotations

from fwsapp.methods import SCORE_DIRECTIONS, canonical_name
from fwsapp.watermark.base import Detection, Watermark
from fwsapp.watermark.dipmark import DiPmark
from fwsapp.watermark.exp_edit import ExpEdit
from fwsapp.watermark.kgw import KGW
from fwsapp.watermark.posthoc import DetectGPT, FastDetectGPT, LogRank
from fwsapp.watermark.sweet import SWEET
from fwsapp.watermark.synthid import SynthID
from fwsapp.watermark.unigram import Unigram

METHODS: dict[str, type[Watermark]] = {
    cls.name: cls for cls in (KGW, SWEET, DiPmark, ExpEdit, Unigram, SynthID, LogRank, DetectGPT, FastDetectGPT)
}
WATERMARKS = [name for name, cls in METHODS.items() if not getattr(cls, "post_hoc", False)]
POST_HOC = [name for name, cls in METHODS.items() if getattr(cls, "post_hoc", False)]

def method_class(name: str) -> type[Watermark]:
    canonical = canonical_name(name)
    if canonical not in METHODS:
        raise ValueError(
            f"{canonical} cannot generate or detect in this version; import its logs instead. "
            f"Available for generation: {', '.join(METHODS)}."
        )
    return METHODS[canonical]


def parse_params(method: str, pairs: list[str] | dict) -> dict:
    """Turn `key=value` strings (or a dict of strings) into typed parameters, using the defaults' types."""
    defaults = method_class(method).defaults
    items = pairs.items() if isinstance(pairs, dict) else (_split(pair) for pair in pairs)
    params = {}
    for key, value in items:
        if key not in defaults:
            raise ValueError(f"{canonical_name(method)} has no parameter '{key}'; it has {', '.join(defaults)}.")
        kind = type(defaults[key])
        try:
            params[key] = kind(value) if not isinstance(value, kind) else value
        except ValueError:
            raise ValueError(f"Parameter {key}={value!r} must be a {kind.__name__}.") from None
    return params


def _split(pair: str) -> tuple[str, str]:
    key, sep, value = pair.partition("=")
    if not sep:
        raise ValueError(f"Parameter '{pair}' must look like key=value.")
    return key.strip(), value.strip()


def create(method: str, vocab_size: int, params: dict | None = None, lm=None) -> Watermark:
    return method_class(method)(vocab_size, lm=lm, **(params or {}))


def detect_text(method: str, params: dict, lm, text: str) -> tuple[Detection, list[str]]:
    """Detect a watermark in pasted text: tokenised without special tokens, as MarkLLM does.

    Returns the detection and the decoded tokens, for a token-level view.
    """
    if not text.strip():
        raise ValueError("The text is empty: paste the text to check.")
    token_ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return explain(method, params, lm, token_ids)


def explain(method: str, params: dict, lm, token_ids, context_ids=()) -> tuple[Detection, list[str]]:
    """A detection with its per-token flags, and each token decoded, for a token-level view."""
    watermark = create(method, len(lm.tokenizer), params, lm=lm)
    detection = watermark.detect(list(token_ids), list(context_ids))
    return detection, [lm.tokenizer.decode([token]) for token in token_ids]


__all__ = ["Detection", "Watermark", "METHODS", "WATERMARKS", "POST_HOC", "SCORE_DIRECTIONS", "canonical_name", "method_class", "parse_params", "create", "detect_text", "explain"]
