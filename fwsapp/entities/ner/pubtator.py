"""Gold mentions in PubTator format (BC5CDR's diseases and chemicals, NCBI Disease).

A document is a title line `PMID|t|title`, an abstract line `PMID|a|abstract`, then one tab-separated line
per mention, `PMID start end mention type id`, with character offsets into `title + " " + abstract`. A reader keeps
the mentions of one kind's types; BC5CDR's relation lines (`PMID CID chemical disease`) are skipped.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fwsapp.paths import PROJECT_DIR

# BC5CDR's `Disease`; NCBI Disease's four types, all counted as disease mentions in the usual benchmark.
DISEASE_TYPES = frozenset({"Disease", "SpecificDisease", "DiseaseClass", "Modifier", "CompositeMention"})
CHEMICAL_TYPES = frozenset({"Chemical"})  # BC5CDR's drugs and other chemicals


@dataclass(frozen=True)
class Document:
    pmid: str
    text: str
    mentions: tuple[tuple[int, int], ...]  # sorted character spans of the mentions read
    concepts: tuple[str, ...] = ()  # each mention's concept id (MeSH or OMIM; "-1" where none), in that order

    @property
    def words(self) -> int:
        return len(self.text.split())


class PubTatorError(ValueError):
    """A corpus file is not in PubTator format; the message names the file and line."""


def read_pubtator(path: str | Path, types: frozenset[str] = DISEASE_TYPES) -> list[Document]:
    path = Path(path)
    documents = []
    pmid, title, abstract, mentions = None, None, None, {}

    def finish():
        if pmid is not None:
            if abstract is None:
                raise PubTatorError(f"{path}: document {pmid} has no abstract line")
            spans = tuple(sorted(mentions))
            documents.append(Document(pmid, f"{title} {abstract}", spans, tuple(mentions[span] for span in spans)))

    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        if "|t|" in line[:20]:
            finish()
            pmid, _, title = line.split("|", 2)
            abstract, mentions = None, {}
            continue
        if "|a|" in line[:20]:
            if pmid is None or not line.startswith(f"{pmid}|a|"):
                raise PubTatorError(f"{path}, line {number}: an abstract line that follows no title of its document")
            abstract = line.split("|", 2)[2]
            continue
        fields = line.split("\t")
        if pmid is None or fields[0] != pmid or abstract is None:
            raise PubTatorError(f"{path}, line {number}: a mention line outside its document")
        if len(fields) >= 5 and fields[4] in types:
            start, end = int(fields[1]), int(fields[2])
            text = f"{title} {abstract}"
            if text[start:end].split() != fields[3].split():  # a few NCBI mentions differ in white space
                raise PubTatorError(f"{path}, line {number}: offsets {start}-{end} do not hold '{fields[3]}'")
            while start < end and text[start].isspace():
                start += 1
            while end > start and text[end - 1].isspace():
                end -= 1
            mentions[(start, end)] = fields[5] if len(fields) > 5 else "-1"
    finish()
    return documents


DATA_DIR = PROJECT_DIR / "data" / "ner"
# The splits shipped in data/ner (SOURCE.md there); the test splits are kept out of the project.
CORPORA = {
    "bc5cdr": {"train": "CDR_TrainingSet.PubTator.txt", "dev": "CDR_DevelopmentSet.PubTator.txt"},
    "ncbi": {"train": "NCBItrainset_corpus.txt", "dev": "NCBIdevelopset_corpus.txt"},
}
# The gold mentions each tagged kind is trained and scored on: which corpora annotate it, under which types.
KIND_CORPORA = {
    "disease": (("bc5cdr", "ncbi"), DISEASE_TYPES),
    "chemical": (("bc5cdr",), CHEMICAL_TYPES),
}


def corpus(name: str, split: str, kind: str = "disease") -> list[Document]:
    return read_pubtator(DATA_DIR / CORPORA[name][split], KIND_CORPORA[kind][1])


def kind_corpora(kind: str) -> tuple[str, ...]:
    """The corpora that annotate `kind`."""
    return KIND_CORPORA[kind][0]
