"""The Factuality-Weighted Score: FWS = α(Rel + FactAcc) + β·Coh, every aspect scaled to [0, 1].

Judge Likert scores are divided by 5 (the scale maximum), as the paper's Table 4 is computed.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from fwsapp.judge.summary import per_sample_scores
from fwsapp.data.tasks import task_label
from fwsapp.quality.registry import ASPECTS, column_label, column_tasks, stored_columns
from fwsapp.results.run_names import run_settings

DEFAULT_ALPHA, DEFAULT_BETA = 0.4, 0.2
LIKERT_MAX = 5.0

# The paper's weightings (its Table 5): name -> (α, β).
PRESETS = {
    "Coherence-heavy": (0.25, 0.5),
    "Equal": (0.33, 0.33),
    "Current": (0.4, 0.2),
    "Factuality-heavy 4:1": (0.44, 0.11),
    "Factuality-heavy 6:1": (0.46, 0.08),
}


def check_weights(alpha: float, beta: float) -> None:
    """The weights the pages' sliders allow, [0, 1] each: a negative one would reward what it weighs against, and a
    NaN would write an FWS of NaN into every table and a report JSON cannot parse."""
    for name, weight in (("α (--alpha)", alpha), ("β (--beta)", beta)):
        if not 0 <= weight <= 1:
            raise ValueError(f"The FWS weight {name} must be in [0, 1], not {weight}.")


def fws(coherence, relevance, factual_accuracy, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA):
    """Per-sample FWS from aspects already in [0, 1]; works on scalars, arrays and Series."""
    return alpha * (np.asarray(relevance, float) + np.asarray(factual_accuracy, float)) + beta * np.asarray(
        coherence, float
    )


def fws_from_likert(scores, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> np.ndarray:
    """Per-sample FWS from an (n, 3) array of judge scores [coherence, relevance, factual accuracy] on 1-5."""
    scaled = np.asarray(scores, float).reshape(-1, 3) / LIKERT_MAX
    return fws(scaled[:, 0], scaled[:, 1], scaled[:, 2], alpha, beta)


def ratio_weights(ratio: float) -> tuple[float, float]:
    """(α, β) with α:β = ratio ("factuality : coherence") and 2α + β = 1."""
    if ratio <= 0:
        raise ValueError("the factuality : coherence ratio must be positive")
    return ratio / (2 * ratio + 1), 1 / (2 * ratio + 1)


KINDS = ("watermarked", "unwatermarked")
def default_mapping() -> dict[str, str]:
    """Each aspect's default metric, from the registry's columns (`Column.default_for`): the column every task reads,
    then after '|' the one that replaces it for the tasks its metric is declared for. Today Coh = SimCSE to the
    reference, Rel = ROUGE-L (token F1 for QA), FactAcc = AlignScore or its stand-in. Coherence reads SimCSE to the
    reference, measured alike for both texts; the paper's SimCSE (watermarked against unwatermarked) has no value for
    the unwatermarked text, so it cannot stand for an aspect of both."""
    mapping = {}
    for aspect in ASPECTS:
        defaults = [column.name for _, column in stored_columns() if aspect in column.default_for]
        general = [name for name in defaults if not column_tasks(name)]
        specific = [name for name in defaults if column_tasks(name)]
        mapping[aspect] = "|".join(general[:1] + specific[:1])
    return mapping


def aspect_choices() -> dict[str, list[str]]:
    """The metrics each aspect may be read from (`Column.aspects`), its default first."""
    defaults = default_mapping()
    return {aspect: list(dict.fromkeys([defaults[aspect], *(column.name for _, column in stored_columns()
                                                              if aspect in column.aspects)]))
            for aspect in ASPECTS}


def source_label(source: str) -> str:
    """An Auto-FWS source as people read it: "rougeL|f1" is "ROUGE-L (F1 for Question answering)"."""
    general, *specific = source.split("|")
    return column_label(general) + "".join(
        f" ({column_label(name)} for {', '.join(map(task_label, column_tasks(name)))})" for name in specific)


def judge_aspects(judgments) -> pd.DataFrame:
    """Long table (run, sample, kind) -> aspects in [0, 1] from the judge's 1-5 scores (both orders averaged)."""
    samples = per_sample_scores(judgments)
    if samples.empty:
        return pd.DataFrame(columns=["run_id", "sample_idx", "kind", *ASPECTS])
    frames = [
        samples[["run_id", "sample_idx"]].assign(kind=kind, **{a: samples[f"{a}_{kind}"] / LIKERT_MAX for a in ASPECTS})
        for kind in KINDS
    ]
    return pd.concat(frames, ignore_index=True)


def metric_aspects(metrics, tasks: dict[str, str], mapping: dict[str, str] | None = None) -> pd.DataFrame:
    """Long table (run, sample, kind) -> aspects in [0, 1] from stored metrics, by the given mapping (default: the
    registry's). A source "a|b" reads b for the runs whose task b's metric is declared for, and a for the others.

    Samples lacking any mapped metric are left out, so every row has all three aspects. `metrics` are the values as
    `quality.scoring.read_values` gives them, one config per run and metric, so a second oracle never mixes in.
    This is the one Auto-FWS: the report, the FWS page and the agreement tables all start here.
    """
    if metrics.empty:
        return pd.DataFrame(columns=["run_id", "sample_idx", "kind", *ASPECTS])
    wide = metrics.pivot_table(index=["run_id", "sample_idx", "text_kind"], columns="metric",
                               values="value").reset_index()
    wide = wide.rename(columns={"text_kind": "kind"})
    task = wide.run_id.map(tasks)
    out = wide[["run_id", "sample_idx", "kind"]].copy()
    missing = pd.Series(index=wide.index, dtype=float)
    for aspect, source in (mapping or default_mapping()).items():
        general, *specific = source.split("|")
        values = wide.get(general, missing)
        for column in specific:
            values = values.where(~task.isin(column_tasks(column)), wide.get(column, missing))
        out[aspect] = values.clip(0, 1)
    return out.dropna(subset=list(ASPECTS))


def run_means(aspects, runs, detection=None) -> pd.DataFrame:
    """Mean of each aspect per run and text kind, with the sample count, the run's method, settings (`run_names`),
    model and task, and (when given) its detectability columns.

    FWS is linear in the aspects, so a run's mean FWS is the FWS of its mean aspects: the page computes
    these means once per database revision, and a slider move re-weights a few rows, not every sample.
    """
    columns = ["run_id", "kind", *ASPECTS, "n", "method", "settings", "model", "task", "params"]
    if aspects.empty:
        return pd.DataFrame(columns=columns + (list(detection.columns[1:]) if detection is not None else []))
    grouped = aspects.groupby(["run_id", "kind"], as_index=False)
    means = grouped[list(ASPECTS)].mean().merge(grouped.size().rename(columns={"size": "n"}), on=["run_id", "kind"])
    named = runs[["run_id", "method", "model", "task", "params"]].assign(settings=run_settings(runs).to_numpy())
    means = means.merge(named, on="run_id")
    if detection is not None:
        means = means.merge(detection, on="run_id", how="left")
    return means


def fws_by_run(means, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> pd.DataFrame:
    """`run_means` with each run's mean FWS added."""
    return means.assign(fws=fws(means.coherence, means.relevance, means.factual_accuracy, alpha, beta))


# The settings of the unwatermarked rows, which average the unwatermarked texts of a model's runs of a task.
POOLED_REFERENCE = "mean of the model's runs"

# The FWS tables' and the ranking's columns as the FWS page heads them, as the report heads its run columns.
HEADINGS = {"model": "Model", "task": "Task", "rank": "Rank", "method": "Method", "settings": "Settings", "fws": "FWS"}


def _with_reference(scored) -> pd.DataFrame:
    """Watermarked rows by run, unwatermarked rows relabelled as the 'Unwatermarked' reference."""
    plain = scored[scored.kind == "unwatermarked"].assign(method="Unwatermarked", settings=POOLED_REFERENCE)
    return pd.concat([plain, scored[scored.kind == "watermarked"]])


def aspect_layout(means) -> dict | None:
    """The α-free half of the paper's Table 4 for one source: each aspect's mean in the table's layout
    (rows model × method × settings, Unwatermarked first; columns tasks). A watermarked row is one run per task,
    never an average of runs; the unwatermarked row of a model and task averages over that model's runs of the task
    (`pooled_reference` names them). `weigh_layout` turns it into FWS for any α and β."""
    if means.empty:
        return None
    rows = _with_reference(means)
    wide = rows.groupby(["model", "method", "settings", "task"])[list(ASPECTS)].mean().unstack("task")
    keys = wide.index.to_frame(index=False)
    order = np.lexsort((keys.settings.to_numpy(), keys.method.to_numpy(), keys.method.ne("Unwatermarked").to_numpy(),
                        keys.model.to_numpy()))
    tasks = list(wide[ASPECTS[0]].columns)
    return {"keys": keys.iloc[order].reset_index(drop=True), "tasks": tasks,
            **{aspect: wide[aspect].to_numpy(dtype=float)[order] for aspect in ASPECTS}}


def weigh_layout(layout: dict | None, alpha: float, beta: float) -> pd.DataFrame:
    """A Table 4-layout FWS frame from `aspect_layout`: three array operations, whatever the sample count."""
    if layout is None:
        return pd.DataFrame()
    values = fws(layout["coherence"], layout["relevance"], layout["factual_accuracy"], alpha, beta)
    return pd.concat([layout["keys"], pd.DataFrame(values, columns=layout["tasks"])], axis=1)


def ratio_sweep(means, ratios) -> pd.DataFrame:
    """FWS per model, run (method and settings) and task along the factuality : coherence ratio (2α + β = 1), for the
    flip chart. Models and runs are never pooled: rankings flip within a model's runs."""
    frames = [_with_reference(fws_by_run(means, *ratio_weights(ratio))).assign(ratio=ratio) for ratio in ratios]
    if not frames or means.empty:
        return pd.DataFrame(columns=["ratio", "model", "method", "settings", "task", "fws"])
    return pd.concat(frames).groupby(["ratio", "model", "method", "settings", "task"], as_index=False).fws.mean()


def pooled_reference(means) -> pd.DataFrame:
    """Which runs each unwatermarked row averages: model, task and the run ids, for the page to say so."""
    plain = means[means.kind == "unwatermarked"]
    return plain.groupby(["model", "task"], as_index=False).run_id.agg(lambda ids: ", ".join(sorted(set(ids))))


def ranking(table) -> pd.DataFrame:
    """Methods ranked by FWS within each model and task (1 = best, ties share the better rank), from a
    Table 4-layout frame. Array arithmetic on a few dozen cells: it runs on every slider move."""
    columns = ["model", "task", "rank", "method", "settings", "fws"]
    if table.empty:
        return pd.DataFrame(columns=columns)
    tasks = [column for column in table.columns if column not in ("model", "method", "settings")]
    values = table[tasks].to_numpy(dtype=float)  # rows × tasks
    models = table.model.to_numpy()
    same_model = models[:, None] == models[None, :]
    # rank of row i in a task = 1 + rows of the same model with a strictly larger value there
    better = (values[None, :, :] > values[:, None, :]) & same_model[:, :, None]
    ranks = 1 + better.sum(axis=1)
    rows, cols = np.nonzero(~np.isnan(values))
    long = pd.DataFrame({"model": models[rows], "task": np.asarray(tasks, dtype=object)[cols], "rank": ranks[rows, cols],
                         "method": table.method.to_numpy()[rows], "settings": table.settings.to_numpy()[rows],
                       "fws": values[rows, cols]})
    return long.sort_values(["model", "task", "rank"], kind="stable")[columns].reset_index(drop=True)


def prepare_views(judge, auto) -> dict:
    """The α-free inputs of every FWS view, per source ("GPTJ", "Auto"): the Table 4 aspect layout, the
    watermarked runs (trade-off points) and each model's and task's unwatermarked mean aspects (its
    reference line: a 135M demo model's baseline is not a 7B model's).
    `judge` and `auto` are `run_means` (with detection) of the judge's and the metrics' aspects."""
    prepared = {}
    for source, means in (("GPTJ", judge), ("Auto", auto)):
        prepared[source] = {
            "layout": aspect_layout(means),
            "points": means[means.kind == "watermarked"].reset_index(drop=True),
            "reference": means[means.kind == "unwatermarked"].groupby(["model", "task"], as_index=False)[
                list(ASPECTS)].mean(),
        }
    return prepared


def tradeoff_points(prepared: dict, detect_column: str, alpha: float, beta: float):
    """One point per run (method × task × model): detectability against watermarked FWS, the Pareto front
    of each task over them, and each model's and task's unwatermarked FWS as the reference."""
    points = prepared["points"]
    points = points.assign(fws=fws(points.coherence, points.relevance, points.factual_accuracy, alpha, beta))
    points = points.dropna(subset=[detect_column, "fws"])
    reference = prepared["reference"]
    reference = reference.assign(fws=fws(reference.coherence, reference.relevance, reference.factual_accuracy,
                                         alpha, beta))[["model", "task", "fws"]]
    tasks = points.task.to_numpy()
    front = np.concatenate([pareto_indices(x, y) for x, y in (
        (np.where(tasks == task, points[detect_column].to_numpy(float), np.nan), points.fws.to_numpy(float))
        for task in pd.unique(tasks))]) if len(points) else np.array([], dtype=int)
    front = points.iloc[front]
    return points, front, reference


def shown_source(prepared: dict) -> str:
    """The FWS a view shows unless told otherwise: the judge's where a run has verdicts (by a judge that counts), else
    Auto, which needs no judge."""
    return "GPTJ" if prepared["GPTJ"]["layout"] is not None else "Auto"


def fws_views(prepared: dict, alpha: float, beta: float, detect_column: str = "auroc",
              tradeoff_source: str = "GPTJ") -> dict:
    """Every table and chart input of the FWS page that depends on α and β, from `prepare_views`' α-free
    parts: a few array operations per slider move, no grouping of samples and no model call."""
    gptj_table = weigh_layout(prepared["GPTJ"]["layout"], alpha, beta)
    auto_table = weigh_layout(prepared["Auto"]["layout"], alpha, beta)
    points, front, reference = tradeoff_points(prepared[tradeoff_source], detect_column, alpha, beta)
    ranking_source = shown_source(prepared)
    return {
        "gptj": gptj_table, "auto": auto_table,
        "ranking": ranking(gptj_table if ranking_source == "GPTJ" else auto_table),
        "ranking_source": ranking_source,
        "tradeoff": points, "front": front, "reference": reference,
    }


def pareto_front(points, x: str, y: str):
    """The points not dominated on (x, y), both larger-is-better, ordered by x."""
    return points.iloc[pareto_indices(points[x].to_numpy(float), points[y].to_numpy(float))]


def pareto_indices(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Positions of the undominated points (NaN x or y ignored), ordered by x: scanning from the largest x
    down, a point is on the front when its y beats every point seen so far."""
    valid = np.flatnonzero(~(np.isnan(x) | np.isnan(y)))
    order = valid[np.lexsort((-y[valid], -x[valid]))]
    running = np.maximum.accumulate(y[order])
    kept = order[np.r_[True, y[order][1:] > running[:-1]]] if len(order) else order
    return kept[np.argsort(x[kept], kind="stable")]
