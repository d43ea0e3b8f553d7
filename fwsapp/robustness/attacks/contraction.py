"""Contraction (HELM's `ContractionPerturbation`): every phrase that has a common contraction is contracted
("do not" → "don't"), the first letter's case kept; protected mentions are left alone."""
from __future__ import annotations

import re

from fwsapp.robustness.attacks.base import Attack, Attacked, edit_outside

CONTRACTIONS = {
    "are not": "aren't", "cannot": "can't", "can not": "can't", "could not": "couldn't", "did not": "didn't",
    "does not": "doesn't", "do not": "don't", "had not": "hadn't", "has not": "hasn't", "have not": "haven't",
    "he is": "he's", "how is": "how's", "i am": "I'm", "i have": "I've", "i will": "I'll", "is not": "isn't",
    "it is": "it's", "it will": "it'll", "let us": "let's", "must not": "mustn't", "she is": "she's",
    "should not": "shouldn't", "that is": "that's", "there is": "there's", "they are": "they're",
    "they have": "they've", "they will": "they'll", "was not": "wasn't", "we are": "we're", "we have": "we've",
    "we will": "we'll", "were not": "weren't", "what is": "what's", "who is": "who's", "will not": "won't",
    "would not": "wouldn't", "you are": "you're", "you have": "you've", "you will": "you'll",
}
PHRASE = re.compile(r"\b(" + "|".join(sorted(map(re.escape, CONTRACTIONS), key=len, reverse=True)) + r")\b",
                    re.IGNORECASE)


def _contract(match: re.Match) -> str:
    short = CONTRACTIONS[match[0].lower()]
    return short[0].upper() + short[1:] if match[0][0].isupper() else short


class Contraction(Attack):
    def attack(self, item, rng) -> Attacked:
        return Attacked(edit_outside(item.text, item.protected, lambda stretch: PHRASE.sub(_contract, stretch)))
