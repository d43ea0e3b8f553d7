"""What generating a batch of prompts yields, whichever way it was decoded (token by token, a sentence at a time with
rejections, or by a serving engine): the texts, their token ids and entropies, and the time each took."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class GeneratedBatch:
    texts: list[str]
    token_ids: list[list[int]]
    entropies: list[list[float]]
    seconds: float
    # Per text, where it was generated on its own (sentence-level rejection sampling): the candidate sentences
    # rejected, and its seconds; None where a batch shares its time.
    rejections: list[int] | None = None
    text_seconds: list[float] | None = None

    def text_time(self, offset: int, size: int) -> float:
        """One text's seconds: its own where it was generated alone (a served answer, a semantic watermark's), else
        its share of the batch's."""
        return self.text_seconds[offset] if self.text_seconds else self.seconds / size
