"""The human study: rating items with their stored A/B order, ratings, and skips."""
from __future__ import annotations

import pandas as pd

from fwsapp.store.core import StoreCore, now


class HumanTables(StoreCore):
    # -- human evaluation ----------------------------------------------------------------------------
    def human_item_samples(self, run_id: str) -> set[int]:
        rows = self.rows("SELECT sample_idx FROM human_items WHERE run_id = ?", [run_id])
        return {int(row[0]) for row in rows}

    def human_item_orders(self) -> dict[tuple[str, int], bool]:
        """(run, sample) -> whether the watermarked text is shown first, for every stored item."""
        return {(run_id, int(sample_idx)): bool(first)
                for run_id, sample_idx, first in self.rows("SELECT run_id, sample_idx, watermarked_first FROM human_items")}

    def add_human_items(self, items: list[tuple[str, int, bool]]) -> None:
        """(run, sample, watermarked shown first) rating items."""
        with self.transaction() as cursor:
            cursor.executemany("INSERT INTO human_items VALUES (?, ?, ?, ?)", [(*item, now()) for item in items])

    def next_human_item(self, rater: str, raters_per_item: int) -> tuple[str, int, bool] | None:
        """The item for this rater: not yet rated or skipped by them, with fewer than `raters_per_item`
        ratings, the one closest to complete first. A study's items go to its assigned raters only."""
        row = self.row(
            """SELECT i.run_id, i.sample_idx, i.watermarked_first
               FROM human_items i
               LEFT JOIN (SELECT run_id, sample_idx, count(*) AS ratings FROM human_ratings GROUP BY ALL) r
                      USING (run_id, sample_idx)
               WHERE coalesce(r.ratings, 0) < ?
                 AND NOT EXISTS (SELECT 1 FROM study_items t WHERE t.run_id = i.run_id AND t.sample_idx = i.sample_idx)
                 AND NOT EXISTS (SELECT 1 FROM human_ratings h
                                 WHERE h.rater = ? AND h.run_id = i.run_id AND h.sample_idx = i.sample_idx)
                 AND NOT EXISTS (SELECT 1 FROM human_skips s
                                 WHERE s.rater = ? AND s.run_id = i.run_id AND s.sample_idx = i.sample_idx)
               ORDER BY coalesce(r.ratings, 0) DESC, i.run_id, i.sample_idx
               LIMIT 1""",
            [raters_per_item, rater, rater],
        )
        return (row[0], int(row[1]), bool(row[2])) if row else None

    def add_human_rating(self, rater: str, run_id: str, sample_idx: int, watermarked: list[float],
                         unwatermarked: list[float], comment: str | None, raters_per_item: int | None,
                         replace: bool = False, seconds: float | None = None) -> str | None:
        """Store a rating unless the rater has rated the item ("rated") or it is full ("full"; a study's items have
        no cap here, `raters_per_item` None: their raters are assigned). With `replace`, the rater's own rating or
        skip of the item gives way to this one."""
        with self.transaction() as cursor:
            key = [rater, run_id, sample_idx]
            others, own = cursor.execute(
                "SELECT count(*) FILTER (WHERE rater <> ?), count(*) FILTER (WHERE rater = ?) FROM human_ratings "
                "WHERE run_id = ? AND sample_idx = ?", [rater, *key]).fetchone()
            if own and not replace:
                return "rated"
            if raters_per_item is not None and others >= raters_per_item:
                return "full"
            created, revised = None, None
            if replace:  # the revised rating keeps the first one's time, so the rater's history keeps its order
                created = cursor.execute(
                    "SELECT min(created) FROM (SELECT created FROM human_ratings WHERE rater = ? AND run_id = ? AND "
                    "sample_idx = ? UNION ALL SELECT created FROM human_skips WHERE rater = ? AND run_id = ? AND "
                    "sample_idx = ?)", key + key).fetchone()[0]
                revised = now() if created else None
                for table in ("human_ratings", "human_skips"):
                    cursor.execute(f"DELETE FROM {table} WHERE rater = ? AND run_id = ? AND sample_idx = ?", key)
            cursor.execute("INSERT INTO human_ratings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [rater, run_id, sample_idx, watermarked, unwatermarked, comment, created or now(), seconds,
                            revised])
        return None

    def rater_history(self, rater: str) -> list[tuple]:
        """The items a rater rated or skipped, oldest first: (run_id, sample_idx, watermarked_first,
        scores_watermarked, scores_unwatermarked, comment, done_at), the scores and comment None for a skip."""
        return self.rows(
            """SELECT i.run_id, i.sample_idx, i.watermarked_first, h.scores_watermarked, h.scores_unwatermarked,
                      h.comment, coalesce(h.created, s.created) AS done_at
               FROM human_items i
               LEFT JOIN human_ratings h ON h.rater = ? AND h.run_id = i.run_id AND h.sample_idx = i.sample_idx
               LEFT JOIN human_skips s ON s.rater = ? AND s.run_id = i.run_id AND s.sample_idx = i.sample_idx
               WHERE h.rater IS NOT NULL OR s.rater IS NOT NULL
               ORDER BY done_at, i.run_id, i.sample_idx""", [rater, rater])

    def add_human_skip(self, rater: str, run_id: str, sample_idx: int) -> None:
        with self.transaction() as cursor:
            cursor.execute("INSERT OR IGNORE INTO human_skips VALUES (?, ?, ?, ?)", [rater, run_id, sample_idx, now()])

    def rater_progress(self, rater: str) -> tuple[int, int]:
        """(items this rater has rated or skipped, items there are to rate)."""
        done, total = self.row(
            """SELECT (SELECT count(*) FROM human_ratings WHERE rater = ?) + (SELECT count(*) FROM human_skips WHERE rater = ?),
                      (SELECT count(*) FROM human_items i WHERE NOT EXISTS (
                           SELECT 1 FROM study_items t WHERE t.run_id = i.run_id AND t.sample_idx = i.sample_idx))""",
            [rater, rater])
        return int(done), int(total)

    def human_ratings(self) -> pd.DataFrame:
        """Every rating with its run's method, model and task, and the A/B order its rater saw: a study rater's own,
        else the item's."""
        return self.frame(
            """SELECT h.*, r.method, r.model, r.task, COALESCE(a.watermarked_first, i.watermarked_first) AS watermarked_first
               FROM human_ratings h JOIN runs r USING (run_id) JOIN human_items i USING (run_id, sample_idx)
               LEFT JOIN study_assignments a
                      ON a.rater_id = h.rater AND a.run_id = h.run_id AND a.sample_idx = h.sample_idx
               ORDER BY run_id, sample_idx, rater""")
