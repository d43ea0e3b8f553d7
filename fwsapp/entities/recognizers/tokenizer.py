"""The words a clinical text is read in: spaCy's English tokenizer, with two splits it does not make.

Every spaCy pass over a text reads these words: the lexicon recognizers' phrase matching (and so the trained taggers'
lexicon feature), the abbreviation finder, and the assertions' sentences and NegEx scopes.

- A capital letter's full stop is split off. spaCy keeps "D." one word, as it would an initial ("J. Smith"), so a
  name that ends a sentence with a capital letter was cut or missed: "hepatitis B." was "hepatitis" to MeSH,
  "vitamin D." nothing to the drug lexicon. An initial split off costs nothing here (no name is matched across one);
  where a sentence ends is the assertions' to say. A lower-case letter's stays, as spaCy has it: models write "e. g."
  and "i. e." far more often than a name ending in a lower-case letter.
- A bullet is split off: models write lists with bullets glued to the item before ("analgesics.• In lupus ..."),
  which spaCy keeps as one word, so neither the drug nor the sentence's end was found.
"""
from __future__ import annotations

from fwsapp.entities.recognizers import MAX_CHARACTERS

# Bumped with any change to the words, so phrase matchers built with older words are built again (1: spaCy's own).
TOKENIZER_VERSION = 2
BULLETS = "•◦▪‣●"
_BULLET = f"[{BULLETS}]"
# A word of one capital letter before its full stop (spaCy's suffixes split a full stop after two capitals only).
_CAPITAL_LETTER = r"(?<=^[A-Z])\."


def english(vocab=None):
    """A blank English spaCy pipeline (on `vocab` where given) whose tokenizer splits off a capital letter's full
    stop and bullets; it reads texts of up to MAX_CHARACTERS."""
    import spacy
    from spacy.util import compile_infix_regex, compile_prefix_regex, compile_suffix_regex

    nlp = spacy.blank("en", vocab=vocab) if vocab is not None else spacy.blank("en")
    nlp.max_length = MAX_CHARACTERS
    tokenizer, defaults = nlp.tokenizer, nlp.Defaults
    tokenizer.prefix_search = compile_prefix_regex([*defaults.prefixes, _BULLET]).search
    tokenizer.suffix_search = compile_suffix_regex([*defaults.suffixes, _BULLET, _CAPITAL_LETTER]).search
    tokenizer.infix_finditer = compile_infix_regex([*defaults.infixes, _BULLET]).finditer
    return nlp
