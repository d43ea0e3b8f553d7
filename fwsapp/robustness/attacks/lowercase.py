"""Lowercase (HELM's `LowerCasePerturbation`): the whole text in lower case, protected mentions as they were."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside


class Lowercase(Attack):
    def attack(self, item, rng) -> Attacked:
        return Attacked(edit_outside(item.text, item.protected, str.lower))
