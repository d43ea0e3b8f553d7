"""The `durations` recognizer: how long a treatment or a symptom lasts, "for 7 days", "for two to three weeks", "a
10-day course", normalised so that "for 2 weeks" and "for 14 days" are one value. A course's length is a dose's third
part, beside its amount and frequency ("500 mg three times a day for 7 days"), and a symptom's is a fact of the history
a summary must keep ("my ear has been blocked for three weeks").

A grammar, for the dose grammar's reason (fwsapp/entities/recognizers/doses.py: no maintained parser of quantities in
text loads), sharing its numbers. Only a length with a number is one: "for years" and "for a few days" state none.
"""
from __future__ import annotations

import re

from fwsapp.entities.recognizers.base import Entity, Recognizer, leftmost_longest
from fwsapp.entities.recognizers.bounds import BOUND, BOUND_AFTER, NEGATED_VERB, TURNED_BOUND, bounded
from fwsapp.entities.recognizers.doses import AND_A_HALF, COUNT, shown_number, written_values

# Each unit's length in hours or in months: hours, days and weeks are written in days (hours that make no whole day in
# hours), months and years in months (a month is no whole number of days).
HOURS = {"hour": 1, "hr": 1, "day": 24, "week": 168, "wk": 168}
MONTHS = {"month": 1, "year": 12, "yr": 12}
_UNIT = r"(?P<unit>hours?|hrs?|days?|weeks?|wks?|months?|years?|yrs?)"
_AMOUNT = rf"(?P<low>{AND_A_HALF}|{COUNT}|an?)(?:\s*(?:-|–|to|or)\s*(?P<high>{COUNT}))?"
# "for 7 days", "for about 2 weeks", "for another 3 days", "for the next 48 hours": the words a length may be hedged by
# leave its value as it is; its bound is part of it ("for more than 3 hours", "for two days or less", "do not use it
# for more than 7 days").
_HEDGE = r"(?:about|around|approximately|another|the\s+(?:next|past|last|first))"
FOR_LENGTH = re.compile(
    rf"(?:(?P<negated_verb>{NEGATED_VERB})(?=for\s+{TURNED_BOUND}))?"
    rf"\bfor\s+(?:{BOUND}|{_HEDGE}\s+)?{_AMOUNT}\s+{_UNIT}\b(?:{BOUND_AFTER})?", re.IGNORECASE)
# "a 10-day course", "a 2 week supply": a length before the course it measures.
COURSE = re.compile(rf"\b(?P<low>{COUNT})(?:\s*(?:-|–|to)\s*(?P<high>{COUNT}))?[\s-]+(?P<unit>day|week|month)\s+"
                    r"(?:course|treatment|regimen|supply)\b", re.IGNORECASE)


def duration_value(text: str) -> str:
    """A length's normalised value: 'for 2 weeks' and 'a 14-day course' '14 days', 'for 48 hours' '2 days', 'for a
    year' '12 months', 'for 5-7 days' '5-7 days', 'for at least a week' '≥ 7 days' (`bounds`); the lower-cased text
    where it is no length."""
    match = FOR_LENGTH.fullmatch(text.strip()) or COURSE.fullmatch(text.strip())
    if not match:
        return " ".join(text.lower().split())
    unit = match["unit"].lower().rstrip("s")
    low = 1.0 if match["low"].lower() in ("a", "an") else None
    amounts = (low,) if low else written_values(match, "low", "high")
    if unit in MONTHS:
        return bounded(match, _written([amount * MONTHS[unit] for amount in amounts], "month"))
    hours = [amount * HOURS[unit] for amount in amounts]
    whole_days = HOURS[unit] > 1 or not any(value % 24 for value in hours)
    return bounded(match, _written([value / 24 for value in hours], "day") if whole_days else _written(hours, "hour"))


def _written(amounts: list[float], unit: str) -> str:
    shown = "-".join(shown_number(amount) for amount in amounts)
    return f"{shown} {unit}" + ("" if shown == "1" else "s")


class DurationRecognizer(Recognizer):
    """Lengths of a course or a symptom, longest first; no model."""

    kind = "duration"

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return [[Entity(text[start:end], start, end) for start, end in leftmost_longest(text, (FOR_LENGTH, COURSE))]
                for text in texts]
