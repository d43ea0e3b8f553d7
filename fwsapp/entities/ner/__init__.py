"""Disease-mention recognition trained here: gold corpora (pubtator), the tagger, its training and evaluation,
and the abbreviation pass. This module says where the shipped model lives, without importing torch."""
from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from fwsapp.paths import PROJECT_DIR

MODEL_DIR = PROJECT_DIR / "data" / "models" / "disease-tagger"
WEIGHTS_FILE = "weights.safetensors"
METADATA_FILE = "metadata.json"


@lru_cache(maxsize=4)
def weights_digest(folder: Path = MODEL_DIR) -> str:
    """A short hash of the shipped weights, naming this version of the tagger."""
    weights = folder / WEIGHTS_FILE
    if not weights.is_file():
        return "(missing)"
    return hashlib.sha256(weights.read_bytes()).hexdigest()[:10]
