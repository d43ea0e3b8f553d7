"""Query results cached per store revision (`st.cache_data`): a page reload is instant, and new rows show
up as soon as a write transaction bumps the revision. α and β never key a cache: FWS is applied after."""
from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from fwsapp import counted
from fwsapp.results.export import export_bytes, run_judges as export_judges, run_table
from fwsapp.entities.entropy import token_values
from fwsapp.results.fws import judge_aspects, metric_aspects, prepare_views, ratio_sweep, run_means
from fwsapp.human import study
from fwsapp.human.ratings import ratings
from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs
from fwsapp.judge.summary import aspect_means, counted_judgments, judges_label
from fwsapp.results.report import (
    calibration_frame,
    collect,
    detection_comparison as compare_detection,
    detection_frame,
    length_frames,
    roc_frame,
    weigh,
)
from fwsapp.detection.strength import check_target, matched, reached_tokens, sweep_tprs, with_quality
from fwsapp.results.paired import comparison_table
from fwsapp.quality.scoring import read_values
from fwsapp.results.tables import judge_drop_table
from fwsapp.store import generated_here
from fwsapp.ui.resources import db_path, model, store


# Factuality : coherence ratios for the flip chart, from coherence-heavy 1:4 to factuality-heavy 8:1.
RATIOS = tuple(round(value, 3) for value in np.geomspace(0.25, 8, 41))


@st.cache_data(show_spinner=False)
def runs(revision_key: str) -> pd.DataFrame:
    return store().runs()


@st.cache_data(show_spinner=False)
def detections(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    return store().detections(list(run_ids))


@st.cache_data(show_spinner=False)
def samples(revision_key: str, run_id: str) -> pd.DataFrame:
    """A run's samples with their scores; empty while a starting job has not created the run yet."""
    if run_id not in set(runs(revision_key).run_id):
        return pd.DataFrame()
    return run_table(store(), run_id)


@st.cache_data(show_spinner=False, max_entries=8)
def export(revision_key: str, run_id: str, fmt: str, judge: str | None = None) -> bytes:
    """A run's export file (`export_bytes`), with `judge`'s verdicts (None: the run's default judge's); a few kept, as
    each may run to megabytes."""
    return export_bytes(store(), run_id, fmt, judge)


@st.cache_data(show_spinner=False)
def run_judges(revision_key: str, run_id: str) -> list[str]:
    return export_judges(store(), run_id)


@st.cache_data(show_spinner=False)
def run_fit(revision_key: str, run_id: str) -> dict | None:
    """What the run's method fitted on its references (k-SemStamp's clusters), or None."""
    return store().run_fit(run_id)


@st.cache_data(show_spinner=False)
def report_parts(revision_key: str, include_smoke_tests: bool = False, judge: str | None = None) -> dict:
    """The report's α-free parts, built once per revision and judge (a smoke-test judge's verdicts counted only when
    asked; None: the default judge)."""
    return collect(store(), include_smoke_tests, judge)


def report(revision_key: str, alpha: float, beta: float, include_smoke_tests: bool = False,
           judge: str | None = None) -> dict:
    return weigh(report_parts(revision_key, include_smoke_tests, judge), alpha, beta)


@st.cache_data(show_spinner=False)
def judge_drops(revision_key: str, include_smoke_tests: bool = False, judge: str | None = None) -> pd.DataFrame:
    return judge_drop_table(report_parts(revision_key, include_smoke_tests, judge))


@st.cache_data(show_spinner=False)
def metric_names(revision_key: str) -> list[str]:
    from fwsapp.quality.registry import in_stored_order

    return in_stored_order(store().metrics().metric)


@st.cache_data(show_spinner=False)
def judgments(revision_key: str) -> pd.DataFrame:
    return store().judgments()


@st.cache_data(show_spinner=False)
def metric_values(revision_key: str) -> pd.DataFrame:
    """Per-sample metric values, each under the config the tables read (one oracle per run, the current versions)."""
    return read_values(store())


@st.cache_data(show_spinner=False)
def judge_means(revision_key: str) -> pd.DataFrame:
    from fwsapp.results.run_names import run_settings

    return aspect_means(store().judgments(), run_settings(store().runs()))


@st.cache_data(show_spinner=False)
def judge_plan(revision_key: str, run_ids: tuple[str, ...], backend: str, judge_model: str, swap: bool,
               retry_failed: bool = False) -> dict:
    plan = plan_pairs(store(), list(run_ids), judge_model, JudgeSettings(swap=swap, retry_failed=retry_failed))
    usage, cost = estimate(plan.pairs, judge_model, backend)
    return {"pairs": len(plan.pairs), "described": plan.described(), "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens, "cost": cost}


def sample_row(revision_key: str, run_id: str, sample_idx: int) -> dict:
    table = samples(revision_key, run_id)
    return table[table.sample_idx == sample_idx].iloc[0].to_dict()


@st.cache_data(show_spinner=False)
def fws_samples(revision_key: str, mapping: tuple[tuple[str, str], ...], include_smoke_tests: bool = False,
                judge: str | None = None) -> dict:
    """Per-sample aspects from the judge and the metrics, with the metrics themselves: α-free, loaded once
    per revision (and only where per-sample values are needed: agreement with human ratings). One judge's verdicts
    count (`judge`, else the default), a smoke-test judge's only where `include_smoke_tests` or named; `judges` names
    it."""
    db = store()
    runs_frame = db.runs()
    metrics_frame = read_values(db)
    counted = counted_judgments(db.judgments(), include_smoke_tests, judge)
    return {"judge": judge_aspects(counted), "judges": judges_label(counted),
            "auto": metric_aspects(metrics_frame, dict(zip(runs_frame.run_id, runs_frame.task)), dict(mapping)),
            "metrics": metrics_frame}


@st.cache_data(show_spinner=False)
def fws_means(revision_key: str, mapping: tuple[tuple[str, str], ...], include_smoke_tests: bool = False,
              judge: str | None = None) -> dict:
    """Each run's mean aspects (judge and metrics) with its detectability: all a slider move re-weights.
    FWS is linear in the aspects, so these few rows are enough for every α and β."""
    samples = fws_samples(revision_key, mapping, include_smoke_tests, judge)
    runs_frame = runs(revision_key)
    detection = detection_frame(store())
    return {"judge": run_means(samples["judge"], runs_frame, detection),
            "auto": run_means(samples["auto"], runs_frame, detection)}


@st.cache_data(show_spinner=False)
def fws_prepared(revision_key: str, mapping: tuple[tuple[str, str], ...], include_smoke_tests: bool = False,
                 judge: str | None = None) -> dict:
    """The α-free inputs of the FWS page's views (`fws.prepare_views`)."""
    means = fws_means(revision_key, mapping, include_smoke_tests, judge)
    return prepare_views(means["judge"], means["auto"])


@st.cache_data(show_spinner=False)
def ratio_sweep_cached(revision_key: str, mapping: tuple[tuple[str, str], ...], source: str,
                       include_smoke_tests: bool = False, judge: str | None = None) -> pd.DataFrame:
    return ratio_sweep(fws_means(revision_key, mapping, include_smoke_tests, judge)["judge" if source == "GPTJ" else "auto"],
                       RATIOS)


@st.cache_data(show_spinner=False)
def human_ratings(revision_key: str) -> pd.DataFrame:
    return ratings(store())


@st.cache_data(show_spinner=False)
def studies(revision_key: str) -> pd.DataFrame:
    return store().studies()


@st.cache_data(show_spinner=False)
def legacy_raters(revision_key: str) -> pd.DataFrame:
    return study.legacy_raters(store())


@st.cache_data(show_spinner=False)
def study_rater_progress(revision_key: str, study_id: str) -> pd.DataFrame:
    return study.rater_progress(store(), study.study(store(), study_id))


@st.cache_data(show_spinner=False)
def study_short_of_raters(revision_key: str, study_id: str) -> str | None:
    return study.short_of_raters(store(), study.study(store(), study_id))


@st.cache_data(show_spinner=False)
def study_item_progress(revision_key: str, study_id: str) -> pd.DataFrame:
    return study.item_progress(store(), study.study(store(), study_id))


@st.cache_data(show_spinner=False)
def study_ratings(revision_key: str, study_id: str) -> pd.DataFrame:
    return study.ratings(store(), study.study(store(), study_id))


@st.cache_data(show_spinner=False)
def detection_comparison(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    db = store()
    runs_frame = db.runs()
    return compare_detection(runs_frame[runs_frame.run_id.isin(run_ids)], db.detections(list(run_ids)))


@st.cache_data(show_spinner=False)
def redetection_comparison(revision_key: str, run_ids: tuple[str, ...]) -> tuple[pd.DataFrame, dict[str, dict]]:
    """The detection sets' table, and per imported run the agreement of a set under its own settings that does not
    reproduce its stored scores."""
    from fwsapp.detection.redetect import not_reproduced, set_summaries
    from fwsapp.results.report import redetection_comparison as comparison

    summaries = set_summaries(store(), list(run_ids))
    return comparison(summaries), not_reproduced(summaries)


@st.cache_data(show_spinner=False)
def calibration(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    db = store()
    runs_frame = db.runs()
    sets = db.detection_sets(list(run_ids))
    return calibration_frame(runs_frame[runs_frame.run_id.isin(run_ids)], db.detections(list(run_ids)), sets,
                             db.redetections(list(sets.set_id)))


@st.cache_data(show_spinner=False)
def watermark_coverage(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    from fwsapp.detection.coverage import coverage_frame

    return coverage_frame(store(), list(run_ids))


@st.cache_data(show_spinner=False)
def lengths(revision_key: str, run_ids: tuple[str, ...], fpr: float) -> dict:
    db = store()
    runs_frame = db.runs()
    return length_frames(db, runs_frame[runs_frame.run_id.isin(run_ids)], fpr)


@st.cache_data(show_spinner=False)
def length_predictions(revision_key: str, run_ids: tuple[str, ...], fpr: float) -> pd.DataFrame:
    from fwsapp.detection.predicted_length import prediction_table

    return prediction_table(store(), list(run_ids), fpr)


@st.cache_data(show_spinner=False)
def unpredicted_runs(revision_key: str, run_ids: tuple[str, ...]) -> list[str]:
    from fwsapp.detection.predicted_length import unpredicted_runs

    return unpredicted_runs(store(), list(run_ids))


@st.cache_data(show_spinner=False)
def strength_tprs(revision_key: str, fpr: float, tokens: int) -> pd.DataFrame:
    return sweep_tprs(store(), fpr, tokens)


@st.cache_data(show_spinner=False)
def strength_reach(revision_key: str) -> int | None:
    """The most tokens every swept run has a TPR at (`reached_tokens`): the FWS page's T opens within it."""
    return reached_tokens(store())


def equal_strength(revision_key: str, target_tpr: float, fpr: float, tokens: int, alpha: float, beta: float,
                   include_smoke_tests: bool = False, judge: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The swept runs and each sweep's setting at the target; the TPRs cached, the FWS weights applied after."""
    check_target(target_tpr, fpr, tokens)
    points = with_quality(strength_tprs(revision_key, fpr, tokens),
                          report(revision_key, alpha, beta, include_smoke_tests, judge))
    return points, matched(points, target_tpr)


@st.cache_data(show_spinner="Resampling the paired texts…")
def paired_comparison(revision_key: str, candidate: str, baseline: str, target_tpr: float, fpr: float, tokens: int,
                      alpha: float, beta: float, mapping: tuple[tuple[str, str], ...]) -> pd.DataFrame:
    """Two methods text by text (`fwsapp.results.paired`), at the page's target and weights."""
    return comparison_table(store(), candidate, baseline, target_tpr, fpr, tokens, alpha=alpha, beta=beta,
                            mapping=dict(mapping))


@st.cache_data(show_spinner=False)
def roc_curves(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    db = store()
    runs_frame = db.runs()
    return roc_frame(runs_frame[runs_frame.run_id.isin(run_ids)], db.detections(list(run_ids)))


@st.cache_data(show_spinner="Scoring the tokens…")
def token_flags(revision_key: str, run_id: str, sample_idx: int, kind: str, overrides: tuple = ()):
    """A stored text's detection with per-token flags, recomputed with the run's method and parameters
    (`overrides`: (name, value) pairs replacing some, such as the green-list generator)."""
    from fwsapp.watermark.factory import explain  # torch: imported when a text is first explained, not at first paint

    run = store().run(run_id)
    run["params"] = {**run["params"], **dict(overrides)}
    row = store().generations(run_id).set_index("sample_idx").loc[sample_idx]
    token_ids = row[f"{kind}_ids"]
    if token_ids is None or not hasattr(token_ids, "__len__"):
        raise ValueError(f"This run stores no {kind} tokens (post-hoc detectors generate no watermarked text).")
    token_ids = [int(token) for token in token_ids]
    if not generated_here(run):  # a serving engine's ids: read with its tokenizer, as its model is not here
        from fwsapp.models.tokenizers import load_tokenizer, run_tokenizer

        tokenizer = load_tokenizer(run_tokenizer(run["model"], run["tokenizer"]))
        return explain(run["method"], run["params"], None, token_ids, tokenizer.encode(row.prompt),
                       fitted=store().run_fit(run_id), tokenizer=tokenizer)
    lm = model(run["model"])
    context = lm.tokenizer(row.prompt)["input_ids"]
    return explain(run["method"], run["params"], lm, token_ids, context, fitted=store().run_fit(run_id))


@st.cache_data(show_spinner=False)
def unpaired_reason(revision_key: str, candidate: str, baseline: str, target_tpr: float, fpr: float, tokens: int) -> str:
    from fwsapp.results.paired import unpaired_reason as reason

    return reason(store(), candidate, baseline, target_tpr, fpr, tokens)


@st.cache_data(show_spinner=False)
def no_equal_strength(revision_key: str, candidate: str, baseline: str, tokens: int) -> str:
    from fwsapp.results.paired import no_equal_strength as reason

    return reason(store(), candidate, baseline, tokens)


@st.cache_data(show_spinner=False)
def entropy_values(revision_key: str) -> pd.DataFrame:
    return token_values(store())


@st.cache_data(show_spinner=False)
def entity_rows(revision_key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    from fwsapp.entities.introduced import analysed_entities

    return analysed_entities(store())


@st.cache_data(show_spinner=False)
def perplexity_plan(revision_key: str, run_ids: tuple[str, ...], oracle: str | None) -> pd.DataFrame:
    from fwsapp.quality.scoring import perplexity_plan as plan

    return plan(store(), list(run_ids), oracle)


@st.cache_data(show_spinner=False)
def missing_model_free_work(revision_key: str, run_ids: tuple[str, ...]):
    from fwsapp.quality.scoring import missing_work

    return missing_work(store(), list(run_ids))


@st.cache_data(show_spinner=False, ttl=60)
def setup_checks() -> pd.DataFrame:
    """The doctor's checks for the sidebar, refreshed at most once a minute (free memory changes)."""
    from dataclasses import asdict

    from fwsapp.orchestration.doctor import checks

    return pd.DataFrame([asdict(check) for check in checks(db_path(), store())])


@st.cache_data(show_spinner=False)
def grid_spec(source: str, text: str, uploaded: bool):
    """A spec, checked (grid.SpecError otherwise). A shipped file is read from its path (its datasets are relative
    to it); `text` keys the cache, so an edited file is read again."""
    from fwsapp.orchestration.grid import load_spec

    return load_spec(source, text if uploaded else None)


@st.cache_data(show_spinner=False)
def grid_plan(revision_key: str, source: str, text: str, uploaded: bool) -> pd.DataFrame:
    """A spec's dry run: its runs, what is stored, the units still to generate."""
    from fwsapp.orchestration.grid import plan

    return plan(grid_spec(source, text, uploaded), store())


@st.cache_data(show_spinner=False)
def coverage(revision_key: str) -> dict:
    """The Home page's counts; a run counts as judged by a judge's verdicts, not the embedded model's smoke test (which
    FWS and the report leave out): "Every run is … judged" stood beside "FWS (judge: no verdicts yet)". It counts as
    analysed by a disease recognizer as it is now, not an earlier version's analysis (after an upgrade, "Every run is
    … analysed" stood beside Table 7 by the recognizer before). A run counts as scored with every metric the Quality
    page computes when it opens; `lacking` names those some run has no value of (an import brings ROUGE and F1: "6 runs
    have no quality metrics yet" stood beside its ROUGE)."""
    from fwsapp.entities.recognizers import current_labels
    from fwsapp.judge.summary import SMOKE_TEST_JUDGES
    from fwsapp.quality.registry import METRICS, lacking_model_free

    db = store()
    names = db.metric_names()
    lacking = [lacking_model_free(run.task, names.get(run.run_id, set())) for run in db.runs().itertuples()]
    missing = {label for labels in lacking for label in labels}
    return {**db.coverage(tuple(sorted(SMOKE_TEST_JUDGES)), current_labels("disease")),
            "scored": sum(not labels for labels in lacking),
            "lacking": [entry.label for entry in METRICS if entry.label in missing]}


def next_step(state: dict) -> tuple[str, str, str]:
    """(page, link label, why) of the step this database's state calls for next."""
    if not state["runs"]:
        return "pages/playground.py", "Try a watermark on your own prompt", "The database is empty."
    if state["scored"] < state["runs"]:
        return ("pages/quality.py", "Compute the quality metrics",
                f"{counted(state['runs'] - state['scored'], 'run lacks', 'runs lack')} {', '.join(state['lacking'])}.")
    if state["analysed"] < state["runs"]:
        return ("pages/entropy.py", "Analyse entities and entropy",
                f"{counted(state['runs'] - state['analysed'], 'run is', 'runs are')} not analysed yet.")
    if state["judged"] < state["runs"]:
        return ("pages/judge.py", "Judge the pairs",
                f"{counted(state['runs'] - state['judged'], 'run has', 'runs have')} no verdicts yet (the embedded "
                "model's smoke-test verdicts do not count).")
    return "pages/fws.py", "Compare methods by FWS", "Every run is scored, analysed and judged."


@st.cache_data(show_spinner=False)
def judged_run_ids(revision_key: str) -> set[str]:
    """Runs with at least one parsed verdict."""
    return set(store().judgments().query("status == 'ok'").run_id)


@st.cache_data(show_spinner=False)
def robustness(revision_key: str) -> pd.DataFrame:
    """Per run × attack set × detection set, what the attack did to detection and to the text (robustness.py)."""
    from fwsapp.robustness.attack_sets import summary_frame

    return summary_frame(store())


@st.cache_data(show_spinner=False)
def attacked_samples(revision_key: str, attack_set_id: str) -> pd.DataFrame:
    """An attack set's texts beside the clean watermarked texts they came from."""
    db = store()
    attacked = db.attacked_texts([attack_set_id])
    if attacked.empty:
        return attacked
    clean = db.generations(attacked.run_id.iloc[0])[["sample_idx", "watermarked_text"]]
    return attacked.merge(clean, on="sample_idx")


@st.cache_data(show_spinner=False)
def mention_spans(recognizer: str, texts: tuple[str, ...]) -> list[list[tuple[int, int]]]:
    """Each text's mentions (character spans) by a registered recognizer of any kind, for highlighting."""
    from fwsapp.entities.recognizers import load_recognizer

    return [[(entity.start, entity.end) for entity in found] for found in load_recognizer(recognizer).find_many(list(texts))]


@st.cache_data(show_spinner=False)
def tokenizer_problem(name: str | None) -> str | None:
    """Why a tokenizer cannot be had here (`models.tokenizers.tokenizer_problem`), once per name."""
    from fwsapp.models.tokenizers import tokenizer_problem as problem

    return problem(name)


@st.cache_data(show_spinner="Finding the clinical facts…", max_entries=64)
def sample_facts(revision_key: str, run_id: str, sample_idx: int):
    """One sample's clinical facts and their changes (`fwsapp.entities.fact_review`): those the run's analysis stored
    with the default recognizers, else found once per sample."""
    from fwsapp.entities.fact_review import sample_facts as found, stored_sample_facts
    from fwsapp.entities.facts import FactFinder

    row = sample_row(revision_key, run_id, sample_idx)
    texts = {"watermarked": row.get("watermarked_text"), "unwatermarked": row.get("unwatermarked_text"),
             "reference": row.get("reference")}
    finder = FactFinder()
    return stored_sample_facts(store(), run_id, sample_idx, texts, finder.config) or found(texts, finder)
