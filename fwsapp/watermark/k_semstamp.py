"""k-SemStamp (Hou et al., ACL Findings 2024): a sentence's region is its nearest of k centroids, k-means clusters of
the sentences a domain is written in, so the regions follow the domain's meanings rather than random hyperplanes.

The clusters are fitted on the sentences of a task's references (the demo data shipped with fwsapp, so every machine
fits the same ones), by cosine k-means: scikit-learn's k-means on unit-length embeddings, seeded, centroids normalised.
A fit depends only on the task, k and the encoder, so generation and detection refit the same clusters. A sentence is
clear of the borders when its cosine distance to the second-nearest centroid exceeds that to the nearest by the margin
(the original's kmeans_reject_overlap).
"""
from __future__ import annotations

from functools import cached_property, lru_cache

import numpy as np

from fwsapp.watermark import methods
from fwsapp.watermark.semantic import SemanticWatermark, sentence_spans

CLUSTER_SEED = 0


@lru_cache(maxsize=8)
def reference_sentences(task: str) -> tuple[str, ...]:
    """The sentences of a task's shipped references, in order."""
    from fwsapp.data.loaders import DEMO, load_dataset

    return tuple(reference[start:end] for sample in load_dataset(task, DEMO)
                 for reference in [sample.reference] for start, end in sentence_spans(reference))


def fitted_centroids(embeddings: np.ndarray, k: int) -> np.ndarray:
    """k unit-length centroids of unit-length `embeddings` (spherical k-means, seeded)."""
    from sklearn.cluster import KMeans

    if len(embeddings) < k:
        raise ValueError(f"k-SemStamp cannot fit {k} clusters on {len(embeddings)} sentences: choose k of at most "
                         f"{len(embeddings)}.")
    centres = KMeans(n_clusters=k, n_init=10, random_state=CLUSTER_SEED).fit(embeddings).cluster_centers_
    return centres / np.linalg.norm(centres, axis=1, keepdims=True)


class KSemStamp(SemanticWatermark, info=methods.K_SEMSTAMP):

    @property
    def regions(self) -> int:
        return self.params["k"]

    @cached_property
    def centroids(self) -> np.ndarray:
        return fitted_centroids(self.encoder.encode(list(reference_sentences(self.params["domain"]))), self.params["k"])

    def placed(self, embeddings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        distances = 1 - embeddings @ self.centroids.T  # cosine distances: both sides have unit length
        nearest = np.sort(distances, axis=1)
        return distances.argmin(axis=1), nearest[:, 1] - nearest[:, 0] > self.params["margin"]
