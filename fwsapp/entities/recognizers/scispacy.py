"""The `scispacy` recognizer: the paper's scispaCy `en_ner_bc5cdr_md` (DISEASE entities), where that model is installed."""
from __future__ import annotations

from fwsapp.entities.recognizers.base import Entity, Recognizer
from fwsapp.entities.recognizers import SCISPACY_MODEL


class ScispacyRecognizer(Recognizer):
    """The DISEASE entities of scispaCy's BC5CDR model."""

    def __init__(self):
        import spacy

        self._nlp = spacy.load(SCISPACY_MODEL)

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return [[Entity(span.text, span.start_char, span.end_char) for span in doc.ents if span.label_ == "DISEASE"]
                for doc in self._nlp.pipe(texts, batch_size=64)]
