"""Homoglyphs: a share of the letters that have a Unicode look-alike (Cyrillic, Greek) replaced by it, so the text reads
the same and tokenises differently. The defence is `normalize`: look-alikes mapped back before tokenising (the
`homoglyphs` normaliser of lm-watermarking), offered by re-detection."""
from __future__ import annotations

import unicodedata

from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside

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


class Homoglyph(Attack):
    def attack(self, item, rng) -> Attacked:
        def disguise(stretch: str) -> str:
            letters = list(stretch)
            places = [index for index, letter in enumerate(letters) if letter in LOOK_ALIKES]
            count = int(round(self.params["ratio"] * len(places)))
            for index in rng.choice(places, size=count, replace=False).tolist() if count else ():
                letters[index] = LOOK_ALIKES[letters[index]]
            return "".join(letters)

        return Attacked(edit_outside(item.text, item.protected, disguise))
