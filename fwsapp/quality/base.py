"""What a quality metric implements: the config its values are stored under, and the values of the samples that
lack them. Registered in `fwsapp.quality.registry`; `fwsapp.quality.scoring` runs them, resumably."""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import pandas as pd

from fwsapp.quality.registry import MetricPlugIn


def metric_row(sample_idx: int, kind: str, metric: str, config: str, value) -> dict:
    return {"sample_idx": int(sample_idx), "text_kind": kind, "metric": metric, "config": config,
            "value": None if value is None else float(value)}


class Metric(ABC):
    def __init__(self, entry: MetricPlugIn):
        self.entry = entry

    @abstractmethod
    def config(self, run: dict, resources) -> str | None:
        """What its values depend on besides the texts (an encoder, an oracle), stored beside each value so values of
        two configs are never pooled; None where it cannot be computed for this run."""

    @abstractmethod
    def rows(self, todo: pd.DataFrame, run: dict, resources, config: str) -> Iterator[tuple[list[dict], int]]:
        """(rows to store, samples of `todo` covered so far), chunk by chunk, so a stopped job keeps what it finished."""

    def prepare(self, run: dict, resources) -> None:
        """Load what its values need that may fail to load (a model), before any value is computed: a job then refuses
        a model that cannot load before its progress starts. Nothing for a metric whose needs always load."""
        return None

    def describe(self, config: str | None) -> str | None:
        """What the values under `config` are called, where that varies with the config; None where it does not."""
        return None


CHUNK = 16  # samples scored together by a reference metric


class ReferenceMetric(Metric):
    """A metric of each generated text against its reference, one value per text (or one per stored name)."""

    @abstractmethod
    def values(self, outputs: list[str], references: list[str], resources) -> list[float] | dict[str, list[float]]:
        """One value per (output, reference); a dict of such lists, by stored name, for a metric that stores several."""

    def stored(self, todo: pd.DataFrame, run: dict, resources, config: str) -> tuple[pd.DataFrame, list[dict]]:
        """The samples of `todo` whose values another step already found under the same config (`analyze`'s stored
        results), with their rows: they are read, not found again. None by default."""
        return todo.iloc[0:0], []

    def rows(self, todo: pd.DataFrame, run: dict, resources, config: str) -> Iterator[tuple[list[dict], int]]:
        known, known_rows = self.stored(todo, run, resources, config)
        if len(known):
            yield known_rows, len(known)
        todo = todo.drop(known.index)
        # Chunks of CHUNK samples: each is stored as it is done, and a Cancel is heard between them, within seconds.
        for start in range(0, len(todo), CHUNK):
            chunk = todo.iloc[start:start + CHUNK]
            rows = []
            for kind in self.entry.kinds:
                found = self.values(chunk[f"{kind}_text"].fillna("").tolist(), chunk.reference.tolist(), resources)
                by_name = found if isinstance(found, dict) else {self.entry.stored_names[0]: found}
                for name, values in by_name.items():
                    rows += [metric_row(row.sample_idx, kind, name, config, value)
                             for row, value in zip(chunk.itertuples(), values)]
            yield rows, len(known) + start + len(chunk)
