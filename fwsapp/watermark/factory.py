"""A method's watermark, built by name from its registry entry: for generation, detection and the token view."""
from __future__ import annotations

from fwsapp.watermark.base import Detection, Watermark
from fwsapp.watermark.methods import info


def method_class(name: str) -> type[Watermark]:
    """A method's class, loaded from its registry entry (`MethodInfo.implementation`)."""
    return info(name).load()


def create(method: str, vocab_size: int, params: dict | None = None, lm=None, tokenizer=None,
           fitted: dict | None = None) -> Watermark:
    """A method's watermark; a method that reads text (EntityKGW's word lists, a semantic watermark's sentences) gets
    `tokenizer` (a tokenizers.TextTokenizer), as in re-detection with a bare tokenizer, or else the loaded model's. A
    method fitted on references gets `fitted`, what `Watermark.fit` gave for the run (None outside a run)."""
    cls = method_class(method)
    if cls.info.needs_tokenizer and tokenizer is None and lm is not None:
        from fwsapp.models.tokenizers import from_huggingface

        tokenizer = from_huggingface(lm.name, lm.tokenizer)
    extra = {"tokenizer": tokenizer} if cls.info.needs_tokenizer and tokenizer is not None else {}
    if cls.info.fitted_on_references:
        extra["fitted"] = fitted
    return cls(vocab_size, lm=lm, **extra, **(params or {}))


def detect_text(method: str, params: dict, lm, text: str) -> tuple[Detection, list[str]]:
    """Detect a watermark in pasted text: tokenised without special tokens, as MarkLLM does.

    Returns the detection and the decoded tokens, for a token-level view.
    """
    if not text.strip():
        raise ValueError("The text is empty: paste the text to check.")
    token_ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return explain(method, params, lm, token_ids)


def explain(method: str, params: dict, lm, token_ids, context_ids=(), fitted: dict | None = None, tokenizer=None
            ) -> tuple[Detection, list[str]]:
    """A detection with its per-token flags, and each token decoded, for a token-level view (`fitted`: the run's). With
    `tokenizer` (a tokenizers.TextTokenizer) and no model, as for a served run's stored ids, nothing is loaded but it."""
    if lm is None:
        watermark = create(method, tokenizer.vocab_size, params, tokenizer=tokenizer, fitted=fitted)
        decode = tokenizer.decode_token
    else:
        watermark = create(method, len(lm.tokenizer), params, lm=lm, fitted=fitted)
        decode = lambda token: lm.tokenizer.decode([token])  # noqa: E731
    detection = watermark.detect(list(token_ids), list(context_ids))
    return detection, [decode(token) for token in token_ids]

