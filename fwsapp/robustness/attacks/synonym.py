"""Synonym substitution (MarkLLM's `SynonymSubstitution`): of the words WordNet knows, int(ratio × words) drawn at
random are each replaced by one of their synonyms, drawn at random (never the word itself)."""
from __future__ import annotations

from fwsapp.data import wordnet
from fwsapp.robustness.attacks.base import Word, WordAttack


class SynonymSubstitution(WordAttack):
    def editable(self, word: Word) -> bool:
        return bool(wordnet.synonyms(word.text))

    def edit(self, word, rng) -> str:
        choices = wordnet.synonyms(word)
        return choices[int(rng.integers(len(choices)))]
