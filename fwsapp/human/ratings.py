"""Human evaluation: clinicians rate watermarked vs unwatermarked outputs, and how the judge and the
metrics agree with them (the paper's Tables 5 and 6).

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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fwsapp.sample_size import enough, shown
from fwsapp.results.fws import ASPECTS, PRESETS, fws
from fwsapp.store import Store

RATERS_PER_ITEM = 3
DEFAULT_FRACTION = 0.10
LIKERT = range(1, 6)

# The paper's questions to human raters, per aspect.
QUESTIONS = {
    "coherence": "Coherence: is the answer well structured, logically consistent and easy to follow?",
    "relevance": "Relevance: does it address the prompt and cover its essential parts?",
    "factual_accuracy": "Factual accuracy: is the medical content correct, with no inaccurate or unrelated medical terms?",
}


def questions(task_name: str) -> dict[str, str]:
    """The rating questions for a task: for summaries the second criterion is completeness, as the judge's is."""
    if task_name != "summarization":
        return QUESTIONS
    return {**QUESTIONS, "relevance": "Completeness: does the summary capture the main question without missing "
                                      "any important information?"}


class RatingError(ValueError):
    """A rating that cannot be stored; nothing was written."""


@dataclass(frozen=True)
class Item:
    run_id: str
    sample_idx: int
    watermarked_first: bool


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


def next_item(store: Store, rater: str) -> Item | None:
    """The next item for this rater: not yet rated or skipped by them, with fewer than 3 ratings."""
    row = store.next_human_item(_rater(rater), RATERS_PER_ITEM)
    return Item(*row) if row else None


def check_scores(scores, which: str) -> list[float]:
    values = list(scores)
    if len(values) != 3 or any(value not in LIKERT for value in values):
        raise RatingError(f"Answer {which} needs three ratings from 1 to 5.")
    return [float(value) for value in values]


def submit_rating(store: Store, rater: str, item: Item, scores_a, scores_b, comment: str = "",
                  revise: bool = False) -> None:
    """Store one rater's scores for answers A and B of an item (A/B mapped back to the texts). With `revise`, they
    replace the rater's earlier rating or skip of the item (going back)."""
    rater = _rater(rater)
    a, b = check_scores(scores_a, "A"), check_scores(scores_b, "B")
    watermarked, unwatermarked = (a, b) if item.watermarked_first else (b, a)
    refused = store.add_human_rating(rater, item.run_id, item.sample_idx, watermarked, unwatermarked,
                                     comment.strip() or None, RATERS_PER_ITEM, replace=revise)
    if refused == "rated":
        raise RatingError("You have already rated this item.")
    if refused == "full":
        raise RatingError(f"This item already has {RATERS_PER_ITEM} ratings; take the next one.")


@dataclass(frozen=True)
class Rated:
    """An item a rater has done: their scores as they saw them (A, B), or none for a skip."""

    item: Item
    scores_a: tuple[float, ...] | None
    scores_b: tuple[float, ...] | None
    comment: str | None


def history(store: Store, rater: str) -> list[Rated]:
    """The items this rater rated or skipped, oldest first, for going back to one."""
    done = []
    for run_id, sample_idx, watermarked_first, watermarked, unwatermarked, comment, _ in store.rater_history(_rater(rater)):
        item = Item(run_id, sample_idx, watermarked_first)
        scores = (watermarked, unwatermarked) if watermarked_first else (unwatermarked, watermarked)
        done.append(Rated(item, *(tuple(value) if value is not None else None for value in scores), comment))
    return done


def skip(store: Store, rater: str, item: Item) -> None:
    store.add_human_skip(_rater(rater), item.run_id, item.sample_idx)


def progress(store: Store, rater: str) -> tuple[int, int]:
    """(items this rater has rated or skipped, items there are to rate)."""
    return store.rater_progress(_rater(rater))


def ratings(store: Store) -> pd.DataFrame:
    """All ratings, one row per rater × item × text kind, aspects on the 1-5 scale (the CSV export)."""
    raw = store.human_ratings()
    rows = []
    for row in raw.itertuples():
        for kind in ("watermarked", "unwatermarked"):
            scores = getattr(row, f"scores_{kind}")
            rows.append({"rater": row.rater, "run_id": row.run_id, "sample_idx": row.sample_idx, "method": row.method,
                         "model": row.model, "task": row.task, "kind": kind, **dict(zip(ASPECTS, scores)),
                         "comment": row.comment, "created": row.created})
    return pd.DataFrame(rows, columns=["rater", "run_id", "sample_idx", "method", "model", "task", "kind", *ASPECTS,
                                       "comment", "created"])


# -- agreement --------------------------------------------------------------------------------------

UNIT = ["run_id", "sample_idx", "kind"]


def human_means(rated: pd.DataFrame) -> pd.DataFrame:
    """Mean human rating per text (run, sample, kind), aspects scaled to [0, 1]."""
    if rated.empty:
        return pd.DataFrame(columns=UNIT + list(ASPECTS) + ["raters"])
    means = rated.groupby(UNIT, as_index=False)[list(ASPECTS)].mean()
    means[list(ASPECTS)] = means[list(ASPECTS)] / 5.0
    return means.merge(rated.groupby(UNIT, as_index=False).size().rename(columns={"size": "raters"}), on=UNIT)


def _pearson(x, y) -> tuple[float | None, float | None, int]:
    from scipy.stats import pearsonr

    pairs = pd.DataFrame({"x": x, "y": y}).dropna()
    if not enough("pearson", len(pairs)) or pairs.x.nunique() < 2 or pairs.y.nunique() < 2:
        return None, None, len(pairs)
    result = pearsonr(pairs.x, pairs.y)
    return float(result.statistic), float(result.pvalue), len(pairs)


def correlation_table(humans: pd.DataFrame, judge: pd.DataFrame, auto: pd.DataFrame, metrics: pd.DataFrame,
                      alpha: float, beta: float, judge_label: str = "judge") -> pd.DataFrame:
    """Pearson r (with p and n) of the mean human rating against the judge (named `judge_label`: its model, not
    'GPT' of another) and each automatic metric, per aspect and for FWS (the paper's Table 6). Long format: aspect,
    source, r, p, n."""
    h = humans.assign(fws=fws(humans.coherence, humans.relevance, humans.factual_accuracy, alpha, beta))
    j = judge.assign(fws=fws(judge.coherence, judge.relevance, judge.factual_accuracy, alpha, beta))
    a = auto.assign(fws=fws(auto.coherence, auto.relevance, auto.factual_accuracy, alpha, beta))
    raw = metrics.rename(columns={"text_kind": "kind"}).pivot_table(index=UNIT, columns="metric", values="value").reset_index()
    rows = []
    for aspect in (*ASPECTS, "fws"):
        sources = {judge_label: j[UNIT + [aspect]], "Auto-FWS mapping": a[UNIT + [aspect]]}
        for metric in [column for column in raw.columns if column not in UNIT]:
            sources[metric] = raw[UNIT + [metric]].rename(columns={metric: aspect})
        for source, values in sources.items():
            joined = h[UNIT + [aspect]].merge(values, on=UNIT, suffixes=("_human", "_source"))
            r, p, n = _pearson(joined[f"{aspect}_human"], joined[f"{aspect}_source"])
            rows.append({"aspect": aspect, "source": source, "r": r, "p": p, "n": n})
    return pd.DataFrame(rows)


def correlation_matrix(correlations: pd.DataFrame) -> pd.DataFrame:
    """r per aspect (rows) and source (columns) as shown: "not enough data (n = …)" below the minimum."""
    values = [shown(r, "pearson", n) for r, n in zip(correlations.r, correlations.n)]
    return correlations.assign(r=values).pivot(index="aspect", columns="source", values="r")


def sensitivity_table(humans: pd.DataFrame, judge: pd.DataFrame, auto: pd.DataFrame) -> pd.DataFrame:
    """Each preset weighting's FWS-to-human Pearson r, for GPTJ and for Auto (the paper's Table 5)."""
    rows = []
    for name, (alpha, beta) in PRESETS.items():
        h = humans.assign(fws=fws(humans.coherence, humans.relevance, humans.factual_accuracy, alpha, beta))
        row = {"preset": name, "alpha": alpha, "beta": beta}
        for label, source in (("GPTJ", judge), ("Auto", auto)):
            s = source.assign(fws=fws(source.coherence, source.relevance, source.factual_accuracy, alpha, beta))
            joined = h[UNIT + ["fws"]].merge(s[UNIT + ["fws"]], on=UNIT, suffixes=("_human", "_source"))
            r, p, n = _pearson(joined.fws_human, joined.fws_source)
            row[f"r {label}"], row[f"p {label}"], row[f"n {label}"] = shown(r, "pearson", n), shown(p, "pearson", n, 4), n
        rows.append(row)
    return pd.DataFrame(rows)


def friedman_nemenyi(rated: pd.DataFrame) -> tuple[float | None, float | None, pd.DataFrame | None]:
    """Friedman test across the three aspects' human ratings (blocks: each rating of each text), and the
    Nemenyi post-hoc p-values between aspects (scikit-posthocs)."""
    import scikit_posthocs as posthocs
    from scipy.stats import friedmanchisquare

    data = rated[list(ASPECTS)].dropna().to_numpy(dtype=float)
    if not enough("friedman", len(data)):
        return None, None, None
    statistic, p_value = friedmanchisquare(*data.T)
    nemenyi = posthocs.posthoc_nemenyi_friedman(data)
    nemenyi.index = nemenyi.columns = list(ASPECTS)
    return float(statistic), float(p_value), nemenyi


def doubly_rated(rated: pd.DataFrame) -> int:
    """Texts rated by two raters or more: the n of Krippendorff's alpha."""
    return int((rated.groupby(UNIT).rater.nunique() >= 2).sum()) if not rated.empty else 0


def krippendorff_alpha(rated: pd.DataFrame) -> dict[str, float | None]:
    """Inter-rater agreement per aspect: Krippendorff's alpha, ordinal, over texts rated by 2+ raters (None below
    sample_size's minimum of such texts)."""
    import krippendorff

    result = {}
    for aspect in ASPECTS:
        matrix = rated.pivot_table(index="rater", columns=UNIT, values=aspect)
        matrix = matrix.loc[:, matrix.notna().sum() >= 2]
        values = matrix.to_numpy(dtype=float)
        if matrix.shape[0] < 2 or not enough("krippendorff", matrix.shape[1]) or len(np.unique(values[~np.isnan(values)])) < 2:
            result[aspect] = None
            continue
        result[aspect] = float(krippendorff.alpha(reliability_data=values, level_of_measurement="ordinal"))
    return result
