"""One sense per discourse (Gale, Church & Yarowsky 1992): within one text a name keeps one meaning, so its uses
there are all mentions or none, as most of them are tagged.

A tagger reads each window of a text on its own evidence, and a name used several times is sometimes tagged where its
context is unusual and missed where it is plain. The gold corpora are consistent in this way: of the 4,687 whole-word
occurrences of an annotated chemical name in BC5CDR's development abstracts, 9 are not annotated. Held out, a tagged
name most of whose uses the tagger left alone was more often a false mention than a true one, so the vote removes
more errors than it adds (docs/benchmarks.md). No maintained library does this over character spans; it is a few
lines.
"""
from __future__ import annotations

import re

from fwsapp.entities.ner.evaluation import overlaps

Span = tuple[int, int]


def _uses(text: str, name: str) -> list[Span]:
    """Where `name` stands as a whole word or run of words: not inside a longer alphanumeric word ("Li" not in
    "Lithium"), but beside a hyphen it may ("cocaine" in "cocaine-induced", as the corpora annotate it)."""
    pattern = rf"(?<![^\W_]){re.escape(name)}(?![^\W_])"
    return [(found.start(), found.end()) for found in re.finditer(pattern, text)]


def one_sense_per_discourse(text: str, spans: list[Span]) -> list[Span]:
    """The mention spans of `text` after each tagged name's vote: its uses that are not inside another mention (a
    "sodium" within "sodium nitroprusside" is that mention's word, not a use of its own) vote, a tagged use for, an
    untagged one against; with more than half for, every such use is a mention, otherwise none is."""
    tagged = set(spans)
    result = set(spans)
    names = {text[start:end] for start, end in spans}
    for name in sorted(names, key=lambda name: (-len(name), name)):  # a longer name claims its words first
        uses = [use for use in _uses(text, name) if use in tagged or not overlaps(use, tagged)]
        if 2 * sum(use in tagged for use in uses) > len(uses):
            result |= {use for use in uses if not overlaps(use, result)}
        else:
            result -= set(uses)
    return sorted(result)
