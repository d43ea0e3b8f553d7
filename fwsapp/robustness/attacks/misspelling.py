"""Misspelling (HELM's `MisspellingPerturbation`, which MarkMyWords applies with p 0.25 or 0.5): each word or phrase that
has a common misspelling becomes one of them, drawn at random, with probability p, in the original's case. The list is
HELM's `correct_to_misspelling.json` (from Wikipedia's lists of common misspellings), read from the crfm-helm package
that the Makefile installs off the import path."""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside

PACKAGE = "helm"
LIST = Path("benchmark") / "augmentations" / "correct_to_misspelling.json"


def list_file() -> Path:
    from fwsapp.models import package_folder

    return package_folder(PACKAGE) / LIST


def missing() -> str | None:
    """Why the list cannot be read here, or None."""
    from fwsapp.models import ModelLoadError

    try:
        return None if list_file().is_file() else f"HELM's misspelling list is missing from {list_file()}"
    except ModelLoadError:
        return "HELM's misspelling list (the crfm-helm==0.5.16 package's data) is not installed: run `make run`"


@lru_cache(maxsize=1)
def misspellings() -> tuple[dict[str, list[str]], re.Pattern]:
    """The list, and a pattern that finds its entries, longer phrases first ("about a" before "about")."""
    table = json.loads(list_file().read_text(encoding="utf-8"))
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(table, key=len, reverse=True))) + r")\b")
    return table, pattern


def match_case(original: str, replacement: str) -> str:
    """HELM's `match_case`: the replacement in the original's case (all upper, title, or as listed)."""
    if original.isupper():
        return replacement.upper()
    if original[:1].isupper():
        return replacement[:1].upper() + replacement[1:]
    return replacement


class Misspelling(Attack):
    def attack(self, item, rng) -> Attacked:
        table, pattern = misspellings()

        def misspell(match: re.Match) -> str:
            if rng.random() >= self.params["p"]:
                return match[0]
            choices = table[match[0]]
            return match_case(match[0], choices[int(rng.integers(len(choices)))])

        return Attacked(edit_outside(item.text, item.protected, lambda stretch: pattern.sub(misspell, stretch)))
