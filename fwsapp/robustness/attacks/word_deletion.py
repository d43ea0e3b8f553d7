"""Word deletion (MarkLLM's `WordDeletion`): int(ratio × words) words, drawn at random, are removed."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import WordAttack


class WordDeletion(WordAttack):
    def edit(self, word, rng) -> str:
        return ""
