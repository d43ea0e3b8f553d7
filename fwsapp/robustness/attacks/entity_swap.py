"""Entity swap: k of the disease mentions the recognizer found, drawn at random, each replaced by a MeSH disease name
of another concept (another MeSH heading, so never a synonym), drawn at random.
The injected factual error: does the watermark still vouch for a text whose facts changed?
The attacked text records where the inserted names are. `MentionSwap` is the swap of any kind's mentions, from a pool
of names and the kind's concept; the drug swap is another."""
from __future__ import annotations

from functools import lru_cache

from fwsapp.robustness.attacks.base import Attack, Attacked, shortfall, spliced


@lru_cache(maxsize=1)
def disease_names() -> tuple[str, ...]:
    from fwsapp.entities.recognizers.base import mesh_disease_names

    return tuple(mesh_disease_names())


class MentionSwap(Attack):
    """k of the mentions, each replaced by a name of another concept drawn from `names()`."""

    kind = "disease"

    @staticmethod
    def names() -> tuple[str, ...]:
        return disease_names()

    def attack(self, item, rng) -> Attacked:
        from fwsapp.entities.recognizers import KINDS

        names = self.names()
        concept = KINDS[self.kind].concept
        count = min(self.params["k"], len(item.mentions))
        chosen = sorted(rng.choice(len(item.mentions), size=count, replace=False).tolist()) if count else []
        replacements = []
        for index in chosen:
            mention = item.mentions[index]
            was = concept(item.text[mention.start:mention.end])
            name = names[int(rng.integers(len(names)))]
            while concept(name) == was:
                name = names[int(rng.integers(len(names)))]
            if item.text[mention.start].isupper():  # a sentence's first word stays capitalised
                name = name[0].upper() + name[1:]
            replacements.append((mention, name))
        named = KINDS[self.kind].change  # "drug", not "chemical"
        note = shortfall(count, self.params["k"], f"{named} mention", f"{named} mentions")
        return Attacked(*spliced(item.text, replacements), note)


class EntitySwap(MentionSwap):
    """Disease mentions swapped for other MeSH diseases."""
