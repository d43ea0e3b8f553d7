"""Streamlit glue: cached resources (store, models, jobs), cached queries, and safe text rendering.

Pages import from here and draw; they hold no SQL and no model code. Query results are cached per
store revision, so a page reload is instant and new rows show up as soon as a batch is written.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from fwsapp import render
from fwsapp.export import run_table
from fwsapp.entropy import token_values
from fwsapp.fws import judge_aspects, metric_aspects, ratio_sweep, run_means
from fwsapp.human import ratings, sample_items
from fwsapp.jobs import JobManager
from fwsapp.methods import POST_HOC, SCORE_DIRECTIONS
from fwsapp.judge.backends import make_backend
from fwsapp.judge.runner import JudgeSettings, estimate, plan_pairs
from fwsapp.judge.summary import aspect_means
from fwsapp.models import EMBEDDED_MODEL, LoadedModel, load_model
from fwsapp.paths import DEFAULT_DB
from fwsapp.report import build_report, detection_comparison as compare_detection, detection_frame, roc_frame
from fwsapp.watermark import explain
from fwsapp.store import Store


# Factuality : coherence ratios for the flip chart, from coherence-heavy 1:4 to factuality-heavy 8:1.
RATIOS = tuple(round(value, 3) for value in np.geomspace(0.25, 8, 41))


def runs_or_stop() -> pd.DataFrame:
    """Every run; a page with nothing to show says what to do and stops."""
    frame = runs(revision())
    if frame.empty:
        st.info("No runs yet: generate one on the Generate page, or import logs on the Import page "
                "(`python -m fwsapp generate` and `python -m fwsapp import` do the same headless).")
        st.stop()
    return frame


def db_path() -> Path:
    return Path(os.environ.get("FWSAPP_DB", DEFAULT_DB))


def store() -> Store:
    return _store(str(db_path()))


@st.cache_resource(show_spinner=False)
def _store(path: str) -> Store:
    return Store(path)


_loaded_models: dict[str, str] = {}


@st.cache_resource(show_spinner="Loading the model (the embedded model is converted once, about 30 s)…")
def model(name: str = EMBEDDED_MODEL) -> LoadedModel:
    loaded = load_model(name)
    _loaded_models[name] = loaded.description
    return loaded


def loaded_models() -> list[str]:
    """Descriptions ('name on device (dtype)') of the models this app process holds."""
    return list(_loaded_models.values())


def jobs() -> JobManager:
    return _jobs(str(db_path()))


@st.cache_resource(show_spinner=False)
def _jobs(path: str) -> JobManager:
    return JobManager(_store(path), model)


def revision() -> str:
    return store().revision()


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


@st.cache_data(show_spinner=False)
def report(revision_key: str, alpha: float, beta: float) -> dict:
    return build_report(store(), alpha=alpha, beta=beta)


@st.cache_data(show_spinner=False)
def judgments(revision_key: str) -> pd.DataFrame:
    return store().judgments()


@st.cache_data(show_spinner=False)
def metric_values(revision_key: str) -> pd.DataFrame:
    return store().metrics()


@st.cache_data(show_spinner=False)
def judge_means(revision_key: str) -> pd.DataFrame:
    return aspect_means(store().judgments())


@st.cache_data(show_spinner=False)
def judge_plan(revision_key: str, run_ids: tuple[str, ...], judge_model: str, swap: bool) -> dict:
    pairs, skipped = plan_pairs(store(), list(run_ids), judge_model, JudgeSettings(swap=swap))
    usage, cost = estimate(pairs, judge_model)
    return {"pairs": len(pairs), "skipped": skipped, "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens, "cost": cost}


def judge_backend_check(kind: str, judge_model: str | None, base_url: str | None, timeout: float,
                        api_key: str | None = None) -> str:
    loaded = model(judge_model or EMBEDDED_MODEL) if kind == "local" else None
    return make_backend(kind, judge_model, base_url, timeout=timeout, loaded=loaded, api_key=api_key).check()


def filter_verdicts(frame: pd.DataFrame, method: str, task: str, status: str, max_factual: float) -> pd.DataFrame:
    """Verdicts narrowed by the browser's filters; 'all' keeps everything for that filter."""
    keep = pd.Series(True, index=frame.index)
    for column, wanted in (("method", method), ("task", task), ("status", status)):
        if wanted != "all":
            keep &= frame[column] == wanted
    if max_factual < 5:
        factual = frame.scores_watermarked.map(lambda scores: None if _missing(scores) else scores[2])
        keep &= factual.notna() & (factual <= max_factual)
    return frame[keep].reset_index(drop=True)


def _missing(scores) -> bool:
    """NULL score arrays come back from DuckDB as None, NaN or pd.NA."""
    return scores is None or not hasattr(scores, "__len__")


def scores_text(scores) -> str:
    if _missing(scores):
        return "none (failed)"
    return " / ".join(f"{value:g}" for value in scores) + " (coherence / relevance / factual accuracy)"


def verdict_table(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "run": frame.run_id, "method": frame.method, "task": frame.task, "sample": frame.sample_idx,
        "judge": frame.judge_model, "A is": frame.watermarked_first.map({True: "watermarked", False: "unwatermarked"}),
        "status": frame.status, "watermarked": frame.scores_watermarked.map(_short_scores),
        "unwatermarked": frame.scores_unwatermarked.map(_short_scores), "reason": frame.reason,
    })


def _short_scores(scores) -> str:
    return "–" if _missing(scores) else ", ".join(f"{value:g}" for value in scores)


def verdict_label(row) -> str:
    return f"{row.method} · {row.task} · sample {row.sample_idx} · {row.judge_model} · {row.status}"


def sample_row(revision_key: str, run_id: str, sample_idx: int) -> dict:
    table = samples(revision_key, run_id)
    return table[table.sample_idx == sample_idx].iloc[0].to_dict()


@st.cache_data(show_spinner=False)
def fws_inputs(revision_key: str, mapping: tuple[tuple[str, str], ...]) -> dict:
    """Everything the FWS page re-weights on a slider move, loaded once per database revision."""
    db = store()
    runs_frame = db.runs()
    tasks = dict(zip(runs_frame.run_id, runs_frame.task))
    metrics_frame = db.metrics()
    judge = judge_aspects(db.judgments())
    auto = metric_aspects(metrics_frame, tasks, dict(mapping))
    detection = detection_frame(db)
    return {
        "runs": runs_frame, "metrics": metrics_frame,
        "judge_samples": judge, "auto_samples": auto,  # per sample, for agreement with human ratings
        "judge": run_means(judge, runs_frame, detection), "auto": run_means(auto, runs_frame, detection),
    }


@st.cache_data(show_spinner=False)
def ratio_sweep_cached(revision_key: str, mapping: tuple[tuple[str, str], ...], source: str) -> pd.DataFrame:
    inputs = fws_inputs(revision_key, mapping)
    return ratio_sweep(inputs["judge" if source == "GPTJ" else "auto"], RATIOS)


@st.cache_data(show_spinner=False)
def human_ratings(revision_key: str) -> pd.DataFrame:
    return ratings(store())


@st.cache_data(show_spinner=False)
def detection_comparison(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    db = store()
    runs_frame = db.runs()
    return compare_detection(runs_frame[runs_frame.run_id.isin(run_ids)], db.detections(list(run_ids)))


@st.cache_data(show_spinner=False)
def redetection_comparison(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    from fwsapp.redetect import set_summaries
    from fwsapp.report import redetection_comparison as comparison

    return comparison(set_summaries(store(), list(run_ids)))


@st.cache_data(show_spinner=False)
def roc_curves(revision_key: str, run_ids: tuple[str, ...]) -> pd.DataFrame:
    db = store()
    runs_frame = db.runs()
    return roc_frame(runs_frame[runs_frame.run_id.isin(run_ids)], db.detections(list(run_ids)))


@st.cache_data(show_spinner="Scoring the tokens…")
def token_flags(revision_key: str, run_id: str, sample_idx: int, kind: str, overrides: tuple = ()):
    """A stored text's detection with per-token flags, recomputed with the run's method and parameters
    (`overrides`: (name, value) pairs replacing some, such as the green-list generator)."""
    run = store().run(run_id)
    run["params"] = {**run["params"], **dict(overrides)}
    row = store().generations(run_id).set_index("sample_idx").loc[sample_idx]
    token_ids = row[f"{kind}_ids"]
    if token_ids is None or not hasattr(token_ids, "__len__"):
        raise ValueError(f"This run stores no {kind} tokens (post-hoc detectors generate no watermarked text).")
    lm = model(run["model"])
    context = lm.tokenizer(row.prompt)["input_ids"]
    return explain(run["method"], run["params"], lm, [int(token) for token in token_ids], context)


def latest_sweep() -> list[str] | None:
    """The run ids of the newest finished sweep, to preselect on the Detect page."""
    job = jobs().latest("sweep")
    return jobs().sweeps.get(job.key) if job is not None and job.finished else None


@st.cache_data(show_spinner=False)
def entropy_values(revision_key: str) -> pd.DataFrame:
    return token_values(store())


@st.cache_data(show_spinner=False)
def entity_rows(revision_key: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    return store().entities(), store().entity_analyses()


def job_status(kind: str, noun: str, body=None) -> None:
    """A background job's progress bar with Cancel, or its result, redrawn every second; `body(job)` draws
    more inside the same fragment. Reruns the page when the job ends, so its results show."""
    @st.fragment(run_every=1.0)
    def panel():
        job = jobs().latest(kind)
        if job is None:
            return
        if job.status == "failed":
            st.error(render.message(f"{job.label} failed: {job.message}. Finished work is kept; start it again to "
                                    "resume."))
        elif job.status == "cancelled":
            st.warning(f"{job.label} was cancelled after {job.done} of {job.total} {noun}; start it again to resume.")
        elif job.finished:
            st.success(job.message or "Done.")
        else:
            st.progress(job.fraction, text=f"{job.label}: {job.status}, {job.done} of {job.total} {noun}")
            if st.button("Cancel", key=f"cancel-{kind}"):
                job.cancel()
        if body is not None:
            body(job)
        if job.finished and st.session_state.get(f"{kind}_shown") != (job.key, job.status):
            st.session_state[f"{kind}_shown"] = (job.key, job.status)
            st.rerun()

    panel()


def samples_by_hallucination(entities: pd.DataFrame, analyses: pd.DataFrame) -> pd.DataFrame:
    """The analysed samples, most hallucinated entities first, with their counts."""
    counts = (entities.groupby(["run_id", "sample_idx"])
              .agg(hallucinated=("hallucinated", "sum"), introduced=("introduced", "sum"), entities=("entity", "size"))
              .reset_index())
    table = analyses[["run_id", "sample_idx", "method", "task"]].merge(counts, on=["run_id", "sample_idx"], how="left")
    if entities.empty or table.empty:
        return table.iloc[0:0]
    table = table.dropna(subset=["entities"]).fillna(0)
    return table.sort_values(["hallucinated", "introduced"], ascending=False).reset_index(drop=True)


def entity_sample_label(row) -> str:
    return (f"{row.method} · {row.task} · sample {int(row.sample_idx)} · {int(row.hallucinated)} hallucinated, "
            f"{int(row.introduced)} introduced")


def add_rating_items(run_id: str, fraction: float) -> int:
    return sample_items(store(), run_id, fraction)


def param_inputs(method: type, key_prefix: str, values: dict | None = None) -> dict:
    """One input per method parameter: a choice for named options, else a number bounded by its spec,
    each with its one-line help. `values` pre-fills them (a run's own parameters)."""
    params = {}
    defaults = {**method.defaults, **(values or {})}
    per_row = 4
    names = list(method.defaults)
    for start in range(0, len(names), per_row):
        for column, key in zip(st.columns(per_row), names[start:start + per_row]):
            spec, value = method.param_specs.get(key), defaults[key]
            help_text = f"{spec.help}; {spec.describe()}" if spec else None
            with column:
                if spec is not None and spec.choices:
                    params[key] = st.selectbox(key, spec.choices, index=spec.choices.index(value), help=help_text,
                                               key=f"{key_prefix}-{key}")
                elif isinstance(method.defaults[key], float):
                    params[key] = st.number_input(key, value=float(value), step=0.1, format="%.3f", help=help_text,
                                                  min_value=_bound(spec, "low", float), max_value=_bound(spec, "high", float),
                                                  key=f"{key_prefix}-{key}")
                else:
                    params[key] = int(st.number_input(key, value=int(value), step=1, help=help_text,
                                                      min_value=_bound(spec, "low", int),
                                                      max_value=_bound(spec, "high", int), key=f"{key_prefix}-{key}"))
    return params


def _bound(spec, side: str, kind: type):
    """A closed bound for an input; open bounds are left to the parameter check, which says what is wrong."""
    if spec is None or getattr(spec, side) is None or getattr(spec, f"open_{side}"):
        return None
    return kind(getattr(spec, side))


def score_name(method: str) -> str:
    """What a method's detection score is: a z-score, a p-value, or SynthID's mean g-value."""
    direction = SCORE_DIRECTIONS.get(method, "higher")
    return "p" if direction == "lower" else "mean g" if method == "SynthID" else "score" if method in POST_HOC else "z"


def run_label(run) -> str:
    return f"{run['method']} · {run['task']} · {run['model']} · n={run['samples_done']} · {run['run_id']}"
