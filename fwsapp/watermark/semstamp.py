"""SemStamp (Hou et al., NAACL 2024): a sentence's region is the locality-sensitive hash of its embedding, the signs of
its projections on d random hyperplanes, 2^d regions in all.

The hyperplanes are MarkLLM's: nearpy's RandomBinaryProjections with seed 1234 (numpy's legacy generator), the first
hyperplane the signature's highest bit. They are public; the key is what keys the valid regions. A sentence is clear of
the borders when no hyperplane is nearer than the margin: |cos(embedding, normal)| ≥ margin for every normal.
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from fwsapp.watermark import methods
from fwsapp.watermark.semantic import SemanticWatermark

HYPERPLANE_SEED = 1234  # nearpy's rand_seed in MarkLLM's SemStamp


class SemStamp(SemanticWatermark, info=methods.SEMSTAMP):

    @property
    def regions(self) -> int:
        return 2 ** self.params["lsh_dim"]

    @cached_property
    def normals(self) -> np.ndarray:
        """The hyperplanes' normals, one row each, as nearpy draws them for the encoder's width."""
        width = self.encoder.model.config.hidden_size
        return np.random.RandomState(HYPERPLANE_SEED).randn(self.params["lsh_dim"], width)

    def placed(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        projections = embeddings @ self.normals.T
        bits = (projections > 0).astype(np.int64)
        regions = bits @ (2 ** np.arange(bits.shape[1] - 1, -1, -1))
        cosines = projections / np.linalg.norm(embeddings, axis=1, keepdims=True) / np.linalg.norm(self.normals, axis=1)
        return regions, np.abs(cosines).min(axis=1) >= self.params["margin"]
