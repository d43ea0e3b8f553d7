"""Abbreviations a text defines, "long form (SF)", found by Schwartz & Hearst's algorithm (2003) as scispaCy's
AbbreviationDetector implements it, and their use to make a recognizer consistent within a text.

A model tagging words one window at a time often finds "heparin-induced thrombocytopenia (HIT)" and misses a bare
"HIT" three sentences on, or tags an abbreviation whose definition says it is no disease. Within the text that
defines it, an abbreviation means its long form: so it is a disease mention wherever it occurs exactly when its
long form is one.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

from fwsapp.entities.ner.evaluation import overlaps
from fwsapp.entities.recognizers.tokenizer import english

Span = tuple[int, int]


@dataclass(frozen=True)
class Abbreviation:
    short: str
    long_form: Span
    occurrences: tuple[Span, ...]  # every occurrence of the short form in the text


@lru_cache(maxsize=1)
def _pipeline():
    from scispacy.abbreviation import AbbreviationDetector  # noqa: F401  (registers the pipe)

    # The detector's second matcher is filled per text, so spaCy warns of an empty matcher on texts without one.
    warnings.filterwarnings("ignore", message=r"\[W036\]")
    nlp = english()
    nlp.add_pipe("sentencizer")
    nlp.add_pipe("abbreviation_detector")
    return nlp


def find_abbreviations(texts: list[str]) -> tuple[tuple[Abbreviation, ...], ...]:
    """The abbreviations each text defines. The last batch's answer is kept: the disease and the chemical tagger
    settle the same texts one after the other."""
    return _abbreviations(tuple(texts))


@lru_cache(maxsize=1)
def _abbreviations(texts: tuple[str, ...]) -> tuple[tuple[Abbreviation, ...], ...]:
    found = []
    for doc in _pipeline().pipe(texts, batch_size=64):
        grouped: dict[tuple[str, Span], set[Span]] = {}
        for short in doc._.abbreviations:
            long_form = short._.long_form
            grouped.setdefault((short.text, (long_form.start_char, long_form.end_char)), set()).add(
                (short.start_char, short.end_char))
        found.append(tuple(Abbreviation(short, long_form, tuple(sorted(spans)))
                           for (short, long_form), spans in grouped.items()))
    return tuple(found)


def _head(text: str, long_form: Span) -> Span:
    """The long form's last word: the head of an English noun phrase ("infarction" in "acute myocardial
    infarction", "protein" in "Wiskott-Aldrich syndrome protein")."""
    start, end = long_form
    words = text[start:end].split()
    return (end - len(words[-1]), end) if words else long_form


def make_consistent(text: str, spans: list[Span], abbreviations: list[Abbreviation]) -> list[Span]:
    """Mention spans with each defined abbreviation tagged as its long form is: every occurrence added where a
    mention holds the long form's head word (a disease), every occurrence dropped where no mention touches the long
    form (no disease); left as tagged otherwise ("spontaneously hypertensive rats (SHR)" names rats)."""
    result = set(spans)
    for abbreviation in abbreviations:
        if overlaps(_head(text, abbreviation.long_form), spans):
            result |= {occurrence for occurrence in abbreviation.occurrences if not overlaps(occurrence, spans)}
        elif not overlaps(abbreviation.long_form, spans):
            result -= set(abbreviation.occurrences)
    return sorted(result)
