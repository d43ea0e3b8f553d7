"""The `trained` and `chemical-tagger` recognizers: the project's own taggers (fwsapp/entities/ner), all-MiniLM-L6-v2
fine-tuned on gold corpora (diseases: BC5CDR and NCBI Disease; chemicals: BC5CDR), with an abbreviation pass and, for
chemicals, one sense per discourse."""
from __future__ import annotations

from pathlib import Path

from fwsapp.entities.ner import ONE_SENSE_PER_DISCOURSE, model_dir
from fwsapp.entities.recognizers.base import Entity, Recognizer
from fwsapp.entities.recognizers import trained_label


class TrainedRecognizer(Recognizer):
    """A trained tagger's mentions, made consistent with the abbreviations each text defines and, for the kinds in
    `ONE_SENSE_PER_DISCOURSE`, with themselves: a name is a mention at all its uses in a text or at none."""

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
        """An abbreviation a text defines as a mention's short form is a mention wherever it occurs there; then, where
        the kind takes it, each tagged name is a mention at all its uses or at none, as most of them are tagged."""
        from fwsapp.entities.ner.abbreviations import find_abbreviations, make_consistent
        from fwsapp.entities.ner.discourse import one_sense_per_discourse

        settled = []
        for text, kept, abbreviations in zip(texts, mentions, find_abbreviations(texts)):
            spans = make_consistent(text, [(entity.start, entity.end) for entity in kept], abbreviations)
            if self.kind in ONE_SENSE_PER_DISCOURSE:
                spans = one_sense_per_discourse(text, spans)
            settled.append([Entity(text[start:end], start, end) for start, end in spans])
        return settled


class DiseaseTaggerRecognizer(TrainedRecognizer):
    folder = model_dir("disease")


class ChemicalTaggerRecognizer(TrainedRecognizer):
    folder = model_dir("chemical")
