"""One rating workflow for every way a rater comes in: the Rate page's open pool (a trusted rater by typed name) and a
study's invited raters (their own items, attention checks).

A `Rater` says who rates and which items they get (`queue`); what a rating is, how answers A and B map back to the
watermarked and unwatermarked texts, and how a rating, a revision or a skip is stored, are written once here. The
queue numbers each item once: going back and forth shows the same number for the same item, and an attention check's
second showing is an item like any other, which can be revisited, revised or skipped, so nothing gives it away.
"""
from __future__ import annotations

from dataclasses import dataclass

from fwsapp.store import Store

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


def check_scores(scores, which: str) -> list[float]:
    values = list(scores)
    if len(values) != 3 or any(value not in LIKERT for value in values):
        raise RatingError(f"Answer {which} needs three ratings from 1 to 5.")
    return [float(value) for value in values]


@dataclass(frozen=True)
class Task:
    """One item as a rater sees it: `handle` names it in the page (no run, sample or label), `repeat` marks an
    attention check's second showing (A and B swapped), and `done` an item the rater rated or skipped, with their own
    rating as they saw it (A, B) when they rated it."""

    handle: str
    run_id: str
    sample_idx: int
    watermarked_first: bool
    repeat: bool = False
    done: bool = False
    scores_a: tuple[float, ...] | None = None
    scores_b: tuple[float, ...] | None = None
    comment: str | None = None

    @property
    def skipped(self) -> bool:
        return self.done and self.scores_a is None

    def texts(self, watermarked, unwatermarked) -> tuple:
        """(A, B): the two answers in the order this rater is shown them."""
        return (watermarked, unwatermarked) if self.watermarked_first else (unwatermarked, watermarked)


@dataclass(frozen=True)
class Queue:
    """A rater's items: those done, oldest first, the next one, and how many there are in all."""

    done: list[Task]
    upcoming: Task | None
    total: int

    def at(self, back: int) -> tuple[Task | None, int]:
        """The item `back` steps before the next one (0: the next one), and its number from 1."""
        back = min(max(back, 0), len(self.done))
        return (self.done[-back] if back else self.upcoming), len(self.done) - back + 1


class Rater:
    """Who rates (`identity`, the key their ratings are stored under) and which items they get."""

    identity: str
    # A cap on an item's ratings from anyone, enforced when a rating is stored (the open pool); None where items are
    # assigned (a study).
    raters_per_item: int | None = None

    def queue(self, store: Store) -> Queue:
        raise NotImplementedError

    def check_open(self, store: Store) -> None:
        """Raise RatingError when this rater may not write now (a revoked link). Checked before every write."""

    def submit(self, store: Store, task: Task, scores_a, scores_b, comment: str = "", seconds: float | None = None,
               revise: bool = False) -> None:
        """Store the rater's scores of answers A and B, mapped back to the texts; with `revise`, in place of their
        earlier rating or skip of the item. An attention check's second showing is stored apart."""
        a, b = check_scores(scores_a, "A"), check_scores(scores_b, "B")
        watermarked, unwatermarked = (a, b) if task.watermarked_first else (b, a)
        self.check_open(store)
        if task.repeat:
            store.add_attention_rating(self.identity, task.run_id, task.sample_idx, watermarked, unwatermarked,
                                       seconds, replace=revise)
            return
        refused = store.add_human_rating(self.identity, task.run_id, task.sample_idx, watermarked, unwatermarked,
                                         comment.strip() or None, self.raters_per_item, replace=revise, seconds=seconds)
        if refused == "rated":
            raise RatingError("You have already rated this item; go back to it to change your rating.")
        if refused == "full":
            raise RatingError(f"This item already has {self.raters_per_item} ratings; take the next one.")

    def skip(self, store: Store, task: Task) -> None:
        """Leave the item unrated; an attention check's second showing is skipped like any item."""
        self.check_open(store)
        if task.repeat:
            store.add_attention_rating(self.identity, task.run_id, task.sample_idx, None, None, None)
        else:
            store.add_human_skip(self.identity, task.run_id, task.sample_idx)
