"""Studies served to a team: the study, its items, its raters (a hash of each invite token, never the token), each
rater's assignments in their own order, and the attention checks' second ratings."""
from __future__ import annotations

import pandas as pd

from fwsapp.store.core import StoreCore, now


class StudyTables(StoreCore):
    def add_study(self, study: dict, items: list[tuple[str, int, bool]]) -> None:
        """A study (the `studies` columns but `created`) with its items (run, sample, watermarked shown first), in one
        transaction; an item other studies or the Rate page already hold keeps its stored A/B order."""
        with self.transaction() as cursor:
            cursor.execute("INSERT INTO studies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [study["study_id"], study["name"], study["runs"], study["raters_per_item"],
                            study["attention_share"], study["entity_task"], study["seed"], now()])
            cursor.executemany("INSERT OR IGNORE INTO human_items VALUES (?, ?, ?, ?)", [(*item, now()) for item in items])
            cursor.executemany("INSERT INTO study_items VALUES (?, ?, ?)",
                               [(study["study_id"], run_id, sample_idx) for run_id, sample_idx, _ in items])

    def studies(self) -> pd.DataFrame:
        return self.frame("SELECT * FROM studies ORDER BY created")

    def study_items(self, study_id: str) -> pd.DataFrame:
        """The study's items with their A/B order, how many raters are assigned to each and how many of them see the
        watermarked text first. A revoked rater's item counts only once rated: the unrated ones go to the raters
        invited next."""
        return self.frame(
            """SELECT t.run_id, t.sample_idx, i.watermarked_first,
                      count(a.rater_id) AS assigned,
                      count(a.rater_id) FILTER (WHERE COALESCE(a.watermarked_first, i.watermarked_first))
                          AS assigned_watermarked_first
               FROM study_items t JOIN human_items i USING (run_id, sample_idx)
               LEFT JOIN (SELECT a.* FROM study_assignments a JOIN raters r USING (rater_id)
                          WHERE r.study_id = ? AND (r.revoked IS NULL OR EXISTS (
                                SELECT 1 FROM human_ratings h
                                WHERE h.rater = a.rater_id AND h.run_id = a.run_id AND h.sample_idx = a.sample_idx))
                         ) a USING (run_id, sample_idx)
               WHERE t.study_id = ?
               GROUP BY t.run_id, t.sample_idx, i.watermarked_first
               ORDER BY t.run_id, t.sample_idx""", [study_id, study_id])

    def add_rater(self, rater_id: str, study_id: str, name: str, token_hash: str,
                  assignments: list[tuple[str, int, int, bool, bool]]) -> None:
        """A rater with their assignments (run, sample, position in their order, attention check, whether the
        watermarked text is shown first)."""
        with self.transaction() as cursor:
            cursor.execute("INSERT INTO raters VALUES (?, ?, ?, ?, ?, NULL)", [rater_id, study_id, name, token_hash, now()])
            if assignments:  # a rater invited once every item has its raters gets none
                cursor.executemany("INSERT INTO study_assignments VALUES (?, ?, ?, ?, ?, ?)",
                                   [(rater_id, *assignment) for assignment in assignments])

    def raters(self, study_id: str | None = None) -> pd.DataFrame:
        """Raters without their token hashes."""
        query = "SELECT rater_id, study_id, name, created, revoked FROM raters"
        if study_id is None:
            return self.frame(query + " ORDER BY created")
        return self.frame(query + " WHERE study_id = ? ORDER BY created", [study_id])

    def rater_hashes(self) -> dict[str, str]:
        """Every rater's token hash that still opens something: rater id -> hash."""
        return dict(self.rows("SELECT rater_id, token_hash FROM raters WHERE revoked IS NULL"))

    def revoke_rater(self, rater_id: str) -> bool:
        """Revoke a rater's link; False when no such rater holds a working link."""
        with self.transaction() as cursor:
            found = cursor.execute("SELECT count(*) FROM raters WHERE rater_id = ? AND revoked IS NULL",
                                   [rater_id]).fetchone()[0]
            cursor.execute("UPDATE raters SET revoked = ? WHERE rater_id = ? AND revoked IS NULL", [now(), rater_id])
        return bool(found)

    def assignments(self, rater_id: str) -> pd.DataFrame:
        """A rater's items in their own order, with what they did with each: the rating (scores, comment, seconds,
        time), a skip, and the attention check's second rating."""
        return self.frame(
            """SELECT a.run_id, a.sample_idx, a.position, a.attention,
                      COALESCE(a.watermarked_first, i.watermarked_first) AS watermarked_first,
                      h.scores_watermarked, h.scores_unwatermarked, h.comment, h.seconds, h.created AS rated,
                      s.created AS skipped, c.scores_watermarked AS repeat_watermarked,
                      c.scores_unwatermarked AS repeat_unwatermarked, c.seconds AS repeat_seconds,
                      c.created AS repeated
               FROM study_assignments a JOIN human_items i USING (run_id, sample_idx)
               LEFT JOIN human_ratings h ON h.rater = a.rater_id AND h.run_id = a.run_id AND h.sample_idx = a.sample_idx
               LEFT JOIN human_skips s ON s.rater = a.rater_id AND s.run_id = a.run_id AND s.sample_idx = a.sample_idx
               LEFT JOIN attention_ratings c
                      ON c.rater = a.rater_id AND c.run_id = a.run_id AND c.sample_idx = a.sample_idx
               WHERE a.rater_id = ? ORDER BY a.position""", [rater_id])

    def add_attention_rating(self, rater: str, run_id: str, sample_idx: int, watermarked: list[float] | None,
                             unwatermarked: list[float] | None, seconds: float | None, replace: bool = False) -> bool:
        """The second rating of an attention check (no scores: skipped); False when the rater has given it already and
        `replace` is not asked (kept as it was). A replaced one keeps its first time and says when it was revised."""
        with self.transaction() as cursor:
            key = [rater, run_id, sample_idx]
            given = cursor.execute("SELECT count(*) FROM attention_ratings WHERE rater = ? AND run_id = ? AND "
                                   "sample_idx = ?", key).fetchone()[0]
            if not given:
                cursor.execute("INSERT INTO attention_ratings VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
                               [*key, watermarked, unwatermarked, seconds, now()])
            elif replace:
                cursor.execute("UPDATE attention_ratings SET scores_watermarked = ?, scores_unwatermarked = ?, seconds = ?, "
                               "revised = ? WHERE rater = ? AND run_id = ? AND sample_idx = ?",
                               [watermarked, unwatermarked, seconds, now(), *key])
        return not given or replace

    def delete_study(self, study_id: str) -> dict[str, int]:
        """Delete a study with what its raters gave (ratings, skips, attention checks' second ratings, verdicts on
        names), their links and assignments, and its items, in one transaction; returns the rows deleted per table.
        The runs stay, and so does each item's A/B order (other studies and the Rate page may show it)."""
        raters = "(SELECT rater_id FROM raters WHERE study_id = ?)"
        given = {table: f"DELETE FROM {table} WHERE rater IN {raters}"
                 for table in ("human_ratings", "human_skips", "attention_ratings", "entity_verdicts", "fact_verdicts")}
        statements = {**given, "study_assignments": f"DELETE FROM study_assignments WHERE rater_id IN {raters}",
                      "raters": "DELETE FROM raters WHERE study_id = ?",
                      "study_items": "DELETE FROM study_items WHERE study_id = ?",
                      "studies": "DELETE FROM studies WHERE study_id = ?"}
        with self.transaction() as cursor:
            return {table: cursor.execute(statement, [study_id]).fetchone()[0] for table, statement in statements.items()}
