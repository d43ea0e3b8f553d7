"""k-SemStamp (Hou et al., ACL Findings 2024): a sentence's region is its nearest of k centroids, k-means clusters of
the sentences a domain is written in, so the regions follow the domain's meanings rather than random hyperplanes.

The clusters are part of the key. A run fits them on the sentences of its own dataset's references before it generates
(`fit`, called by fwsapp.generation.generate) and keeps them with the run, so every later detection of its texts, on
any machine, uses the same centroids whatever became of the dataset. Text outside a run (pasted, the playground) is
scored with clusters fitted on the shipped references of the `domain` task. A fit is cosine k-means: scikit-learn's
k-means on unit-length embeddings, seeded, centroids normalised. A sentence is clear of the borders when its cosine
distance to the second-nearest centroid exceeds that to the nearest by the margin (the original's kmeans_reject_overlap).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from fwsapp.watermark import methods
from fwsapp.watermark.semantic import SemanticWatermark, sentence_spans

CLUSTER_SEED = 0


def fitted_centroids(embeddings: np.ndarray, k: int) -> np.ndarray:
    """k unit-length centroids of unit-length `embeddings` (spherical k-means, seeded)."""
    from sklearn.cluster import KMeans

    if len(embeddings) < k:
        raise ValueError(f"k-SemStamp cannot fit {k} clusters on {len(embeddings)} sentences: choose k of at most "
                         f"{len(embeddings)}, or a dataset with more references.")
    centres = KMeans(n_clusters=k, n_init=10, random_state=CLUSTER_SEED).fit(embeddings).cluster_centers_
    return centres / np.linalg.norm(centres, axis=1, keepdims=True)


class KSemStamp(SemanticWatermark, info=methods.K_SEMSTAMP):

    def __init__(self, vocab_size: int, lm=None, tokenizer=None, encoder=None, fitted: dict | None = None, **params):
        """`fitted`: the run's clusters, as `fit` gave them; None for text outside a run."""
        super().__init__(vocab_size, lm, tokenizer, encoder, **params)
        if fitted is not None and (fitted_k := len(fitted["centroids"])) != self.params["k"]:
            raise ValueError(f"This run's k-SemStamp clusters were fitted with k={fitted_k}, and the clusters are part "
                             f"of the key: detect with k={fitted_k}.")
        self.fitted = fitted

    @classmethod
    def fit(cls, references: list[str], params: dict, encoder=None) -> dict:
        """The k centroids of the references' sentences, with what they were fitted on."""
        from fwsapp.models.encoder import load_encoder

        sentences = [reference[start:end] for reference in references for start, end in sentence_spans(reference)]
        embeddings = (encoder or load_encoder()).encode(sentences)
        return {"references": len(references), "sentences": len(sentences),
                "centroids": fitted_centroids(embeddings, params["k"]).tolist()}

    @property
    def regions(self) -> int:
        return self.params["k"]

    @cached_property
    def centroids(self) -> np.ndarray:
        if self.fitted is None:  # text outside a run: the domain's shipped references
            from fwsapp.data.loaders import DEMO, load_dataset

            references = [sample.reference for sample in load_dataset(self.params["domain"], DEMO)]
            self.fitted = self.fit(references, self.params, self.encoder)
        return np.asarray(self.fitted["centroids"])

    def placed(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distances = 1 - embeddings @ self.centroids.T  # cosine distances: both sides have unit length
        nearest = np.sort(distances, axis=1)
        return distances.argmin(axis=1), nearest[:, 1] - nearest[:, 0] > self.params["margin"]
