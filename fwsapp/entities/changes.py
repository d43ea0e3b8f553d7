"""What changed in the clinical facts between a text and the text it is held against: an attacked text and its clean
text, a watermarked answer and its unwatermarked twin, an answer and its reference.

A change has a kind, a span of the text, what it was and what it is now:
- a fact's kind's change (`drug`, `disease`, `dose`): a fact replaced by another concept, added, or removed;
- `negation`: a fact both texts state, whose assertion differs (was and now are the assertions);
- `corruption`: a word that is close to a medical name by edit distance and is neither a word nor a name itself
  ("metfromin"), where the other text does not have it.

Two texts are compared by position where one is an edit of the other (their words align: an attack's output, a
paraphrase that keeps most words), and by concept where they were written independently (two answers to one prompt):
then a change is a fact of the text the other does not state, or states with the other assertion. Either way,
rewording that changes no fact (a synonym of an ordinary word, punctuation, clauses in another order) is no change:
facts are compared by concept, so "paracetamol" for "Tylenol" is no drug change.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from functools import lru_cache

from fwsapp.entities.facts import Fact

# Similarity of two texts' content words (rapidfuzz's normalised Indel similarity, in order) from which one is taken for
# an edit of the other and they are compared by position. Function words are left out: two short answers to one
# question share half their words by grammar alone.
ALIGNED_SIMILARITY = 0.5
BY_POSITION, BY_CONCEPT = "position", "concept"
WORD = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")
CORRUPTION_MIN_LETTERS = 5


@dataclass(frozen=True)
class Change:
    kind: str  # a fact kind's change name, "negation" or "corruption"
    start: int  # character offsets into the text (start == end: where a removed fact would have been)
    end: int
    was: str
    now: str

    def as_json(self) -> dict:
        return asdict(self)


def _words(text: str) -> list[tuple[int, int, str]]:
    return [(match.start(), match.end(), match.group().lower()) for match in WORD.finditer(text)]


def _word_range(words: list[tuple[int, int, str]], start: int, end: int) -> tuple[int, int]:
    """The indices [first, last) of the words a character span overlaps."""
    inside = [index for index, (word_start, word_end, _) in enumerate(words) if word_start < end and word_end > start]
    return (inside[0], inside[-1] + 1) if inside else (0, 0)


def _content(words: list) -> list[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return [word for *_, word in words if word.isalnum() and word not in STOP_WORDS]


def _aligned(words: list, against_words: list, in_order: bool = True) -> bool:
    """Whether one run of words reads as an edit of the other: their content words mostly align, in order or, for one
    statement said twice, in any order ("X is not advised with Y" and "with Y, X is advised")."""
    from rapidfuzz.distance import Indel

    arrange = (lambda found: found) if in_order else sorted
    return Indel.normalized_similarity(arrange(_content(words)), arrange(_content(against_words))) >= ALIGNED_SIMILARITY


def comparison(words: list, against_words: list) -> str:
    """BY_POSITION where one text reads as an edit of the other, else BY_CONCEPT."""
    return BY_POSITION if _aligned(words, against_words) else BY_CONCEPT


def changes(text: str, facts: list[Fact], against: str, against_facts: list[Fact], by: str | None = None) -> list[Change]:
    """The clinical changes of `text` against `against`, ordered by position in `text`: compared `by` position (one
    text is an edit of the other) or by concept (written independently); left out, `comparison` decides."""
    from fwsapp.entities.recognizers import KINDS

    words, against_words = _words(text), _words(against)
    if (by or comparison(words, against_words)) == BY_POSITION:
        found = _by_position(text, facts, against_facts, words, against_words)
    else:
        found = _by_concept(text, facts, against, against_facts, words, against_words)
    corrupted = corruptions(text, words, {word for *_, word in against_words})
    # A corrupted word the recognizer took for another (or no) concept is one change, the corruption.
    found = [change for change in found if change.kind == "negation" or not any(
        change.start < other.end and other.start < change.end for other in corrupted)]
    order = {kind.change: index for index, kind in enumerate(KINDS.values())}
    return sorted(found + corrupted, key=lambda change: (change.start, change.end, order.get(change.kind, 99)))


def _change(fact: Fact, start: int, end: int, was: str, now: str) -> Change:
    from fwsapp.entities.recognizers import KINDS

    return Change(KINDS[fact.kind].change, start, end, was, now)


def _compared(fact: Fact, other: Fact) -> list[Change]:
    """The change between a fact and the fact it stands where the other text had: another concept, or the same one
    asserted otherwise."""
    if fact.value != other.value:
        return [_change(fact, fact.start, fact.end, other.text, fact.text)]
    if fact.assertion != other.assertion:
        return [Change("negation", fact.start, fact.end, other.assertion, fact.assertion)]
    return []


def _by_position(text: str, facts: list[Fact], against_facts: list[Fact], words: list, against_words: list) -> list[Change]:
    from rapidfuzz.distance import Levenshtein

    operations = Levenshtein.opcodes([w for *_, w in against_words], [w for *_, w in words])

    def projected(first: int, last: int) -> tuple[int, int]:
        """The words of `text` that stand where the other text's words [first, last) stood."""
        targets = []
        for operation in operations:
            low, high = max(first, operation.src_start), min(last, operation.src_end)
            if operation.tag == "equal" and low < high:
                shift = operation.dest_start - operation.src_start
                targets.append((low + shift, high + shift))
            elif operation.tag in ("replace", "delete", "insert") and (
                    low < high or (operation.src_start == operation.src_end == first)):
                targets.append((operation.dest_start, operation.dest_end))
        return (min(t[0] for t in targets), max(t[1] for t in targets)) if targets else (0, 0)

    ranges = [_word_range(words, fact.start, fact.end) for fact in facts]
    paired: dict[int, int] = {}
    removed = []
    for other_index, other in enumerate(against_facts):
        low, high = projected(*_word_range(against_words, other.start, other.end))
        match = next((index for index, fact in enumerate(facts) if index not in paired.values()
                      and fact.kind == other.kind and ranges[index][0] < high and low < ranges[index][1]), None)
        if match is None:
            removed.append((other, low, high))
        else:
            paired[other_index] = match
    found = [change for other_index, index in paired.items()
             for change in _compared(facts[index], against_facts[other_index])]
    added = [index for index in range(len(facts)) if index not in paired.values()]
    # Facts that moved (clauses in another order) are paired by concept before they count as added or removed.
    for index in list(added):
        fact = facts[index]
        moved = next((entry for entry in removed if entry[0].kind == fact.kind and entry[0].value == fact.value), None)
        if moved is not None:
            removed.remove(moved)
            added.remove(index)
            found += _compared(fact, moved[0])
    found += [_change(facts[index], facts[index].start, facts[index].end, "", facts[index].text) for index in added]
    for other, low, high in removed:
        start = words[low][0] if low < len(words) else len(text)
        end = words[high - 1][1] if high > low else start
        found.append(_change(other, start, end, other.text, ""))
    return found


def _by_concept(text: str, facts: list[Fact], against: str, against_facts: list[Fact], words: list,
                against_words: list) -> list[Change]:
    """A fact is added where the other text does not state its concept. Its assertion flipped only where the other
    text makes the same statement otherwise: a sentence of each that reads as an edit of the other states the concept,
    and no such sentence with the fact's assertion. Two independent texts mention a condition in unrelated sentences
    ("no cure for X" in one, "X is common" in the other); compared over whole texts, none of 40 flips read in the
    paper's answers against their references was one claim asserted otherwise. The sentences are compared without the
    fact's own words, which would make any two short sentences that name it alike."""
    sentence, other_sentence = _sentence_of(text, words), _sentence_of(against, against_words)
    found = []
    for fact in facts:
        same = [other for other in against_facts if other.kind == fact.kind and other.value == fact.value]
        if not same:
            found.append(_change(fact, fact.start, fact.end, "", fact.text))
            continue
        stated = [other for other in same if _aligned(sentence(fact), other_sentence(other), in_order=False)]
        if stated and all(other.assertion != fact.assertion for other in stated):
            found.append(Change("negation", fact.start, fact.end, stated[0].assertion, fact.assertion))
    return found


def _sentence_of(text: str, words: list):
    """A function from a fact of `text` to the other words of its sentence (the sentences assertions are scoped by)."""
    from bisect import bisect_left

    from fwsapp.entities.assertion import sentence_starts

    starts = sentence_starts(text)
    word_starts = [start for start, *_ in words]

    def sentence(fact: Fact) -> list:
        index = bisect_left(starts, fact.start + 1) - 1
        low = bisect_left(word_starts, starts[index]) if index >= 0 else 0
        high = bisect_left(word_starts, starts[index + 1]) if index + 1 < len(starts) else len(words)
        return [word for word in words[low:high] if not fact.start <= word[0] < fact.end]

    return sentence


@lru_cache(maxsize=1)
def medical_vocabulary() -> tuple[str, ...]:
    """The single words of the drug and disease lexicons' names, of CORRUPTION_MIN_LETTERS letters or more."""
    from fwsapp.entities.recognizers.base import mesh_disease_names
    from fwsapp.entities.recognizers.drugs import drug_variants

    names = [*drug_variants(), *mesh_disease_names()]
    return tuple(sorted({word for name in names for word in name.lower().split()
                         if word.isalpha() and len(word) >= CORRUPTION_MIN_LETTERS}))


# Word-forming prefixes and suffixes: a known word with one of them ("intraoperatively", "microbiome") is a word too,
# though no dictionary here lists it.
PREFIXES = ("micro", "macro", "intra", "extra", "inter", "hyper", "hypo", "anti", "non", "pre", "post", "re", "peri",
            "sub", "trans", "poly", "multi", "pseudo", "neo", "auto", "co", "de", "dis", "over", "under", "un")
SUFFIXES = ("ly", "ally", "s", "es", "ing", "ed", "al", "ic")
# British spellings that US dictionaries write otherwise (haemorrhage, oedema, anaesthesia, dimerisation).
BRITISH_TO_US = (("ae", "e"), ("oe", "e"), ("isation", "ization"), ("ise", "ize"), ("our", "or"), ("tre", "ter"))


@lru_cache(maxsize=1)
def _plain_words() -> frozenset[str]:
    """Words no dictionary here has but no misspelling either: English function words (spaCy's stop words, which
    WordNet leaves out) and the encoder's whole-word vocabulary."""
    from spacy.lang.en.stop_words import STOP_WORDS

    from fwsapp.models import encoder_folder

    vocabulary = (encoder_folder() / "vocab.txt").read_text(encoding="utf-8").split()
    return frozenset(STOP_WORDS) | {word for word in vocabulary if word.isalpha()}


@lru_cache(maxsize=65536)
def is_known(word: str) -> bool:
    """Whether a lower-case word is a word or a medical name, as written or through its British spelling, a plural
    or a word-forming prefix or suffix."""
    from fwsapp.data.wordnet import is_word

    def known(form: str) -> bool:
        return form in _plain_words() or form in medical_vocabulary_set() or is_word(form)

    forms = {word} | {word.replace(british, us) for british, us in BRITISH_TO_US if british in word}
    forms |= {form[len(prefix):] for form in set(forms) for prefix in PREFIXES
              if form.startswith(prefix) and len(form) - len(prefix) >= 4}
    forms |= {form[:-len(suffix)] for form in set(forms) for suffix in SUFFIXES
              if form.endswith(suffix) and len(form) - len(suffix) >= 4}
    return any(known(form) for form in forms)


@lru_cache(maxsize=1)
def medical_vocabulary_set() -> frozenset[str]:
    return frozenset(medical_vocabulary())


def _tolerated_edits(word: str) -> int:
    """Edits (optimal string alignment: a swap of two letters is one) a corruption may be from its name."""
    return 1 if len(word) < 8 else 2


def corruptions(text: str, words: list[tuple[int, int, str]] | None = None,
                against_words: set[str] | frozenset[str] = frozenset()) -> list[Change]:
    """Words of `text` that are a medical name misspelt or mangled: within a few edits of a lexicon word, and not known
    themselves (`is_known`: a lexicon word, an English word of WordNet or of the encoder's vocabulary, a function
    word), nor in `against_words` (a word both texts have is no change between them). `was` is the medical name of
    `against_words` the word is an edit of, where there is one (what the other text said: "amoxicilin" against
    "amoxicillin" was "amoxicillin", not the lexicon's "amoxicilina", as near and first alphabetically), else the nearest
    lexicon word. A name split by a space ("anticoagu lants", `split_name`) is one corruption of both words."""
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    words = words if words is not None else _words(text)
    found, names_against, joined_to = [], None, -1
    for index, (start, end, word) in enumerate(words):
        if index == joined_to:
            continue
        if (name := split_name(text, words, index, against_words)) is not None:
            joined_to = index + 1
            found.append(Change("corruption", start, words[joined_to][1], name, text[start:words[joined_to][1]]))
            continue
        if len(word) < CORRUPTION_MIN_LETTERS or not word.isalpha() or word in against_words or is_known(word):
            continue
        nearest = nearest_medical_word(word)
        if nearest is None:
            continue
        if names_against is None:
            names_against = sorted(against_words & medical_vocabulary_set())
        said = process.extractOne(word, names_against, scorer=OSA.distance, score_cutoff=_tolerated_edits(word))
        found.append(Change("corruption", start, end, said[0] if said is not None else nearest, text[start:end]))
    return found


def split_name(text: str, words: list[tuple[int, int, str]], index: int,
               against_words: set[str] | frozenset[str] = frozenset()) -> str | None:
    """The medical name that words `index` and `index + 1` make joined, where a single space splits it and either part
    is no word (`is_known`), else None. Watermarked text splits names so ("steno sis", "anticoag ulants"), and read one
    word at a time their parts were other names' misspellings: "ulants" was "plants", "lants" was "Lantus". Two words
    ("a cute rash", "in fusion") are not a split; nor is one the other text splits alike."""
    if index + 1 >= len(words):
        return None
    (_, end, first), (start, _, second) = words[index], words[index + 1]
    name = first + second
    if text[end:start] != " " or not name.isalpha() or len(name) < CORRUPTION_MIN_LETTERS:
        return None
    if name not in medical_vocabulary_set() or {first, second} <= against_words:
        return None
    return name if not (is_known(first) and is_known(second)) else None


@lru_cache(maxsize=1)
def _letter_pair_index():
    """Each medical vocabulary word's length, and for each pair of adjacent letters the (ascending) indices of the
    words that hold it."""
    import numpy as np

    vocabulary = medical_vocabulary()
    holders: dict[str, list[int]] = {}
    for index, word in enumerate(vocabulary):
        for pair in _letter_pairs(word):
            holders.setdefault(pair, []).append(index)
    lengths = np.fromiter(map(len, vocabulary), dtype=np.int32, count=len(vocabulary))
    return lengths, {pair: np.array(indices, dtype=np.int32) for pair, indices in holders.items()}


def _letter_pairs(word: str) -> set[str]:
    return {word[index:index + 2] for index in range(len(word) - 1)}


def nearest_medical_word(word: str) -> str | None:
    """The medical vocabulary's word nearest `word` within its tolerated edits (optimal string alignment distance; the
    first alphabetically among equals), or None.

    rapidfuzz measures the distance but keeps no index, and a scan of the whole vocabulary (51,600 words) costs 10-15 ms
    a word, most of `facts`' time outside the taggers. So only the words that can be within k edits are measured:
    those whose length is within k of the word's, and that share at least d - 3k of its d distinct letter pairs (an
    edit removes at most three pairs, a transposition). The answer is the full scan's; the candidates keep the
    vocabulary's order, so ties go the same way. symspellpy's index of deletions looks up faster, but takes 3.4 s and
    110 MB to build for this vocabulary, against 0.5 s and a few MB for this one."""
    import numpy as np
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    vocabulary, (lengths, holders) = medical_vocabulary(), _letter_pair_index()
    edits = _tolerated_edits(word)
    possible = np.abs(lengths - len(word)) <= edits
    pairs = _letter_pairs(word)
    if len(pairs) > 3 * edits:
        shared = [holders[pair] for pair in pairs if pair in holders]
        counts = np.bincount(np.concatenate(shared), minlength=len(vocabulary)) if shared else 0
        possible &= counts >= len(pairs) - 3 * edits
    candidates = [vocabulary[index] for index in np.flatnonzero(possible)]
    nearest = process.extractOne(word, candidates, scorer=OSA.distance, score_cutoff=edits)
    return nearest[0] if nearest is not None else None


def facts_jsonl(source, target, finder=None, progress=None, force: bool = False, warn=None) -> int:
    """`python -m fwsapp facts`: one `{"facts": [...], "changes": [...]}` line per input line `{"text": T}` or
    `{"text": T, "against": A}`, in input order, spans as character offsets into T (no changes without `against`
    but T's corrupted terms). The whole input and the output path are checked before any work, and nothing is
    written partially."""
    from fwsapp.entities.facts import FactFinder
    from fwsapp.entities.recognizers.base import checked_paths, chunks, read_records_jsonl, write_jsonl

    source, target = checked_paths(source, target, force)
    records = read_records_jsonl(source, ("text",), ("against",), warn)
    finder = finder or FactFinder()
    if progress:
        progress(0, len(records))

    def lines():
        texts = [record["text"] for record in records]
        for start, end in chunks(texts):
            chunk = records[start:end]
            againsts = [(index, record["against"]) for index, record in enumerate(chunk) if "against" in record]
            found = finder.find_many([record["text"] for record in chunk] + [against for _, against in againsts])
            against_facts = dict(zip((index for index, _ in againsts), found[len(chunk):]))
            for index, record in enumerate(chunk):
                text, facts = record["text"], found[index]
                if index in against_facts:
                    changed = changes(text, facts, record["against"], against_facts[index])
                else:
                    changed = corruptions(text)
                yield {"facts": [fact.as_json() for fact in facts], "changes": [change.as_json() for change in changed]}
            if progress:
                progress(end, len(records))

    write_jsonl(target, lines(), force)
    return len(records)


def counted(found: list[Change], kind: str, unsupported_only: bool = False) -> int:
    """How many changes of `kind` there are; with `unsupported_only`, only facts the other text does not state."""
    return sum(change.kind == kind and (not unsupported_only or change.was == "") for change in found)


def word_count(text: str) -> int:
    """Words of a text, as the per-1,000-words measures count them (punctuation is no word)."""
    return sum(1 for _, _, word in _words(text) if word[0].isalnum() or word[0] == "_")
