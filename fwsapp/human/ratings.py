"""The Rate page's open pool: clinicians, each by typed name, rate watermarked vs unwatermarked outputs (the paper's
human evaluation; `agreement.py` compares them with the judge and the metrics, `workflow.py` stores each rating).

- Sampling: a share of each run's samples (10% by default) becomes rating items, each with a random,
  stored A/B order.
- Assignment: each item goes to 3 different raters; no rater sees an item twice (rated or skipped).
  A rater gets the item closest to complete first, so finished items accumulate early.
- Ratings are written on submit and survive reloads; the database refuses a second rating by the same
  rater of the same item.
"""
from __future__ import annotations

import hashlib
import math
import random

import pandas as pd

from fwsapp.human.workflow import Queue, Rater, RatingError, Task
from fwsapp.results.fws import ASPECTS
from fwsapp.store import Store

RATERS_PER_ITEM = 3
DEFAULT_FRACTION = 0.10


def sample_items(store: Store, run_id: str, fraction: float = DEFAULT_FRACTION, seed: int = 0) -> int:
    """Add ceil(fraction · n) of the run's samples as rating items; returns how many were new."""
    if not 0 < fraction <= 1:
        raise ValueError("The share of items to rate must be between 0 and 1.")
    samples = sorted(int(index) for index in store.generations(run_id).sample_idx)
    if not samples:
        raise ValueError(f"Run {run_id} has no samples to rate.")
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{run_id}".encode()).digest()[:8], "little"))
    chosen = rng.sample(samples, max(1, math.ceil(fraction * len(samples))))
    existing = store.human_item_samples(run_id)
    new = [(run_id, index, rng.random() < 0.5) for index in chosen if index not in existing]
    if new:
        store.add_human_items(new)
    return len(new)


def _rater(name: str) -> str:
    name = " ".join((name or "").split())
    if not name:
        raise RatingError("Enter your name first: ratings are stored per rater.")
    if len(name) > 80:
        raise RatingError("A rater name may have at most 80 characters.")
    return name


class OpenRater(Rater):
    """A trusted rater by typed name: the open items (none of a study's), each until it has RATERS_PER_ITEM ratings,
    the one closest to complete first; no rater sees an item twice."""

    raters_per_item = RATERS_PER_ITEM

    def __init__(self, name: str):
        self.identity = _rater(name)

    def queue(self, store: Store) -> Queue:
        done = []
        for run_id, sample_idx, watermarked_first, watermarked, unwatermarked, comment, _ in \
                store.rater_history(self.identity):
            scores = (watermarked, unwatermarked) if watermarked_first else (unwatermarked, watermarked)
            done.append(Task(f"{run_id}-{sample_idx}", run_id, sample_idx, bool(watermarked_first), done=True,
                             **dict(zip(("scores_a", "scores_b"), (tuple(value) if value is not None else None
                                                                   for value in scores))), comment=comment))
        row = store.next_human_item(self.identity, RATERS_PER_ITEM)
        upcoming = Task(f"{row[0]}-{row[1]}", *row) if row else None
        _, total = store.rater_progress(self.identity)
        return Queue(done, upcoming, total)


RATING_COLUMNS = ["rater", "run_id", "sample_idx", "method", "model", "task", "kind", "shown_as", *ASPECTS, "comment",
                  "seconds", "created", "revised"]


def ratings(store: Store) -> pd.DataFrame:
    """All ratings, one row per rater × item × text kind, aspects on the 1-5 scale (the CSV export), with the letter
    the text was shown under (A or B: position bias, and which text a comment is about), the seconds spent, and when
    the rating was given and last revised."""
    raw = store.human_ratings()
    rows = []
    for row in raw.itertuples():
        for kind in ("watermarked", "unwatermarked"):
            scores = getattr(row, f"scores_{kind}")
            rows.append({"rater": row.rater, "run_id": row.run_id, "sample_idx": row.sample_idx, "method": row.method,
                         "model": row.model, "task": row.task, "kind": kind,
                         "shown_as": "A" if bool(row.watermarked_first) == (kind == "watermarked") else "B",
                         **dict(zip(ASPECTS, scores)), "comment": row.comment, "seconds": row.seconds,
                         "created": row.created, "revised": row.revised})
    return pd.DataFrame(rows, columns=RATING_COLUMNS)
