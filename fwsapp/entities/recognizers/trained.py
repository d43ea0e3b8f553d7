"""The `trained` and `chemical-tagger` recognizers: the project's own taggers (fwsapp/entities/ner), all-MiniLM-L6-v2
fine-tuned on gold corpora (diseases: BC5CDR and NCBI Disease; chemicals: BC5CDR), with an abbreviation pass."""
from __future__ import annotations

from pathlib import Path

from fwsapp.entities.ner import model_dir
from fwsapp.entities.recognizers.base import Entity, Recognizer
from fwsapp.entities.recognizers import trained_label


class TrainedRecognizer(Recognizer):
    """A trained tagger's mentions, made consistent with the abbreviations each text defines."""

    folder: Path | None = None  # the shipped model of the subclass's kind, unless one is named

    def __init__(self, folder: Path | None = None):
        from fwsapp.entities.ner.tagger import MentionTagger

        self.tagger = MentionTagger.load(folder or self.folder)
        self.kind = self.tagger.kind
        self.backend = trained_label(folder or self.folder, self.kind)

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return [[Entity(text[start:end], start, end) for start, end in spans]
                for text, spans in zip(texts, self.tagger.predict(texts))]

    def settle(self, texts: list[str], mentions: list[list[Entity]]) -> list[list[Entity]]:
        """An abbreviation a text defines as a mention's short form is a mention wherever it occurs there."""
        from fwsapp.entities.ner.abbreviations import find_abbreviations, make_consistent

        found = zip(texts, mentions, find_abbreviations(texts))
        return [[Entity(text[start:end], start, end)
                 for start, end in make_consistent(text, [(entity.start, entity.end) for entity in kept], abbreviations)]
                for text, kept, abbreviations in found]


class DiseaseTaggerRecognizer(TrainedRecognizer):
    folder = model_dir("disease")


class ChemicalTaggerRecognizer(TrainedRecognizer):
    folder = model_dir("chemical")
