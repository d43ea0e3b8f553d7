"""Values read from users' files, checked before use: numbers that must fit a float, and how a message quotes one."""
from __future__ import annotations

import math
import re

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def without_lone_surrogates(text: str) -> tuple[str, int]:
    """`text` with each lone surrogate (valid JSON, "\\ud800", but no character: no tokenizer takes it) replaced by
    U+FFFD, one for one, so character offsets hold; and how many there were."""
    return _LONE_SURROGATE.subn("\ufffd", text)


def lone_surrogate(text: str) -> int | None:
    """Where `text`'s first lone surrogate is, if it has one."""
    found = _LONE_SURROGATE.search(text)
    return found.start() if found else None


def finite_number(value) -> float | None:
    """A JSON number as a float; None for a bool, a non-number, NaN, infinity, or an integer too large for a float
    (JSON allows 10**400 written out, which no float holds)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def shown(value, limit: int = 40) -> str:
    """A value as a message quotes it: its repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters)"
