"""What every attack shares: its input (a sample's texts and the disease mentions to keep), its output, and the words
of a text with their places, so an edit can leave protected spans alone.

An attack draws from a generator seeded by (seed, sample index), so a sample's attacked text is the same whichever
batch it is in, and a resumed attack gives what an uninterrupted one would.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Span:
    start: int
    end: int


@dataclass(frozen=True)
class AttackInput:
    sample_idx: int
    text: str  # the watermarked text
    unwatermarked: str | None = None
    reference: str | None = None
    protected: tuple[Span, ...] = ()  # disease mentions kept verbatim (keep_entities)
    mentions: tuple[Span, ...] = ()  # every disease mention the recognizer found (entity-swap)
    prompt: str | None = None  # what the answer answers (a forgery writes its own answer to it)


@dataclass(frozen=True)
class Attacked:
    text: str
    # Character spans of the attacked text that came from the watermarked one (copy-paste), or were inserted
    # (entity-swap's names).
    spans: tuple[Span, ...] = ()
    note: str = ""


@dataclass(frozen=True)
class Word:
    text: str
    start: int
    end: int
    protected: bool = False


def words_of(text: str, protected: tuple[Span, ...] = ()) -> list[Word]:
    """The whitespace-separated words of `text`, each marked protected where it overlaps a protected span."""
    return [Word(match[0], match.start(), match.end(),
                 any(span.start < match.end() and match.start() < span.end for span in protected))
            for match in WORD.finditer(text)]


def shortfall(found: int, asked: int, singular: str, plural: str) -> str:
    """The note of an attack that had fewer than the `asked` things to change in a text ("" when it had them all), said
    so that the sample's line reads as what the attack did."""
    from fwsapp import counted

    if found >= asked:
        return ""
    if not found:
        return f"nothing changed: no {singular} in the text"
    return f"changed {counted(found, singular, plural)}, of the {asked} asked for: no more in the text"


def join(words: list[str]) -> str:
    return " ".join(word for word in words if word)


def sample_rng(seed: int, sample_idx: int) -> np.random.Generator:
    return np.random.default_rng([seed, sample_idx])


@dataclass
class Attack:
    """One attack with its checked parameters; `attack_many` edits each sample's watermarked text."""

    params: dict
    seed: int = 0
    resources: dict = field(default_factory=dict)

    def attack_many(self, inputs: list[AttackInput]) -> list[Attacked]:
        return [self.attack(item, sample_rng(self.seed, item.sample_idx)) for item in inputs]

    def attack(self, item: AttackInput, rng: np.random.Generator) -> Attacked:
        raise NotImplementedError


class Forgery(Attack):
    """An attack that writes answers of its own to the prompts it did not observe (its entry's `observes`), from what it
    learned of the run's watermarked answers; `attack_many` gets those prompts' samples."""

    @classmethod
    def answers(cls, params: dict) -> int:
        """How many answers it writes."""
        raise NotImplementedError

    @classmethod
    def prepare(cls, run: dict, params: dict, observed, model_loader) -> tuple[dict, str | None]:
        """(its resources: what it learned from `observed`, the run's samples it observes, and the model it writes with;
        that model's name, part of the attack set's identity)."""
        raise NotImplementedError


class WordAttack(Attack):
    """An attack that picks words among the editable ones (not protected) and edits each picked word."""

    def pick(self, words: list[Word], rng: np.random.Generator) -> set[int]:
        """MarkLLM's choice: int(ratio × words) of the editable words, drawn without replacement."""
        editable = [index for index, word in enumerate(words) if not word.protected and self.editable(word)]
        count = min(int(self.params["ratio"] * len(words)), len(editable))
        return set(rng.choice(editable, size=count, replace=False).tolist()) if count else set()

    def editable(self, word: Word) -> bool:
        return True

    def attack(self, item: AttackInput, rng: np.random.Generator) -> Attacked:
        words = words_of(item.text, item.protected)
        picked = self.pick(words, rng)
        return Attacked(join([self.edit(word.text, rng) if index in picked else word.text
                              for index, word in enumerate(words)]))

    def edit(self, word: str, rng: np.random.Generator) -> str:
        raise NotImplementedError


def edit_outside(text: str, protected: tuple[Span, ...], edit) -> str:
    """`edit` applied to each stretch of `text` between protected spans; the spans kept byte for byte."""
    pieces, position = [], 0
    for span in sorted(protected, key=lambda span: span.start):
        if span.start < position:
            continue
        pieces += [edit(text[position:span.start]), text[span.start:span.end]]
        position = span.end
    return "".join(pieces + [edit(text[position:])])


def spliced(text: str, replacements: list[tuple[Span, str]]) -> tuple[str, tuple[Span, ...]]:
    """`text` with each span (in order, not overlapping) replaced by its new text, and where the new texts now are."""
    pieces, spans, position, length = [], [], 0, 0
    for span, new in replacements:
        before = text[position:span.start]
        pieces += [before, new]
        length += len(before)
        spans.append(Span(length, length + len(new)))
        length += len(new)
        position = span.end
    pieces.append(text[position:])
    return "".join(pieces), tuple(spans)
