"""Word deletion, as MarkLLM defines it or exactly: `draw=exact` (the default) removes int(ratio × words) words drawn at
random without replacement, so every text loses the same share; `draw=markllm` removes each word with probability
ratio, as MarkLLM 0.1.5's `WordDeletion` does, so the share varies from text to text around ratio."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import WordAttack


class WordDeletion(WordAttack):
    def pick(self, words, rng) -> set[int]:
        if self.params["draw"] == "exact":
            return super().pick(words, rng)
        return {index for index, word in enumerate(words) if not word.protected and rng.random() < self.params["ratio"]}

    def edit(self, word, rng) -> str:
        return ""
