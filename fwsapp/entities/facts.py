"""Clinical facts: the spans of a text that state a disease, a drug or chemical, or a dose, each with its kind, the
concept it is normalised to, and its assertion (affirmed, negated, uncertain).

The kinds are declared with the recognizers (`fwsapp.entities.recognizers.KINDS`); a `FactFinder` runs one
recognizer per kind, each kind's default unless one is named, and `fwsapp.entities.assertion` settles the assertions.
What changed between two texts' facts is `fwsapp.entities.changes`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

# The version of how facts are found beyond their recognizers (assertions, concepts): stored facts of another version
# are not pooled with these. 2: NegEx's "no cure for X" and its kin no longer negate X, and a negation's scope ends with
# its list item or line. 3: and at "because" or "since". 4: a name split by a space is one corruption (`split_name`).
# 5: an assertion flips between independent texts only within one statement both make; "free" negates the word before.
# 6: a negation reaches five words (`assertion.NEGATION_WINDOW`). 7: "rule out" and "versus" negate nothing, nor do
# turns of prose ("not uncommon", "no idea"). 8: "free" is a trigger of reach 0; a bracket counts toward a reach.
# 9: a capital letter's full stop is a word of its own (`recognizers.tokenizer`). 10: "thyroid gland" is no drug name
# a corrupted term is near. 11: a limit ("do not exceed", "no more than") negates nothing (`LIMIT_PSEUDO_NEGATIONS`),
# nor does "without treatment" or "not everyone". 12: nor one with its verb between ("do not take more than"); and
# the drug lexicon's clinical readings ("alcohol" ethanol, CPPD no drug) name the concepts. 13: whom a treatment is
# not for is not negated ("not suitable for people with asthma"). 14: nor a limit on a course's length ("do not use it
# for more than 7 days"), the durations' kind being read. 15: a limit's comparatives are its bounds' (`bounds`), so
# "no shorter than" is one too. 16: a negation read into a limit's value negates nothing inside it ("do not take
# ibuprofen for more than 10 days": ibuprofen is affirmed, the length '≤ 10 days').
FACTS_VERSION = 16


@dataclass(frozen=True)
class Fact:
    kind: str  # a key of recognizers.KINDS
    start: int
    end: int
    text: str
    value: str  # the concept: a MeSH heading, a generic drug name, a dose in one unit per dimension
    assertion: str  # one of assertion.ASSERTIONS

    def as_json(self) -> dict:
        return asdict(self)


class FactFinder:
    """Finds every kind's facts with one recognizer per kind: `recognizers` maps a kind to a recognizer's name,
    and a kind left out gets its default. Recognizers load on the first `find_many`."""

    def __init__(self, recognizers: dict[str, str] | None = None):
        from fwsapp.entities.recognizers import KINDS, RECOGNIZERS, check_recognizer, default_recognizer

        chosen = dict(recognizers or {})
        for kind, name in chosen.items():
            if kind not in KINDS:
                raise ValueError(f"No kind of fact is called '{kind}': the kinds are {', '.join(KINDS)}.")
            if RECOGNIZERS[check_recognizer(name)].kind != kind:
                raise ValueError(f"The recognizer '{name}' finds {RECOGNIZERS[name].kind} facts, not {kind} ones.")
        self.names = {kind: chosen.get(kind) or default_recognizer(kind) for kind in KINDS}
        for name in self.names.values():
            check_recognizer(name)

    @property
    def labels(self) -> dict[str, str]:
        """Each kind's recognizer label (name and version), known without loading it."""
        from fwsapp.entities.recognizers import recognizer_label

        return {kind: recognizer_label(name) for kind, name in self.names.items()}

    @property
    def config(self) -> str:
        """What stored facts and the values computed from them depend on: every kind's recognizer label, so that
        facts found by two recognizers, or two versions of one, are never pooled."""
        return f"clinical-facts v{FACTS_VERSION};" + ";".join(f"{kind}={label}" for kind, label in self.labels.items())

    def find_many(self, texts: list[str]) -> list[list[Fact]]:
        """Each text's facts, ordered by position (and kind, for facts of two kinds on one span)."""
        from fwsapp.entities.assertion import assertions
        from fwsapp.entities.recognizers import load_recognizer
        from fwsapp.entities.recognizers.bounds import LOWER, UPPER

        texts = [text or "" for text in texts]
        found: list[list[tuple[str, object, str]]] = [[] for _ in texts]
        for kind, name in self.names.items():
            recognizer = load_recognizer(name)
            for index, entities in enumerate(recognizer.find_many(texts)):
                found[index] += [(kind, entity, recognizer.concept(entity.text)) for entity in entities]
        for index in range(len(found)):
            found[index].sort(key=lambda item: (item[1].start, item[1].end, item[0]))
        asserted = assertions(texts, [[(entity.start, entity.end) for _, entity, _ in items] for items in found],
                              [[(entity.start, entity.end) for _, entity, value in items if value.startswith((LOWER, UPPER))]
                               for items in found])
        return [[Fact(kind, entity.start, entity.end, entity.text, value, assertion)
                 for (kind, entity, value), assertion in zip(items, text_assertions)]
                for items, text_assertions in zip(found, asserted)]
