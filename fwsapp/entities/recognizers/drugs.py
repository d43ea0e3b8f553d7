"""The `drug-lexicon` recognizer: drug and drug-class names from the `drug-named-entity-recognition` package
(DrugBank, MeSH pharmacological actions, MedlinePlus, Wikipedia; brand names included), case-insensitive, longest
match, less the package's own stoplist. Each name is normalised to the package's canonical (generic) name, so
"Tylenol", "paracetamol" and "acetaminophen" are one concept. It is also the chemical tagger's lexicon feature."""
from __future__ import annotations

import bz2
import pickle
from functools import lru_cache
from pathlib import Path

from fwsapp.entities.recognizers import DRUG_PACKAGE
from fwsapp.entities.recognizers.base import Entity, Recognizer, normalize
from fwsapp.entities.recognizers.phrase_matcher import cached_phrase_matcher
from fwsapp.models import package_folder
from fwsapp.paths import CACHE_DIR


@lru_cache(maxsize=1)
def _package_data() -> dict:
    """The package's data file: the package is a data wheel, never imported (its module downloads structures and
    calls web APIs)."""
    path = package_folder(DRUG_PACKAGE) / "drug_ner_dictionary.pkl.bz2"
    # The package's own data file (a trusted, installed dependency), not user input.
    with bz2.open(path, "rb") as handle:
        return pickle.load(handle)


def drug_dictionary() -> dict[str, list[str]]:
    """The package's drug name -> canonical names map (lower case)."""
    return _package_data()["drug_variant_to_canonical"]


def package_records() -> dict[str, dict]:
    """The package's record of each canonical name (lower case): its DrugBank and MeSH identifiers among others."""
    return _package_data()["drug_canonical_to_data"]


# What clinical text means by a name the package files otherwise, None where it names no drug there. "Alcohol" alone is
# ethanol: the package has it only as "alcohol,", the head of "Alcohol, benzyl" cut at its comma, so each of the 196
# "alcohol"s in the paper's answers was benzyl alcohol (ethanol it files as "ethyl alcohol" and "grain alcohol"). DMPA
# is depot medroxyprogesterone acetate, not the herbicide Zytron; CPPD calcium pyrophosphate deposition disease, not an
# antioxidant of rubber (71 of the paper's answers); "beta-2" the receptor, not isoetharine. Laboratory reagents'
# acronyms that running text uses as words ("sits", "caps", "indicators") and an organ the package files under the
# medicine made of it ("thyroid gland", desiccated thyroid, in 22 of the paper's answers) name none.
# The package lacks adrenaline and estradiol, in either spelling, and GTN (glyceryl trinitrate). And it files a
# British name from the NHS's pages as a drug apart from the US one from MedlinePlus or MeSH, so an NHS reference's
# "mesalazine" left an answer's "mesalamine" unsupported, a drug changed: a reading of a name the package files
# others under holds for those names too ("Piriton", a brand of chlorphenamine, is chlorpheniramine).
CLINICAL_READINGS = {"alcohol": "ethanol", "dmpa": "medroxyprogesterone acetate", "cppd": None, "beta 2": None,
                     "sits": None, "caps": None, "indicators": None, "thyroid gland": None,
                     "adrenaline": "epinephrine", "adrenalin": "epinephrine", "estradiol": "estradiol",
                     "oestradiol": "estradiol", "gtn": "nitroglycerin", "glyceryl trinitrate": "nitroglycerin",
                     "chlorphenamine": "chlorpheniramine", "mesalazine": "mesalamine"}
# The letters an International Nonproprietary Name is spelt without (WHO's general principles for devising INNs: "ae"
# and "oe" as "e", "ph" as "f", "th" as "t", "y" as "i", and no "h" after "c"). British and older US names keep them,
# and the package files each spelling as a drug of its own: "aciclovir" and "acyclovir", "cefalexin" and "cephalexin",
# "colecalciferol" and "cholecalciferol", "beclometasone" and "beclomethasone", "simeticone" and "simethicone".
INN_SPELLING = (("ae", "e"), ("oe", "e"), ("ph", "f"), ("th", "t"), ("y", "i"), ("ch", "c"))


@lru_cache(maxsize=1)
def drug_variants() -> dict[str, str]:
    """Drug name (normalised) -> its canonical generic name (normalised), for names the package files under one, that
    keep at least 3 letters or digits once normalised ("[he]", helium, is "he": every "He was" was helium; "2',3",
    stavudine, matched "2 3"), and that are no English function word (spaCy's stop words), organ, nor a reagent's
    acronym that is a word: "more", a brand of pancreatic enzymes, was a third of the lexicon's matches in the paper's
    answers (1,991 of 6,616). Nor a code made of function words, letters and numbers alone ("at 10", a brand of
    dihydrotachysterol, was every "at 10 years"). CLINICAL_READINGS say what a name means in clinical text where the
    package says otherwise, and each drug is one concept however its name is spelt (`_one_concept_per_drug`)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    no_drug = {name for name, reading in CLINICAL_READINGS.items() if reading is None}
    left_out = _stoplist() | STOP_WORDS | no_drug
    variants = {}
    for variant, targets in drug_dictionary().items():
        name = normalize(variant)
        if (len(targets) == 1 and len(name.replace(" ", "")) > 2 and not {variant, name} & left_out
                and not all(word in STOP_WORDS or word.isdigit() or len(word) == 1 for word in name.split())):
            variants[name] = normalize(targets[0])
    readings = {name: reading for name, reading in CLINICAL_READINGS.items() if reading}
    return _one_concept_per_drug({name: readings.get(canonical, canonical) for name, canonical in variants.items()}
                                 | readings)


def _one_concept_per_drug(variants: dict[str, str]) -> dict[str, str]:
    """`variants` with the canonical names of one INN spelling (INN_SPELLING) one: the one MeSH files, else the one
    DrugBank does, else the first in order. In the package's 20,071 canonical names 9 pairs share a spelling, and each
    pair is one drug (no two DrugBank or MeSH identifiers)."""
    records = package_records()
    canonicals = set(variants.values())
    by_spelling: dict[str, list[str]] = {}
    for canonical in sorted(canonicals):
        by_spelling.setdefault(inn_spelling(canonical), []).append(canonical)

    def rank(canonical: str) -> tuple[bool, bool]:
        record = records.get(canonical) or {}
        return not record.get("mesh_id"), not record.get("drugbank_id")

    chosen = {canonical: min(names, key=rank) for names in by_spelling.values() for canonical in names}
    return {name: chosen[canonical] for name, canonical in variants.items()}


def inn_spelling(name: str) -> str:
    """`name` spelt as an INN is (INN_SPELLING): "acyclovir" "aciclovir", "cholecalciferol" "colecalciferol"."""
    for written, spelt in INN_SPELLING:
        name = name.replace(written, spelt)
    return name


def _stoplist() -> frozenset[str]:
    """The package's own list of words its dictionary holds but running text uses otherwise ("abbott", "today"),
    read as the literal it is in its util module (importing the module would import the package)."""
    import ast

    tree = ast.parse((package_folder(DRUG_PACKAGE) / "util.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(target, "id", "") == "stopwords" for target in node.targets):
            return frozenset(ast.literal_eval(node.value))
    return frozenset()


def drug_concept(name: str) -> str:
    """The canonical generic name a drug name is filed under; the normalised name itself where none."""
    normalized = normalize(name)
    return drug_variants().get(normalized, normalized)


def lexicon_matcher(cache_dir: Path = CACHE_DIR):
    """(a blank English spaCy pipeline, its PhraseMatcher over every drug name, case-insensitive), kept in cache/."""
    return cached_phrase_matcher("drug", "CHEMICAL", sorted(drug_variants()), cache_dir)


class DrugLexiconRecognizer(Recognizer):
    """Drug names, case-insensitive, longest match."""

    kind = "chemical"

    def __init__(self):
        self._nlp, self._matcher = lexicon_matcher()

    def lexicon_matches(self, texts: list[str]) -> list[list[Entity]]:
        from spacy.util import filter_spans

        return [[Entity(span.text, span.start_char, span.end_char)
                 for span in filter_spans([doc[start:end] for _, start, end in self._matcher(doc)])]
                for doc in self._nlp.pipe(texts, batch_size=64)]

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return self.lexicon_matches(texts)
