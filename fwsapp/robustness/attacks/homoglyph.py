"""Homoglyphs: a share of the letters that have a Unicode look-alike (Cyrillic, Greek) replaced by it, so the text reads
the same and tokenises differently. The defence is `normalize`: look-alikes mapped back before tokenising (the
`homoglyphs` normaliser of lm-watermarking, `fwsapp.detection.normalizers`, which holds the look-alikes), offered by
re-detection."""
from __future__ import annotations

from fwsapp.detection.normalizers import LOOK_ALIKES
from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside


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
