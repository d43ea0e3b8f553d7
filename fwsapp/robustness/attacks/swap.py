"""Word swap (MarkMyWords' `SwapAttack`): each word, with probability p, changes places with the next one; a protected
word stays where it is."""
from __future__ import annotations

from fwsapp.robustness.attacks.base import Attack, Attacked, join, words_of


class Swap(Attack):
    def attack(self, item, rng) -> Attacked:
        words = words_of(item.text, item.protected)
        texts = [word.text for word in words]
        index = 0
        while index < len(words) - 1:
            if not words[index].protected and not words[index + 1].protected and rng.random() < self.params["p"]:
                texts[index], texts[index + 1] = texts[index + 1], texts[index]
                index += 2  # a swapped pair is not swapped again
            else:
                index += 1
        return Attacked(join(texts))
