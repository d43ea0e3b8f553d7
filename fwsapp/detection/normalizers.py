"""Normalisers applied to a text before it is tokenised for detection: the defences against character-level attacks
(lm-watermarking's `normalizers.py`). `homoglyphs` maps Unicode look-alikes back to the Latin letters they imitate,
after NFKC; `unicode` is NFKC alone."""
from __future__ import annotations

import unicodedata
from typing import Callable

NORMALIZERS = ("unicode", "homoglyphs")


def normalizer(name: str | None) -> Callable[[str], str]:
    """The normaliser called `name`; None leaves a text as it is."""
    if name is None:
        return lambda text: text
    if name == "unicode":
        return lambda text: unicodedata.normalize("NFKC", text)
    if name == "homoglyphs":
        from fwsapp.robustness.attacks.homoglyph import normalize_homoglyphs

        return normalize_homoglyphs
    raise ValueError(f"Unknown normaliser '{name}': choose one of {', '.join(NORMALIZERS)}.")
