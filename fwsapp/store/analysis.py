"""Why factuality degrades: teacher-forced token entropies, disease entities per text, and clinicians' verdicts on them."""
from __future__ import annotations

import pandas as pd

from fwsapp.store.core import StoreCore, insert_rows, now


class AnalysisTables(StoreCore):
    def entities(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("entities", run_ids)

    def entity_analyses(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("entity_analyses", run_ids)

    # -- tokens to detect predicted from entropy (fwsapp.detection.predicted_length) ----------------------------
    def predicted_samples(self, run_id: str, model: str) -> set[int]:
        return {row[0] for row in self.rows("SELECT sample_idx FROM length_predictions WHERE run_id = ? AND model = ?",
                                            [run_id, model])}

    def write_length_predictions(self, run_id: str, model: str, rows: list[dict]) -> None:
        with self.transaction() as cursor:
            insert_rows(cursor, "length_predictions", run_id, [{"model": model, **row} for row in rows])

    def length_predictions(self, run_id: str) -> pd.DataFrame:
        """A run's predicted curves, under every model that predicted them."""
        return self.frame("SELECT * FROM length_predictions WHERE run_id = ? ORDER BY model, sample_idx", [run_id])

    # -- entropies and entities -------------------------------------------------------------------
    def entropy_keys(self, run_id: str, model: str) -> set[tuple[int, str]]:
        """(sample, text kind) whose teacher-forced entropies under `model` are stored."""
        rows = self.rows(
            "SELECT sample_idx, text_kind FROM entropies WHERE run_id = ? AND model = ?", [run_id, model])
        return {(int(sample), kind) for sample, kind in rows}

    def reuse_reference_entropies(self, run_id: str, model: str) -> int:
        """Copy into `run_id` the reference entropies under `model` that another run stored for the same prompt
        and reference (runs of several methods over the same prompts share them); returns how many. Nothing to copy
        writes nothing, so a rerun leaves the revision (and the app's caches) as they were."""
        copies = self.frame("""
                SELECT DISTINCT ON (mine.sample_idx) mine.run_id, mine.sample_idx, 'reference' AS text_kind,
                       stored.model, stored.token_ids, stored.token_spans, stored.entropy
                FROM generations mine
                JOIN generations theirs ON theirs.run_id <> mine.run_id AND theirs.prompt = mine.prompt
                     AND theirs.reference = mine.reference
                JOIN entropies stored ON stored.run_id = theirs.run_id AND stored.sample_idx = theirs.sample_idx
                     AND stored.text_kind = 'reference' AND stored.model = ?
                WHERE mine.run_id = ? AND NOT EXISTS (
                    SELECT 1 FROM entropies own WHERE own.run_id = mine.run_id AND own.sample_idx = mine.sample_idx
                    AND own.text_kind = 'reference' AND own.model = ?)""", [model, run_id, model])
        if copies.empty:
            return 0
        with self.transaction() as cursor:
            cursor.register("copies", copies)
            try:
                cursor.execute("INSERT OR IGNORE INTO entropies BY NAME SELECT * FROM copies")
            finally:
                cursor.unregister("copies")
        return len(copies)

    def sample_entropies(self, run_id: str, sample_idx: int, model: str) -> list[tuple[str, list, list]]:
        """(text kind, token character spans, entropies) stored for one sample under `model`."""
        return self.rows(
            "SELECT text_kind, token_spans, entropy FROM entropies WHERE run_id = ? AND sample_idx = ? AND model = ?",
            [run_id, int(sample_idx), model])

    def token_entropies(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        """Long table of per-token entropies: run_id, sample_idx, text_kind, entropy_model (the model whose
        distribution they are of), entropy (generated texts from the generation job, under the run's model;
        references and imported texts from `entropies`); undefined values left out."""
        where, parameters = ("WHERE run_id IN (SELECT unnest(?))", [run_ids]) if run_ids is not None else ("", [])
        frames = [self.frame(f"""SELECT run_id, sample_idx, '{kind}' AS text_kind, r.model AS entropy_model,
                                        unnest({kind}_entropy) AS entropy
                                 FROM generations JOIN runs r USING (run_id) {where}""", parameters)
                  for kind in ("unwatermarked", "watermarked")]
        frames.append(self.frame(f"""SELECT run_id, sample_idx, text_kind, model AS entropy_model,
                                            unnest(entropy) AS entropy FROM entropies {where}""", parameters))
        values = pd.concat(frames, ignore_index=True)
        return values[values.entropy.notna() & (values.entropy > float("-inf"))]

    def analysed_samples(self, run_id: str, config: str) -> set[int]:
        """Samples whose entities are analysed under `config` with every text's entropies stored now: a text that had
        none when analysed (an imported or served answer before its teacher-forced entropies) is analysed again."""
        rows = self.rows("""
            SELECT sample_idx FROM entity_analyses analysed WHERE run_id = ? AND config = ? AND NOT EXISTS (
                SELECT 1 FROM entropies stored WHERE stored.run_id = analysed.run_id
                AND stored.sample_idx = analysed.sample_idx
                AND CASE stored.text_kind WHEN 'reference' THEN analysed.reference_tokens
                                          WHEN 'unwatermarked' THEN analysed.unwatermarked_tokens
                                          ELSE analysed.watermarked_tokens END IS NULL)""", [run_id, config])
        return {int(row[0]) for row in rows}

    def write_entity_analysis(self, run_id: str, entity_rows: list[dict], analysis: dict) -> None:
        """A sample's entities and its done-marker, in one transaction, replacing an earlier analysis's."""
        with self.transaction() as cursor:
            cursor.execute("DELETE FROM entities WHERE run_id = ? AND sample_idx = ? AND config = ?",
                           [run_id, analysis["sample_idx"], analysis["config"]])
            if entity_rows:
                insert_rows(cursor, "entities", run_id, entity_rows)
            insert_rows(cursor, "entity_analyses", run_id, [analysis])

    def fact_analysed_samples(self, run_id: str, config: str) -> set[int]:
        return {int(row[0]) for row in self.rows(
            "SELECT sample_idx FROM fact_analyses WHERE run_id = ? AND config = ?", [run_id, config])}

    def write_fact_analysis(self, run_id: str, config: str, fact_rows: list[dict], change_rows: list[dict],
                            samples: list[int]) -> None:
        """Samples' facts and changes with their done-markers, in one transaction."""
        with self.transaction() as cursor:
            if fact_rows:
                insert_rows(cursor, "facts", run_id, fact_rows)
            if change_rows:
                insert_rows(cursor, "fact_changes", run_id, change_rows)
            insert_rows(cursor, "fact_analyses", run_id, [{"sample_idx": index, "config": config} for index in samples])

    def facts(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("facts", run_ids)

    def sample_fact_rows(self, run_id: str, sample_idx: int, config: str) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """One sample's stored facts (by text, in position order) and changes (by comparison, in their order) under
        `config`; None where the sample was not analysed under it."""
        keys = [run_id, int(sample_idx), config]
        if not self.rows("SELECT 1 FROM fact_analyses WHERE run_id = ? AND sample_idx = ? AND config = ?", keys):
            return None
        facts = self.frame("SELECT text_kind, kind, start_char, end_char, text, value, assertion FROM facts WHERE "
                           "run_id = ? AND sample_idx = ? AND config = ? ORDER BY text_kind, start_char, end_char, kind",
                           keys)
        changes = self.frame("SELECT text_kind, against, kind, start_char, end_char, was, now FROM fact_changes WHERE "
                             "run_id = ? AND sample_idx = ? AND config = ? ORDER BY text_kind, against, position", keys)
        return facts, changes

    def fact_changes(self, run_ids: list[str] | None = None) -> pd.DataFrame:
        return self._per_run("fact_changes", run_ids)

    def record_entity_verdicts(self, run_id: str, sample_idx: int, text_kind: str, starts: list[int], rater: str,
                               verdict: str) -> None:
        """One verdict on the mentions of a text starting at `starts`, in one transaction."""
        with self.transaction() as cursor:
            cursor.executemany("INSERT OR REPLACE INTO entity_verdicts VALUES (?, ?, ?, ?, ?, ?, ?)",
                               [[run_id, int(sample_idx), text_kind, int(start), rater, verdict, now()] for start in starts])

    def delete_entity_verdicts(self, run_id: str, sample_idx: int, text_kind: str, starts: list[int], rater: str) -> None:
        with self.transaction() as cursor:
            cursor.executemany("DELETE FROM entity_verdicts WHERE run_id = ? AND sample_idx = ? AND text_kind = ? "
                               "AND start_char = ? AND rater = ?",
                               [[run_id, int(sample_idx), text_kind, int(start), rater] for start in starts])

    def rater_entity_verdicts(self, rater: str, run_id: str | None = None, sample_idx: int | None = None) -> pd.DataFrame:
        """The mentions (run_id, sample_idx, text_kind, start_char) a rater gave a verdict, with it: every run's, or
        one sample's."""
        where, values = "rater = ?", [rater]
        if run_id is not None:
            where, values = where + " AND run_id = ? AND sample_idx = ?", values + [run_id, int(sample_idx)]
        return self.frame(
            f"SELECT run_id, sample_idx, text_kind, start_char, verdict FROM entity_verdicts WHERE {where}", values)

    def record_fact_verdict(self, run_id: str, sample_idx: int, text_kind: str, fact_kind: str, span: tuple[int, int],
                            fact_text: str, flagged: bool, rater: str, verdict: str) -> None:
        """A rater's verdict on one fact of a text; a later one by the same rater replaces it."""
        with self.transaction() as cursor:
            cursor.execute("INSERT OR REPLACE INTO fact_verdicts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           [run_id, int(sample_idx), text_kind, fact_kind, int(span[0]), int(span[1]), fact_text,
                            bool(flagged), rater, verdict, now()])

    def delete_fact_verdict(self, run_id: str, sample_idx: int, text_kind: str, fact_kind: str, start: int,
                            rater: str) -> None:
        with self.transaction() as cursor:
            cursor.execute("DELETE FROM fact_verdicts WHERE run_id = ? AND sample_idx = ? AND text_kind = ? AND "
                           "fact_kind = ? AND start_char = ? AND rater = ?",
                           [run_id, int(sample_idx), text_kind, fact_kind, int(start), rater])

    def fact_verdicts(self, rater: str | None = None, run_id: str | None = None, sample_idx: int | None = None) -> pd.DataFrame:
        """Verdicts on facts: every rater's, or one rater's, on every run or one sample."""
        where, values = ["TRUE"], []
        if rater is not None:
            where, values = where + ["rater = ?"], values + [rater]
        if run_id is not None:
            where, values = where + ["run_id = ?", "sample_idx = ?"], values + [run_id, int(sample_idx)]
        return self.frame(f"SELECT run_id, sample_idx, text_kind, fact_kind, start_char, end_char, fact_text, flagged, "
                          f"rater, verdict, created FROM fact_verdicts WHERE {' AND '.join(where)} ORDER BY created",
                          values)

    def entity_verdicts(self) -> pd.DataFrame:
        """Clinicians' verdicts joined with the entities they judge."""
        return self.frame(
            """SELECT v.rater, v.verdict, e.hallucinated, e.entity, e.similarity, e.run_id, e.sample_idx, e.text_kind,
                      e.start_char, e.config
               FROM entity_verdicts v JOIN entities e USING (run_id, sample_idx, text_kind, start_char)""")
