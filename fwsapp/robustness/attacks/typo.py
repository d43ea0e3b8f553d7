"""Typos (HELM's `TyposPerturbation`, which MarkMyWords applies): each letter, with probability p, becomes one of its
neighbours on a QWERTY keyboard, in the same case."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside

ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")


def _neighbours() -> dict[str, str]:
    """Each letter's keys to its left and right on its row, and above and below it."""
    found = {}
    for row_index, row in enumerate(ROWS):
        for column, letter in enumerate(row):
            near = {row[column - 1] if column else "", row[column + 1] if column + 1 < len(row) else ""}
            for other in (row_index - 1, row_index + 1):
                if 0 <= other < len(ROWS):
                    near |= set(ROWS[other][max(column - 1, 0):column + 1])
            found[letter] = "".join(sorted(near - {"", letter}))
    return found


NEIGHBOURS = _neighbours()


class Typo(Attack):
    def attack(self, item, rng) -> Attacked:
        def mistype(stretch: str) -> str:
            letters = list(stretch)
            for index, letter in enumerate(letters):
                near = NEIGHBOURS.get(letter.lower())
                if near and rng.random() < self.params["p"]:
                    typed = near[int(rng.integers(len(near)))]
                    letters[index] = typed.upper() if letter.isupper() else typed
            return "".join(letters)

        return Attacked(edit_outside(item.text, item.protected, mistype))
