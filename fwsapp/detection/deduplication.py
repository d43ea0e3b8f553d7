"""Deduplicated detection: each (context, token) pair scored once.

A seeded watermark draws a token's green list (or its random numbers) from the tokens before it, so a text that repeats
itself (a template, a list, a discharge note) repeats the same draws, and its repeats are not independent evidence: a
repeated green pair counts again and again, and human text passes the threshold far more often than the nominal rate
says. lm-watermarking's `ignore_repeated_ngrams`, Three Bricks' unique (context, token) scoring and vLLM's context
deduplication score each pair once. Here the repeats of any seeded method's detection are marked unscored, and the score
follows from the method's per-token evidence (fwsapp.watermark.evidence) over the tokens left, so its length curve, its
WinMax and its calibration follow too.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import REPEATED

DEDUPLICATED = "each (context, token) pair once"  # how an evidence record names `detect --deduplicate`


def deduplication_problem(method: str) -> str | None:
    """Why a method's detection cannot be deduplicated here, or None."""
    info = methods.info(method)
    if info.seeding_context is None:
        return (f"{info.name} is not seeded by the tokens before each position, so it has no repeated (context, token) "
                "pairs to score once" + (f" (its own {info.deduplication_param} parameter does it its way)"
                                         if info.deduplication_param else "") + ".")
    if info.evidence is None:
        return f"{info.name}'s score is not a sum over tokens, so it cannot be taken again without the repeats."
    return None


def repeated_pairs(context_ids: Sequence[int], token_ids: Sequence[int], width: int) -> np.ndarray:
    """Per token, whether its (the `width` tokens before it, itself) pair came earlier in the text; the prompt
    (`context_ids`) seeds the first contexts but is not scored, so it repeats nothing."""
    full = list(context_ids) + list(token_ids)
    start = len(context_ids)
    seen: set[tuple[int, ...]] = set()
    repeated = np.zeros(len(token_ids), dtype=bool)
    for position in range(len(token_ids)):
        at = start + position
        pair = tuple(full[max(0, at - width):at + 1])
        repeated[position] = pair in seen
        seen.add(pair)
    return repeated


def deduplicated(watermark, detection, token_ids: Sequence[int], context_ids: Sequence[int] = ()):
    """`detection` of `token_ids` with every repeated (context, token) pair unscored, and its score taken again from
    the method's evidence over the tokens left."""
    info, params = watermark.info, watermark.params
    repeated = repeated_pairs(context_ids, token_ids, info.seeding_context(params))
    if not repeated.any() or not detection.token_flags:
        return detection
    flags = [REPEATED if again else flag for flag, again in zip(detection.token_flags, repeated)]
    kept = replace(detection, token_flags=flags)
    evidence = info.evidence
    arrays = evidence.arrays(kept, params)
    score = float(evidence.scores(arrays, params)[-1])
    z = None if info.score_label == "p" else float(evidence.statistics(arrays, params)[-1])
    # The p-value as the detector writes it (a green count's exact binomial tail under 200 tokens), where it writes one.
    p = evidence.p_value(arrays, params) if detection.p is not None else None
    return replace(kept, score=score, z=z, p=p, num_tokens_scored=int(arrays["scored"].sum()))


def repeats_scored(method: str, params: dict, deduplicate: bool) -> str:
    """How a detection scored repeated (context, token) pairs, for a table: each time, or once."""
    if deduplicate:
        return "scored once"
    info = methods.info(method)
    if info.deduplication_param is None:
        return "each scored"
    return f"its own {info.deduplication_param}={({**info.defaults, **params})[info.deduplication_param]}"
