"""A bound on an amount or a length: "more than 4 g", "at least 7 days", "up to twice a day", "do not exceed 4 g",
"for two days or less". A bound is part of the value it qualifies: "less than 9 mmol/L" is a target, "more than 9
mmol/L" its opposite, and "9 mmol/L" a reading; read past, the three were one value, so a watermark that flipped a
limit changed no fact.

A lower and an upper bound are told apart, but not a strict one from an inclusive one: patient-facing text writes "no
more than 4 g", "up to 4 g" and "less than 4 g" for one limit, and "more than a week" and "at least a week" for one
threshold. A negation before a bound turns it ("no more than", "not less than", "do not take more than", "not to
exceed"): a limit, which is why these words negate no fact (fwsapp.entities.assertion), share this vocabulary.
"""
from __future__ import annotations

import re

LOWER, UPPER = "≥", "≤"
# Comparatives, each with the direction of its bound ("more than 4 g", "or less"); a limit is written with one ("no
# more than"), and the words before one that make a limit of it.
COMPARATIVES = {"more": LOWER, "greater": LOWER, "higher": LOWER, "longer": LOWER,
                "less": UPPER, "fewer": UPPER, "lower": UPPER, "shorter": UPPER}
VERB_NEGATIONS = ("not", "don't", "doesn't", "never")
LIMIT_VERBS = ("take", "use", "give", "have", "drink", "eat", "apply", "consume")
# Each bound's direction, as written before an amount.
BOUNDS = {
    **{f"{comparative} than": direction for comparative, direction in COMPARATIVES.items()},
    "over": LOWER, "above": LOWER, "at least": LOWER, "in excess of": LOWER, "exceeding": LOWER, "exceeds": LOWER,
    "exceed": LOWER, "a minimum of": LOWER, "minimum of": LOWER,
    "under": UPPER, "below": UPPER, "up to": UPPER, "at most": UPPER, "a maximum of": UPPER, "maximum of": UPPER,
}
# ... as a sign ("LDL-C < 70 mg/dL", "BMI >30 kg/m2": 15 of the paper's dose mentions) ...
SIGNS = {"<": UPPER, "≤": UPPER, "<=": UPPER, "=<": UPPER, ">": LOWER, "≥": LOWER, ">=": LOWER, "=>": LOWER}
# ... and after it: "for two days or less", "for a week or longer".
BOUNDS_AFTER = {**COMPARATIVES, "over": LOWER, "above": LOWER, "under": UPPER, "below": UPPER}
# The bounds a negation turns into a limit: "no more than 4 g", "do not exceed 4 g", "do not use it for longer than 7
# days". Not "at least", "up to" or "a minimum of": "do not drink alcohol for at least 48 hours" says how long to
# abstain, and was read "≤ 2 days".
NEGATABLE = [phrase for phrase in BOUNDS if phrase.endswith(" than")
             or phrase in ("over", "above", "under", "below", "exceed", "exceeds", "exceeding", "in excess of")]


def _either(words) -> str:
    return "|".join(r"\s+".join(map(re.escape, phrase.split())) for phrase in sorted(words, key=len, reverse=True))


# "Do not" whole, so that a limit's span reads as it is written ("Do not exceed 4 g").
_VERB_NEGATION = rf"(?:(?:do|does)\s+(?=not\b))?(?:{_either(VERB_NEGATIONS)})"
_NEGATION = rf"(?:no|{_VERB_NEGATION})\s+(?:to\s+)?"
# A negated verb before the bound ("do not take more than", "never use it for more than"), or before the "for" of a
# length ("not be used for more than 7 days", "is not intended to be used for more than four weeks", which was a lower
# bound), with up to three words of what it limits between ("do not take ibuprofen for more than 10 days", "do not give
# children under 12 more than 2 tablets"): read without them, the bound was not turned ("≥ 10 days").
NEGATED_VERB = (rf"{_VERB_NEGATION}\s+(?:(?:intended|meant|supposed|designed)\s+to\s+)?"
                rf"(?:{_either(LIMIT_VERBS)}|be\s+(?:used|taken|given|applied))\s+(?:[\w'-]+\s+){{0,3}}?")
# A bound a negation turns, and a negation where one follows.
TURNED_BOUND = rf"(?:{_either(NEGATABLE)})\b"
_TURNING = rf"(?:{_NEGATION}|{NEGATED_VERB})(?={TURNED_BOUND})"
# A bound and what separates it from its amount: a space, or none before a digit, as a 7B answer may write it ("less
# than1.8 mmol/l", whose amount, glued to a word, was no dose at all).
BOUND = (rf"(?:(?P<negation>{_TURNING})?(?P<bound>{_either(BOUNDS)})(?:\s+|(?=\d))"
         rf"|(?P<sign>{_either(SIGNS)})\s*)")
BOUND_AFTER = rf"\s+or\s+(?P<bound_after>{_either(BOUNDS_AFTER)})\b"


def bound(match: re.Match) -> str:
    """The direction of a match's bound, LOWER, UPPER or '' where it has none, from its groups `sign`, `bound` or
    `bound_after`, a word turned by a `negation` or a `negated_verb` (groups of BOUND, BOUND_AFTER and NEGATED_VERB)."""
    groups = match.groupdict()
    if groups.get("sign"):
        return SIGNS[groups["sign"]]
    written = groups.get("bound") or groups.get("bound_after")
    if not written:
        return ""
    direction = (BOUNDS if groups.get("bound") else BOUNDS_AFTER)[" ".join(written.lower().split())]
    negated = groups.get("negation") or groups.get("negated_verb")
    return {LOWER: UPPER, UPPER: LOWER}[direction] if negated else direction


def bounded(match: re.Match, value: str) -> str:
    """`value` with its bound before it: '≤ 4000 mg'."""
    direction = bound(match)
    return f"{direction} {value}" if direction else value
