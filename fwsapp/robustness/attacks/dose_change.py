"""Dose change: k of the doses the recognizer found, drawn at random, each with its amount multiplied or divided by
`factor` (a tenfold error by default, the commonest serious dosing error), the unit kept. An injected factual error:
does the watermark still vouch for a text whose dose was changed?"""
from __future__ import annotations

import re

from fwsapp.robustness.attacks.base import Attack, Attacked, shortfall, spliced

NUMBER = re.compile(r"\d+(?:\.\d+)?")


def scaled(number: str, factor: float) -> str:
    value = float(number) * factor
    return f"{value:.6g}" if value != int(value) else str(int(value))


class DoseChange(Attack):
    def attack(self, item, rng) -> Attacked:
        factor = float(self.params["factor"])
        # Amounts only: a frequency in words ("twice daily") has no number to change.
        amounts = [mention for mention in item.mentions if NUMBER.search(item.text, mention.start, mention.end)]
        count = min(self.params["k"], len(amounts))
        chosen = sorted(rng.choice(len(amounts), size=count, replace=False).tolist()) if count else []
        replacements = []
        for index in chosen:
            mention = amounts[index]
            by = factor if rng.random() < 0.5 else 1 / factor  # up or down, with equal chance
            dose = item.text[mention.start:mention.end]
            replacements.append((mention, NUMBER.sub(lambda match: scaled(match.group(), by), dose)))
        note = shortfall(count, self.params["k"], "dose with an amount", "doses with an amount")
        return Attacked(*spliced(item.text, replacements), note)
