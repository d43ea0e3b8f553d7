"""Normalisers applied to a text before it is tokenised for detection: the defences against character-level attacks
(lm-watermarking's `normalizers.py`). `homoglyphs` maps Unicode look-alikes back to the Latin letters they imitate,
after NFKC; `unicode` is NFKC alone."""
from __future__ import annotations

import unicodedata
from typing import Callable

NORMALIZERS = ("unicode", "homoglyphs")

# Latin letter -> its look-alike: Cyrillic, and Greek where Cyrillic has none.
LOOK_ALIKES = {
    "a": "а", "c": "с", "e": "е", "i": "і", "j": "ј", "o": "о", "p": "р", "s": "ѕ", "x": "х", "y": "у",
    "A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "I": "І", "J": "Ј", "K": "К", "M": "М", "N": "Ν",
    "O": "О", "P": "Р", "S": "Ѕ", "T": "Т", "X": "Х", "Y": "Υ", "Z": "Ζ",
}
BACK = str.maketrans({look: latin for latin, look in LOOK_ALIKES.items()})


def normalize_homoglyphs(text: str) -> str:
    """Look-alikes back to the Latin letters they imitate, after Unicode's own compatibility folding (NFKC)."""
    return unicodedata.normalize("NFKC", text).translate(BACK)


def normalizer(name: str | None) -> Callable[[str], str]:
    """The normaliser called `name`; None leaves a text as it is."""
    if name is None:
        return lambda text: text
    if name == "unicode":
        return lambda text: unicodedata.normalize("NFKC", text)
    if name == "homoglyphs":
        return normalize_homoglyphs
    raise ValueError(f"Unknown normaliser '{name}': choose one of {', '.join(NORMALIZERS)}.")
