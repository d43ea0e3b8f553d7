"""A lexicon's spaCy PhraseMatcher, built once per machine and kept in cache/.

Tokenising a lexicon into phrase patterns costs every process that recognizes with it: 1.1 s of CPU for MeSH's 37,662
disease names, 3 s for the 95,000 drug names; reading a built matcher back costs a fraction of that. spaCy can save a
pipeline but not a PhraseMatcher, so the pair (vocabulary, matcher) is pickled. The file's name changes with spaCy's
version, the tokenizer's and the names.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
from pathlib import Path

from fwsapp.entities.recognizers.tokenizer import TOKENIZER_VERSION, english
from fwsapp.paths import CACHE_DIR


def cached_phrase_matcher(lexicon: str, label: str, names: list[str], cache_dir: Path = CACHE_DIR):
    """(a blank English spaCy pipeline with the clinical tokenizer, its case-insensitive PhraseMatcher of `label` over `names`), read from
    cache/lexicons/ when this lexicon's matcher was built before, else built and written there."""
    import spacy
    from spacy.matcher import PhraseMatcher

    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:16]
    path = cache_dir / "lexicons" / f"{lexicon}-matcher-spacy-{spacy.__version__}-words-{TOKENIZER_VERSION}-{digest}.pickle"
    if path.exists():
        try:
            with open(path, "rb") as handle:  # written below, by this function, in the app's own cache
                vocab, matcher = pickle.load(handle)
            return english(vocab), matcher
        except Exception:  # noqa: BLE001 - a damaged or foreign file is built again and replaced
            pass
    nlp = english()
    matcher = PhraseMatcher(nlp.vocab, attr="LOWER")
    matcher.add(label, list(nlp.tokenizer.pipe(names, batch_size=2000)))
    partial = path.with_suffix(f".{os.getpid()}.partial")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(pickle.dumps((nlp.vocab, matcher)))
        partial.replace(path)  # whole or absent, whichever process writes last
    except OSError:  # a cache that cannot be written (read-only, full) costs the next process the build, nothing else
        with contextlib.suppress(OSError):
            partial.unlink()
    return nlp, matcher
