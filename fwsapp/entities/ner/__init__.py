"""Mention recognition trained here, one tagger per kind (diseases, chemicals): gold corpora (pubtator), the tagger,
its training and evaluation, and the abbreviation pass. This module says where each shipped model lives, without
importing torch."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from fwsapp.paths import PROJECT_DIR

MODELS_DIR = PROJECT_DIR / "data" / "models"
MODEL_DIR = MODELS_DIR / "disease-tagger"
# Each tagged kind and the lexicon recognizer whose matches are its tagger's lexicon feature.
TAGGED_KINDS = {"disease": "mesh", "chemical": "drug-lexicon"}
# The kinds whose trained recognizer takes the one-sense-per-discourse vote (discourse.py): measured held out for
# chemicals (docs/benchmarks.md); the disease tagger's recipe is left as it was measured.
ONE_SENSE_PER_DISCOURSE = {"chemical"}
WEIGHTS_FILE = "weights.safetensors"
METADATA_FILE = "metadata.json"


def model_dir(kind: str = "disease") -> Path:
    """Where the shipped tagger of `kind` lives."""
    return MODELS_DIR / f"{kind}-tagger"


@lru_cache(maxsize=4)
def weights_digest(folder: Path = MODEL_DIR) -> str:
    """A short hash of the shipped weights, naming this version of the tagger."""
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        return "(missing)"
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:10]
