"""EntityKGW: KGW that never biases a token that would start or continue a medical entity.

The paper's open problem: watermarks reweight low-entropy tokens, and disease names, drugs and dosages
live there, so factuality falls faster than coherence. SWEET gates on entropy, which needs the model at
detection. EntityKGW gates on the text itself, through a token trie of a medical lexicon (MeSH disease
names with British spellings, from the entity module; with `lexicon=mesh+drugs` also the drug names of
the `drug-named-entity-recognition` package (DrugBank, NHS, MeSH, MedlinePlus); or a file of names):

- while the generated text ends inside a lexicon entry (its last tokens are a proper prefix of some
  name's tokens), the logits are left alone, so the model completes the name as it would unwatermarked;
- at every other step, KGW's δ goes to green tokens that do not start an entry; entity-starting tokens
  keep their logit (no penalty relative to green: the model may still start a name when it wants to).

Detection recomputes the same state from the text alone and scores only the tokens the generator could
have biased: z = (green − γ·N) / sqrt(N·γ·(1 − γ)) over those N. Entry tokens are flagged -1 (not scored).
With `entropy_threshold` > 0 it also skips low-entropy steps as SWEET does, and then needs the model.
Names are matched as they follow a space (" asthma", " Asthma"); a name at the very start of a text is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.paths import read_input
from fwsapp.watermark import methods
from fwsapp.models.teacher_forcing import token_entropy
from fwsapp.watermark.kgw import KGW, KGWLogitsProcessor


@dataclass(frozen=True)
class EntityTrie:
    """A lexicon's names as token sequences: the proper prefixes of each, and the tokens that start one."""

    prefixes: frozenset[tuple[int, ...]]
    starts: np.ndarray  # bool over the vocabulary
    longest: int  # tokens in the longest name

    def inside(self, tokens: Sequence[int]) -> bool:
        """Whether `tokens` end inside an entry: some suffix of them is a proper prefix of a name."""
        tail = tuple(tokens[-(self.longest - 1):]) if self.longest > 1 else ()
        return any(tail[start:] in self.prefixes for start in range(len(tail)))

    def spared(self, tokens: Sequence[int]) -> list[bool]:
        """Per token: True where the generator left it alone (inside an entry, or starting one)."""
        return [self.inside(tokens[:position]) or bool(self.starts[token]) if token < len(self.starts) else True
                for position, token in enumerate(tokens)]


def lexicon_names(lexicon: str) -> list[str]:
    """The names of a lexicon: 'mesh' (MeSH diseases), 'mesh+drugs', or a UTF-8 file with one name per line."""
    from fwsapp.entities.recognizers.base import mesh_disease_names

    if lexicon == "mesh":
        return mesh_disease_names()
    if lexicon == "mesh+drugs":
        return sorted(set(mesh_disease_names()) | set(drug_names()))
    try:
        text = read_input(lexicon).decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ValueError(f"lexicon {lexicon}: not UTF-8 text ({error.reason}); save it as UTF-8, one name per line.") \
            from None
    names = [line.strip() for line in text.splitlines() if line.strip()]
    if not names:
        raise ValueError(f"lexicon {lexicon}: the file holds no names (one per line).")
    return names


def drug_names() -> list[str]:
    """Drug names and brand names of the drug-named-entity-recognition package (the package's IDs are not used)."""
    from fwsapp.entities.recognizers.drugs import drug_dictionary

    return [name for name in drug_dictionary() if len(name) > 2 and ", " not in name]


def build_trie(names: Sequence[str], encode_many: Callable[[list[str]], list[list[int]]], vocab_size: int) -> EntityTrie:
    """Token sequences of every name as it follows a space, in lower case and capitalised.

    A name starts with a distinctive token only when its first word is one whole token of three letters or
    more and not a function word (spaCy's English stop words): " diabetes" starts names, but " and" (the
    first piece of " andersen") and " t" (of "T-cell ...") do not, or every " and" would be spared. A name whose first
    word is split is spared from its second token on.
    """
    from spacy.lang.en.stop_words import STOP_WORDS

    variants = sorted({f" {form}" for name in names for form in (name.lower(), name[:1].upper() + name[1:].lower())})
    first_words = [variant.split()[0] for variant in variants]
    whole = {word: ids for word, ids in zip(set(first_words), encode_many([f" {w}" for w in set(first_words)]))}
    starts = np.zeros(vocab_size, dtype=bool)
    prefixes, longest = set(), 1
    for ids, word in zip(encode_many(variants), first_words):
        if not ids:
            continue
        longest = max(longest, len(ids))
        distinctive = whole[word] == ids[:1] and len(word) > 2 and word.lower() not in STOP_WORDS
        if distinctive and ids[0] < vocab_size:
            starts[ids[0]] = True
        prefixes.update(tuple(ids[:end]) for end in range(1 if distinctive else 2, len(ids)))
    return EntityTrie(frozenset(prefixes), starts, longest)


_TRIES: dict[tuple[str, str, int], EntityTrie] = {}


def cached_trie(lexicon: str, tokenizer_key: str, encode_many, vocab_size: int) -> EntityTrie:
    """One trie per lexicon and tokenizer per process (tokenising ~100k variants takes a few seconds).
    A lexicon file is keyed by its content's modification time too, so an edited file is read again."""
    stamp = "" if lexicon in ("mesh", "mesh+drugs") else str(Path(lexicon).stat().st_mtime_ns)
    key = (f"{lexicon}@{stamp}", tokenizer_key, vocab_size)
    if key not in _TRIES:
        _TRIES[key] = build_trie(lexicon_names(lexicon), encode_many, vocab_size)
    return _TRIES[key]


class EntityKGWLogitsProcessor(KGWLogitsProcessor):
    """KGW's bias, withheld inside entries and from entry-starting tokens; batched over rows."""

    def __init__(self, green_lists, delta: float, trie: EntityTrie, entropy_threshold: float):
        super().__init__(green_lists, delta)
        self.trie = trie
        self.entropy_threshold = entropy_threshold
        self.prompt_length: int | None = None
        self.blocked = torch.from_numpy(trie.starts)
        # Per step, per row: whether δ went to the row (the generator's record; detection recomputes it).
        self.biased_steps: list[list[bool]] = []

    def model_allows(self, scores: torch.FloatTensor) -> torch.Tensor:
        """Per row, whether the next-token distribution lets δ go to the row (the entropy gate, where set)."""
        if self.entropy_threshold > 0:
            return (token_entropy(scores) > self.entropy_threshold).cpu()
        return torch.ones(scores.shape[0], dtype=torch.bool)

    def green_mask(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        if self.prompt_length is None:  # the first call sees the (left-padded) prompts alone
            self.prompt_length = input_ids.shape[1]
        generated = input_ids[:, self.prompt_length:].tolist()
        biased = (~torch.tensor([self.trie.inside(row) for row in generated]) & self.model_allows(scores)).unsqueeze(-1)
        self.biased_steps.append(biased.squeeze(-1).tolist())
        mask = self.green_lists.batch_mask(input_ids)
        width = min(mask.shape[-1], len(self.blocked))
        mask[:, :width] &= ~self.blocked[:width]
        return mask & biased


class EntityKGW(KGW, info=methods.ENTITY_KGW):
    def __init__(self, vocab_size: int, lm=None, tokenizer=None, **params):
        """`tokenizer` (a tokenizers.TextTokenizer) finds the lexicon's names in token ids (`factory.create` gives the
        model's own where none is named)."""
        super().__init__(vocab_size, lm=lm, **params)
        if self.params["entropy_threshold"] > 0 and lm is None:
            raise ValueError("EntityKGW with entropy_threshold > 0 needs the model to detect: load one first.")
        if tokenizer is None:
            raise ValueError(f"{self.name} needs the tokenizer to find the lexicon's names in token ids.")
        self.trie = cached_trie(self.params["lexicon"], tokenizer.name, tokenizer.encode_many, vocab_size)

    def logits_processor(self) -> LogitsProcessor:
        return EntityKGWLogitsProcessor(self.green_lists, self.params["delta"], self.trie,
                                        self.params["entropy_threshold"])

    def model_statistics(self) -> list:
        """The teacher-forced statistics the detector's model gates read (`fwsapp.models.teacher_forcing`); none
        without a gate, so detection is then the text's alone."""
        return ["entropy"] if self.params["entropy_threshold"] > 0 else []

    def model_spares(self, stats) -> np.ndarray:
        """Per token, whether the distribution it was drawn from kept δ away (the entropy gate's rule; none when off)."""
        if self.params["entropy_threshold"] <= 0:
            return np.zeros(len(stats), dtype=bool)
        return ~(stats["entropy"] > self.params["entropy_threshold"])

    def text_spares(self, token_ids: list[int]) -> list[bool]:
        """The tokens inside a lexicon name, or that start one: the processor left them alone."""
        return self.trie.spared(token_ids)
