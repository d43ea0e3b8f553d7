"""Drug swap: k of the drug and chemical mentions the recognizer found, drawn at random, each replaced by the generic
name of another drug (another canonical name of the drug lexicon, so never a brand of the same drug), drawn at random.
An injected factual error, the drug kind of the entity swap."""
from __future__ import annotations

from functools import lru_cache

from fwsapp.robustness.attacks.entity_swap import MentionSwap


@lru_cache(maxsize=1)
def drug_names() -> tuple[str, ...]:
    """The lexicon's generic names of one word (a swapped name reads like the drug it replaces)."""
    from fwsapp.entities.recognizers.drugs import drug_variants

    return tuple(sorted({name for name in drug_variants().values() if name.isalpha()}))


class DrugSwap(MentionSwap):
    kind = "chemical"

    @staticmethod
    def names() -> tuple[str, ...]:
        return drug_names()
