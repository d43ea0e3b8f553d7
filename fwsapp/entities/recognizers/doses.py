"""The `doses` recognizer: amounts with a unit ("500 mg", "5–10 mL", "2.5 mg/kg"), counted units ("2 tablets") and
frequencies ("twice daily", "every 4 to 6 hours", "three times a day"), each normalised so that "1 g" and "1000 mg"
are one value, and so are "every 8 hours", "three times a day" and "tid" (3/day).

Written here as a grammar, because the maintained parser of quantities in text, quantulum3 (0.10), disambiguates units
with a scikit-learn model pickled under an older scikit-learn that no longer loads (ModuleNotFoundError: '_loss'),
and a dose's grammar is narrow: a number or a range, then a unit. Units are converted by pint, the maintained library
of physical units, to one unit per dimension (mg, mL, mmol), so equal amounts compare equal whatever unit they use.
"""
from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

from fwsapp.entities.recognizers.base import Entity, Recognizer, after_spaces, leftmost_longest, words_after
from fwsapp.entities.recognizers.bounds import BOUND, bounded

# A naked decimal is a number too (".5 mg", ".25 mg ointment"), as error-prone as prescribers are told it is; it was
# read as nothing. So is a number with thousands groups ("1,000,000 units" was "000,000 units", 0 IU).
NUMBER = r"(?:\d{1,3}(?:,\d{3}){2,}(?:\.\d+)?|\d+(?:[.,]\d+)?|\.\d+)"
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                "ten": 10, "twelve": 12, "half": 0.5}
# A fraction of a tablet or a spoon, after a whole number or not: "1/2", "1 1/2", "½", "1½"; one digit each side, as a
# dose's fractions are ("24/7" is none). Read as its two digits apart, "1/2 teaspoon" was "2 teaspoon", 10 mL.
VULGAR_FRACTIONS = "½¼¾⅓⅔⅛"
FRACTION = rf"(?:\d+\s+)?\d/\d(?!\d)|(?:\d+\s*)?[{VULGAR_FRACTIONS}]"
# Unit spellings -> pint's unit names; counted units (a tablet is no physical unit) map to themselves. Not kilograms: a
# mass in kilograms is a body's ("weigh over 90kg", "weight loss of 30 kg", a BMI "over 40 kg/m2": every one of the
# paper's answers that has one), and was a dose of "9e+07 mg".
UNITS = {
    "mg": "milligram", "milligram": "milligram", "milligrams": "milligram",
    "g": "gram", "gram": "gram", "grams": "gram", "gm": "gram",
    "mcg": "microgram", "µg": "microgram", "μg": "microgram", "ug": "microgram", "microgram": "microgram",
    "micrograms": "microgram",
    "ng": "nanogram",
    "ml": "milliliter", "millilitre": "milliliter", "milliliter": "milliliter", "millilitres": "milliliter",
    "milliliters": "milliliter", "cc": "milliliter",
    "l": "liter", "litre": "liter", "liter": "liter", "litres": "liter", "liters": "liter",
    "mmol": "millimole", "mol": "mole",
    "iu": "IU", "units": "IU", "unit": "IU",
    "%": "percent", "percent": "percent",
    "tablet": "tablet", "tablets": "tablet", "tab": "tablet", "tabs": "tablet", "capsule": "capsule",
    "capsules": "capsule", "pill": "pill", "pills": "pill", "puff": "puff", "puffs": "puff", "drop": "drop",
    "drops": "drop", "spoonful": "spoonful", "teaspoon": "medical_teaspoon", "teaspoons": "medical_teaspoon",
    "tsp": "medical_teaspoon", "tablespoon": "medical_tablespoon", "tablespoons": "medical_tablespoon",
    "tbsp": "medical_tablespoon",
}
# A dosing spoon is the metric one that medicine labels and dosing devices use (5 mL, 15 mL), not pint's US customary
# teaspoon (4.93 mL), which would make "one teaspoon" another dose than "5 mL".
MEDICAL_SPOONS = ("medical_teaspoon = 5 milliliter", "medical_tablespoon = 15 milliliter")
# Each dimension's unit of comparison, and how it is written (clinical style: mL, not pint's ml).
BASE_UNITS = {"[mass]": ("milligram", "mg"), "[length] ** 3": ("milliliter", "mL"), "[substance]": ("millimole", "mmol")}
_UNIT = "|".join(sorted((re.escape(unit) for unit in UNITS), key=len, reverse=True))
# A number written as a word is a whole word: "MU/TENG" was "ten g", 10 g.
COUNT = rf"{NUMBER}|(?:{'|'.join(NUMBER_WORDS)})\b"
# "One and a half units" was "half units", 0.5 IU.
AND_A_HALF = rf"(?:{COUNT})\s+and\s+a\s+half"
# A range's ends may be joined by "or" and written as words ("one or two tablets", "two to three tablets"), as a count
# of times may be: the higher end alone was read, so "1-2 tablets" and "one or two tablets" were two doses.
_AMOUNT = rf"(?P<low>{FRACTION}|{AND_A_HALF}|half\s+an?|{COUNT})(?:\s*(?:-|–|to|or)\s*(?P<high>{FRACTION}|{COUNT}))?"
# A dose per body weight or area may be per time or dose as well ("2.5 mg/kg/day" is not "2.5 mg/kg/dose"); an amount
# per volume is a concentration ("100 mg/dL", "5 mmol/L": read as "100 mg", a lab value was one with a dose), and one
# per amount a ratio (an HbA1c of "48 mmol/mol" was "48 mmol").
# Each a whole word: "per dose" is not "per d[ay]". An amount a day or a week is written other ways too: "a day",
# "each week", "in 24 hours", "/24h" (`_PERIOD_WORDS`, `_A_DAY_IN_HOURS`), and read apart from its amount as a `PERIOD`.
_PERIOD_WORDS = r"(?:an?|each|every|in\s+(?:a|one))\s+(?P<per_word>day|week)(?!\w)"
_A_DAY_IN_HOURS = r"(?:/\s*|(?:in|per|over)\s+(?:a\s+|any\s+|one\s+)?)24[\s-]*(?:hours?|hrs?|h)(?!\w)(?:\s+period)?"
# An amount per hours is a rate ("2 ml/hours" was 2 mL); an amount per a number of hours or days is the amount and its
# frequency ("10 mg / 6 hours", as "10 mg every 6 hours": it was 10 mg alone).
_HOURS = r"hours?|hrs?|h"
_INTERVAL = rf"(?:/\s*|per\s+)(?P<interval>{COUNT})\s*(?P<interval_unit>{_HOURS}|days?|weeks?)(?!\w)"
# A liquid's strength is an amount per a volume ("250 mg/5 mL", "250mg in 5ml"): one concentration, per one of its
# unit ("50 mg/mL", as "50 mg/mL" is written); it was two doses, 250 mg and 5 mL.
_PER_VOLUME = rf"(?:/\s*|per\s+|in\s+)(?P<volume>{NUMBER})\s*(?P<volume_unit>ml|dl|l)(?!\w)"
_PER = (rf"(?:\s*(?:/\s*|per\s+)(?P<per>kg|day|dose|d|{_HOURS}|min(?:ute)?s?|m2|m²|week|dl|ml|l|litre|liter|mol)(?!\w)"
        rf"(?:\s*(?:/\s*|per\s+)(?P<per_then>day|dose|d|{_HOURS}|min(?:ute)?s?|week)(?!\w))?"
        rf"|\s+{_PERIOD_WORDS}|\s*(?P<per_24h>{_A_DAY_IN_HOURS})|\s*(?P<per_interval>{_INTERVAL})"
        rf"|\s*{_PER_VOLUME})?")
# Not after a digit and a slash: "120/80" is a ratio, "5/2" no 2 of anything. With its bound, if any ("up to 4 g").
DOSE = re.compile(rf"(?<![\w.])(?<!\d/)(?:{BOUND})?{_AMOUNT}\s*(?P<unit>{_UNIT})(?![\w]){_PER}", re.IGNORECASE)
# The period of an amount's "per day" or "a week" ("40 mg per day" is 40 mg once a day, as "40 mg daily" is: read as one
# value, it was another dose than the amount and its frequency, and "4 g a day" was 4 g).
PERIOD = re.compile(rf"(?:/\s*|per\s+)(?P<period>day|d|week)(?!\w)|{_PERIOD_WORDS}|{_A_DAY_IN_HOURS}|{_INTERVAL}",
                    re.IGNORECASE)
TIMES = {"once": 1, "twice": 2, "thrice": 3}
# A count may be a range ("1-2 times a day", "two or three times a day", "once or twice daily": the higher end alone
# was read, so "1-2 times a day" and "twice a day" were one value), and hyphenated ("twice-daily" was "daily", 1/day).
# A year is a period ("once a year", "every 2 years"), but "annually" and "yearly" alone are none: in the paper's
# answers they are mostly of statistics ("8,000 new lesions annually"). "Every day", "each night", "every week" and
# "each month" are "daily", "nightly", "weekly" and "monthly" in two words (`each_period`): "take it every day" read as
# no frequency, so a watermark's "take it daily" for it read as a frequency added.
FREQUENCY = re.compile(
    rf"(?:(?<!\w){BOUND})?\b(?:(?:(?P<times>once|twice|thrice)(?:\s+or\s+(?P<times_high>twice|thrice))?"
    rf"|(?P<count>{COUNT})(?:\s*(?:-|–|to|or)\s*(?P<count_high>{COUNT}))?\s+times?)[\s-]+"
    r"(?:(?:an?|per|each|every)[\s-]+)?(?P<period>day|daily|week|weekly|month|monthly|hour|year)"
    rf"|every\s+(?P<every>{COUNT})(?:\s*(?:-|–|to)\s*(?P<every_high>{NUMBER}))?\s*"
    r"(?P<every_unit>hours?|hrs?|days?|weeks?|months?|years?)"
    r"|every\s+other\s+(?P<every_other>day|week)"
    r"|q(?P<every_hours>[1-9]\d?)h"
    r"|(?:every|each)\s+(?P<each_period>day|night|week|month)"
    r"|(?P<daily>daily|nightly|weekly|monthly|bid|tid|qid|qd|qod|b\.i\.d\.|t\.i\.d\.))\b",
    re.IGNORECASE)
PERIODS = {"day": "day", "daily": "day", "week": "week", "weekly": "week", "month": "month", "monthly": "month",
           "hour": "hour", "year": "year", "nightly": "day", "night": "day"}
# How a unit after "per" or "every" is written in a value (its plural's "s" dropped first: "hrs", "hours", "mins").
PER_UNITS = {"d": "day", "h": "hour", "hr": "hour", "minute": "min", "dl": "dL", "ml": "mL", "l": "L", "litre": "L",
             "liter": "L", "m²": "m2"}
# The clinical abbreviations, in doses a day: "qd" once, "qod" every other day.
ABBREVIATED = {"bid": 2, "b.i.d.": 2, "tid": 3, "t.i.d.": 3, "qid": 4, "qd": 1, "qod": 0.5}
# A frequency is a rate, written per the first of these periods in which it is a whole number at least 1 ("4/month",
# not "0.92/week"), else as its interval, in the longest of INTERVAL_UNITS in which that is whole ("every 2 weeks", not
# "2.17411/month"; "every 36 hours"): an interval and a count that are one rate are one value.
RATE_PERIODS = ("day", "week", "month", "year")
INTERVAL_UNITS = ("year", "month", "week", "day", "hour")


def written_number(text: str) -> float:
    """A written amount's value: '1,000' 1000, '0,5' 0.5, 'two' 2, 'twice' 2, 'half a' 0.5, '1 1/2', '1½' and 'one
    and a half' 1.5."""
    text = " ".join(text.lower().split())
    if text.endswith(" and a half"):
        return written_number(text.removesuffix(" and a half")) + 0.5
    words = {**NUMBER_WORDS, **TIMES}
    if text.split()[0] in words:
        return words[text.split()[0]]
    if "/" in text:
        whole, _, fraction = text.rpartition(" ")
        return float(whole or 0) + float(Fraction(fraction))
    if text[-1] in VULGAR_FRACTIONS:
        return float(text[:-1] or 0) + unicodedata.numeric(text[-1])
    return float(text.replace(",", ".") if text.count(",") == 1 and len(text.split(",")[1]) != 3
                 else text.replace(",", ""))


def per_unit(written: str) -> str:
    """A unit after "per", a slash or "every", as a value writes it: 'hrs', 'hours' and 'h' 'hour', 'ml' 'mL'."""
    unit = written.lower().removesuffix("s")
    return PER_UNITS.get(unit, unit)


def written_values(match: re.Match, low: str, high: str) -> tuple[float, ...]:
    """The value of group `low`, and of group `high` where a range gives one."""
    return tuple(written_number(match[group]) for group in (low, high) if match[group])


def shown_number(value: float) -> str:
    """Six significant digits, written out: '1000000 IU', not '1e+06 IU'."""
    return format(Decimal(f"{value:.6g}"), "f")


@lru_cache(maxsize=1)
def _registry():
    import pint

    registry = pint.UnitRegistry()
    registry.define("IU = [international_unit]")
    for definition in MEDICAL_SPOONS:
        registry.define(definition)
    return registry


@lru_cache(maxsize=256)
def _to_base(unit: str) -> tuple[float, str]:
    """(factor, unit of comparison) for a unit: 1 g -> (1000, 'mg'). Counted units stay as they are."""
    registry = _registry()
    if unit not in registry:
        return 1.0, unit
    quantity = registry.Quantity(1, unit)
    base = BASE_UNITS.get(str(quantity.dimensionality))
    if base is None:
        return 1.0, f"{quantity.units:~}"
    return float(quantity.to(base[0]).magnitude), base[1]


def dose_value(text: str) -> str:
    """A dose's normalised value: '1 g' -> '1000 mg', '5–10 mg' -> '5-10 mg', 'twice daily' -> '2/day', 'no more than
    4 g' -> '≤ 4000 mg' (`bounds`); the lower-cased text where it is no dose."""
    match = DOSE.fullmatch(text.strip())
    if match:
        factor, unit = _to_base(UNITS[match["unit"].lower()])
        if match["volume"]:
            factor /= written_number(match["volume"])
        amount = "-".join(shown_number(value * factor) for value in written_values(match, "low", "high"))
        pers = [per_unit(per) for per in (match["per"], match["per_then"], match["volume_unit"]) if per]
        return bounded(match, f"{amount} {unit}" + "".join(f"/{per}" for per in pers))
    match = FREQUENCY.fullmatch(text.strip())
    if match:
        return bounded(match, _frequency(match))
    match = PERIOD.fullmatch(text.strip())
    if match and match["interval"]:
        return _rate((1 / written_number(match["interval"]),), per_unit(match["interval_unit"]))
    if match:
        return _rate((1,), "week" if (match["period"] or match["per_word"] or "").lower() == "week" else "day")
    return " ".join(text.lower().split())


def _frequency(match: re.Match) -> str:
    """A FREQUENCY match's rate."""
    if match["daily"]:
        word = match["daily"].lower()
        return _rate((ABBREVIATED[word],), "day") if word in ABBREVIATED else _rate((1,), PERIODS[word])
    if match["each_period"]:
        return _rate((1,), PERIODS[match["each_period"].lower()])
    if match["every"]:
        unit = per_unit(match["every_unit"])
        return _rate(tuple(1 / interval for interval in written_values(match, "every", "every_high")), unit)
    if match["every_other"]:
        return _rate((0.5,), match["every_other"].lower())
    if match["every_hours"]:
        return _rate((1 / int(match["every_hours"]),), "hour")
    counts = written_values(match, "times", "times_high") if match["times"] else written_values(match, "count", "count_high")
    return _rate(counts, PERIODS[match["period"].lower()])


def _rate(counts: tuple[float, ...], period: str) -> str:
    """`counts` times per `period` (one count, or a range's two) as a rate in one of RATE_PERIODS, or as an interval,
    converted by pint: "every 8 hours" is (1/8,) per hour, '3/day'; "every 4 to 6 hours" '4-6/day'; "every 7 days"
    '1/week'; "every 28 days" 'every 4 weeks' (it was '1.08705/month'); "every other day" 'every 2 days'."""
    registry = _registry()
    rates = [registry.Quantity(count, f"1/{period}") for count in counts]

    def in_unit(quantities, unit: str) -> list[float]:
        return sorted(float(shown_number(quantity.to(unit).magnitude)) for quantity in quantities)

    def whole(values: list[float]) -> bool:
        return all(value == round(value) for value in values)

    per_period = [(in_unit(rates, f"1/{unit}"), unit) for unit in RATE_PERIODS]
    for values, unit in per_period:
        if values[0] >= 1 and whole(values):
            return "-".join(map(shown_number, values)) + f"/{unit}"
    for unit in INTERVAL_UNITS:
        intervals = in_unit([1 / rate for rate in rates], unit)
        if whole(intervals):
            return "every " + "-".join(map(shown_number, intervals)) + f" {unit}s"
    # An interval that is whole in no unit ("every 2.5 hours"): the rate per the first period in which it is at least 1.
    values, unit = next(((values, unit) for values, unit in per_period if values[-1] >= 1), per_period[-1])
    return "-".join(map(shown_number, values)) + f"/{unit}"


# Nouns a frequency word before them still times: "a daily dose", "daily tablets", "multiple daily injections".
DOSING_NOUNS = frozenset({"dose", "doses", "dosage", "dosing", "tablet", "tablets", "pill", "pills", "capsule",
                          "capsules", "injection", "injections", "medication", "medications", "medicine", "intake"})
# What makes a percentage a concentration, written after it: a preparation ("1% cream", "0.05% solution"), a
# strength notation ("21% w/v", "5 % ABV"), alcohol or oxygen; or a drug's name ("1% clobetasol").
CONCENTRATION_WORDS = frozenset({
    "w/v", "w/w", "v/v", "abv", "alcohol", "oxygen", "solution", "solutions", "cream", "creams", "ointment", "gel",
    "lotion", "spray", "drops", "saline", "dextrose", "glucose", "strength", "concentration", "foam", "shampoo", "wash",
    "mouthwash", "patch", "patches", "paste", "powder", "suspension", "emulsion", "preparation"})


def names_a_dose(text: str, start: int, end: int) -> bool:
    """Whether a recognizer's mention text[start:end] can be a dose. A frequency word alone ("daily", "weekly") before
    a noun is an adjective, "daily activities", "daily life", "Daily Fluid Intake" (133 of the 1,296 dose mentions
    in the paper's answers), and so is one in two words ("every day tasks"), unless the noun is a dose's ("a daily
    dose", "daily tablets"); before a function word or a stop it is an adverb ("apply it daily to the wart", "taken
    weekly."). A percentage is a dose only as a concentration, with a preparation, alcohol or a drug in the two words
    after it ("1% hydrocortisone cream", "40% alcohol"): "25% of patients", "a 20% reduction", "95% CI" are
    statistics, 510 of those dose mentions. A capital G glued to a number is a needle's or a cannula's gauge ("a 14G
    curette", "an 18G cannula"), not grams ("g")."""
    from spacy.lang.en.stop_words import STOP_WORDS

    mention = text[start:end]
    dose = DOSE.fullmatch(mention)
    if dose and UNITS[dose["unit"].lower()] == "percent":
        return any(word in CONCENTRATION_WORDS or _is_drug(word) for word in words_after(text, end))
    if dose and dose["unit"] == "G" and mention[dose.start("unit") - 1].isdigit():
        return False
    frequency = FREQUENCY.fullmatch(mention)
    if not (frequency and (frequency["each_period"] or frequency["daily"] and frequency["daily"].lower() in PERIODS)):
        return True
    following = words_after(text, end, 1)
    return not following or following[0] in STOP_WORDS or following[0] in DOSING_NOUNS


def without_amounts(text: str, start: int, end: int) -> tuple[int, int]:
    """A drug's mention text[start:end] without the amounts at its edges, and a mention inside an amount none (an empty
    span, which the mention rule refuses): the chemical kind's bounds. The chemical tagger read a dose glued to its drug
    as part of the name ("lisinopril 10mg", a concept of its own, so "lisinopril 10 mg" against it was a drug changed)
    and an amount's unit as a drug ("10 IU"; "Vitamin D 1000" and "IU" of "Vitamin D 1000 IU"). An amount is a DOSE
    that `names_a_dose` takes, from its number to its unit, without the bound before it ("do not take ibuprofen more
    than 400 mg" keeps "ibuprofen"); a number without a unit stays ("vitamin B 12", "omega 3"), and so does one that is
    no dose ("rhodamine 6G", a gauge's capital G)."""
    for amount_start, amount_end in _amounts(text):
        if amount_start <= start < amount_end:  # "1% hydrocortisone": the name after the amount
            start = after_spaces(text, amount_end, end)
        elif start < amount_start < end:  # "lisinopril 10mg": the name before it
            return start, start + len(text[start:amount_start].rstrip())
    return start, end


@lru_cache(maxsize=64)
def _amounts(text: str) -> tuple[tuple[int, int], ...]:
    """Each amount's span in `text`, from its number to its unit; one text's mentions ask it in turn."""
    return tuple((match.start("low"), match.end("unit")) for match in DOSE.finditer(text)
                 if names_a_dose(text, match.start(), match.end()))


def _is_drug(word: str) -> bool:
    """Whether the drug lexicon names `word` (the dose recognizer's registry entry needs the lexicon's package)."""
    from fwsapp.entities.recognizers.drugs import drug_variants

    return word in drug_variants()


class DoseRecognizer(Recognizer):
    """Amounts with units, and frequencies, longest first; no model."""

    kind = "dose"

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return [[entity for start, end in leftmost_longest(text, (DOSE, FREQUENCY))
                 for entity in _amount_and_period(text, start, end)] for text in texts]


def _amount_and_period(text: str, start: int, end: int) -> list[Entity]:
    """A mention, or an amount a day or a week as two: the amount and its period, so that "40 mg per day", "40 mg a
    day" and "40 mg daily" are the same two facts (40 mg, 1/day), and "twice daily" against any of them changes the
    frequency alone."""
    dose = DOSE.fullmatch(text, start, end)
    periodic = dose and not dose["per_then"] and (
        (dose["per"] or "").lower() in ("day", "d", "week") or dose["per_word"] or dose["per_24h"] or dose["per_interval"])
    if not periodic:
        return [Entity(text[start:end], start, end)]
    amount_end = dose.end("unit")
    period_start = after_spaces(text, amount_end, end)
    return [Entity(text[start:amount_end], start, amount_end), Entity(text[period_start:end], period_start, end)]
