"""The `trained` recognizer (the default): the project's own tagger (fwsapp/entities/ner), all-MiniLM-L6-v2 fine-tuned on the
BC5CDR and NCBI Disease training and development splits, with an abbreviation pass."""
from __future__ import annotations

from pathlib import Path

from fwsapp.entities.recognizers.base import Entity, Recognizer
from fwsapp.entities.recognizers import trained_label


class TrainedRecognizer(Recognizer):
    """The trained tagger's mentions, made consistent with the abbreviations each text defines."""

    def __init__(self, folder: Path | None = None):
        from fwsapp.entities.ner import MODEL_DIR
        from fwsapp.entities.ner.tagger import DiseaseTagger

        self.tagger = DiseaseTagger.load(folder or MODEL_DIR)
        self.backend = trained_label(folder)

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return [[Entity(text[start:end], start, end) for start, end in spans]
                for text, spans in zip(texts, self.tagger.predict(texts))]

    def settle(self, texts: list[str], mentions: list[list[Entity]]) -> list[list[Entity]]:
        """An abbreviation a text defines as a disease's short form is a disease wherever it occurs there."""
        from fwsapp.entities.ner.abbreviations import find_abbreviations, make_consistent

        found = zip(texts, mentions, find_abbreviations(texts))
        return [[Entity(text[start:end], start, end)
                 for start, end in make_consistent(text, [(entity.start, entity.end) for entity in kept], abbreviations)]
                for text, kept, abbreviations in found]
