"""Methods compared at equal strength (as WaterBench and EntroBench do): each method's strength parameter set so that it
reaches the same detectability, then quality, FWS and disease entities compared at those settings.

At default parameters a weaker watermark can look kinder to the facts simply because it is weaker. Here a target (TPR
0.9 at 1 % FPR after 64 tokens, say) is met by each method's sweep of its strength parameter (`MethodInfo.
strength_param`: δ, DiPmark's α, SynthID's depth). Runs that differ only in that parameter form one sweep. Each run's
TPR at T tokens (on the statistic fwsapp.detection.length keeps: a z or a p) uses the threshold its negatives give at that length
where they are enough (1/FPR of them reach T), else the nominal one. Runs at one strength (other seeds) are replicates,
read together: their mean TPR and quality. Along a sweep, ordered by strength, the first setting that reaches the target
is taken; where the one before falls short, the setting and every quality figure are interpolated
linearly in TPR between the two, and the table says so.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from fwsapp import percent
from fwsapp.watermark import methods
from fwsapp.detection.calibration import minimum_negatives
from fwsapp.detection.roc import oriented, threshold_at_fpr
from fwsapp.detection.length import RunCurves, detected, length_threshold, run_curves, score_at
from fwsapp.sample_size import MINIMUM, enough, not_enough

# Quality at each setting, read from a run's report entry (fwsapp.results.report): label -> path through the entry.
QUALITY = {
    "FWS (Auto)": ("quality", "fws_auto", "watermarked"),
    "FWS (judge)": ("judge", "fws", "watermarked"),
    "Unsupported entities %": ("entities", "hallucination_rate", "watermarked"),
    "Introduced entities per text": ("entities", "introduced_per_text", "watermarked"),
}


def headings(fpr: float, tokens: int) -> dict[str, str]:
    """The swept runs' and the matched settings' columns as the FWS page and `compare` head them (the frames keep the
    names code reads): the TPR says at which length and FPR it was read, and `basis` is where its threshold came from."""
    return {"method": "Method", "model": "Model", "task": "Task", "strength": "Strength parameter", "value": "Value",
            "run_id": "Run", "tpr": f"TPR after {tokens} tokens at {percent(fpr)} FPR", "basis": "Threshold",
            "setting": "Setting", "runs": "Runs with a TPR"}


def tpr_at_tokens(curves: RunCurves, fpr: float, tokens: int) -> tuple[float | None, str]:
    """The share of watermarked texts of at least `tokens` tokens detected after that many, at `fpr`: (TPR, basis)."""
    threshold = length_threshold(curves.method, curves.params, fpr)
    direction = threshold.direction
    positives = np.array([score_at(curve, tokens) for curve in curves.positives])
    negatives = np.array([score_at(curve, tokens) for curve in curves.negatives])
    positives, negatives = positives[~np.isnan(positives)], negatives[~np.isnan(negatives)]
    if not enough("rate", positives.size):
        return None, f"{not_enough(positives.size)}: watermarked texts of {tokens} tokens or more"
    if negatives.size >= minimum_negatives(fpr):
        threshold = threshold_at_fpr(oriented(negatives, direction), fpr)
        return float((oriented(positives, direction) > threshold).mean()), f"empirical ({negatives.size} negatives)"
    if not threshold.nominal:
        return None, f"not enough negatives (n = {negatives.size}) and no nominal threshold"
    return float(detected(positives, threshold).mean()), "nominal"


def _reported(entry: dict, path: tuple[str, ...]):
    value = entry
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


DEFAULT_TOKENS = 64  # T where every swept run's texts reach it; shorter texts set a shorter one (`default_tokens`)
TOKENS_STEP = 8  # T is a multiple of this, as the FWS page's field steps


def swept_curves(store, run_ids: list[str] | None = None):
    """(run, method entry, scores by length) of each watermark run whose method has a strength parameter and whose
    scores by length are stored: the runs a sweep is made of."""
    for run in store.runs().itertuples():
        if run_ids is not None and run.run_id not in run_ids:
            continue
        info = methods.info(run.method)
        if info.post_hoc or info.strength_param is None:
            continue
        curves = run_curves(store, run.run_id)
        if curves is not None:
            yield run, info, curves


def sweep_tprs(store, fpr: float, tokens: int, run_ids: list[str] | None = None) -> pd.DataFrame:
    """One row per swept run (`swept_curves`): its sweep (method, model, task and every other parameter), its strength,
    and its TPR after `tokens` with where the threshold came from. Free of the FWS weights, so the app caches it."""
    rows = []
    for run, info, curves in swept_curves(store, run_ids):
        tpr, basis = tpr_at_tokens(curves, fpr, tokens)
        fixed = {key: value for key, value in curves.params.items() if key not in (info.strength_param,
                                                                                    info.threshold_param)}
        rows.append({"method": run.method, "model": run.model, "task": run.task,
                     "sweep": f"{run.method} · {run.model} · {run.task} · {info.changed_params(fixed)}",
                     "strength": info.strength_param, "value": float(curves.params[info.strength_param]),
                     "run_id": run.run_id, "tpr": tpr, "basis": basis})
    return pd.DataFrame(rows, columns=["method", "model", "task", "sweep", "strength", "value", "run_id", "tpr",
                                       "basis"]).sort_values(["sweep", "value"], ignore_index=True)


def reached_tokens(store, run_ids: list[str] | None = None) -> int | None:
    """The most tokens that `MINIMUM['rate']` watermarked answers (what a TPR needs) of every swept run with that many
    reach, so that each has a TPR up to there; None where no swept run has that many answers, and no T gives one."""
    reached = []
    for _, _, curves in swept_curves(store, run_ids):
        lengths = sorted((len(curve) for curve in curves.positives), reverse=True)
        if enough("rate", len(lengths)):
            reached.append(lengths[MINIMUM["rate"] - 1])
    return min(reached, default=None)


def default_tokens(reached: int | None) -> int:
    """T where none is chosen: DEFAULT_TOKENS, or the longest multiple of TOKENS_STEP within `reached_tokens` where
    the answers are shorter. At 64 the paper's 200-token answers all have a TPR; answers of 32 new tokens had none."""
    if reached is None:
        return DEFAULT_TOKENS
    return max(TOKENS_STEP, min(DEFAULT_TOKENS, reached // TOKENS_STEP * TOKENS_STEP))


def tpr_advice(reached: int | None, tokens: int) -> str:
    """What gives runs a TPR after `tokens` where they have none (`reached`: their `reached_tokens`); empty where the
    length is not what they lack (negatives, a threshold)."""
    if reached is None:
        return f"Runs of more prompts give one: a TPR needs {MINIMUM['rate']} watermarked answers, and no run has them."
    if tokens > reached:
        return (f"Choose a T of {reached} or fewer: {MINIMUM['rate']} answers of each run reach {reached} tokens at "
                "most.")
    return ""


def no_tpr_reason(reached: int | None, tokens: int) -> str:
    """Why no swept run has a TPR after `tokens`, and what gives one."""
    return f"No swept run has a TPR after {tokens} tokens (each run's reason below). {tpr_advice(reached, tokens)}".strip()


def with_quality(tprs: pd.DataFrame, report: dict) -> pd.DataFrame:
    """The swept runs with each run's quality from the report (`fwsapp.results.report`, at its α and β)."""
    entries = {entry["run_id"]: entry for entry in report["runs"]}
    quality = {label: [_reported(entries.get(run_id, {}), path) for run_id in tprs.run_id]
               for label, path in QUALITY.items()}
    return tprs.assign(**quality)


def short_of(tpr: float, target: float) -> str:
    """A TPR below `target`, to two decimals or as many more as show it below: 0.895 against 0.9 read "0.90"."""
    for decimals in range(2, 7):
        shown = f"{tpr:.{decimals}f}"
        if float(shown) < target:
            return shown
    return f"{tpr:.6g}"


def strengths(runs: pd.DataFrame) -> pd.DataFrame:
    """A sweep's measured runs read per strength, weakest first: runs at one value are replicates (other seeds), so its
    TPR and each quality figure are their means (a figure missing from one of them is missing), with the runs' ids."""
    measured = runs.dropna(subset=["tpr"])
    quality = measured[list(QUALITY)].map(_number)
    return pd.concat([measured[["value", "tpr"]], quality], axis=1).groupby("value", sort=True).agg(
        **{column: (column, lambda values: values.mean(skipna=False)) for column in ["tpr", *QUALITY]}).join(
        measured.groupby("value").run_id.agg(lambda ids: tuple(sorted(ids))).rename("run_ids")).reset_index()


def matched(points: pd.DataFrame, target_tpr: float) -> pd.DataFrame:
    """Per sweep, the setting that reaches `target_tpr`: a swept strength, or a point interpolated between the last
    strength short of it and the first that reaches it; a sweep that never reaches it says so, with its best TPR, and
    one none of whose runs has a TPR (`runs` 0) says that, so no sweep drops out of the table unseen. `low_run` and
    `high_run` hold the run ids at the two strengths (the same where one is swept), `share` the way between them."""
    rows = []
    for sweep, runs in points.groupby("sweep", sort=True):
        group = strengths(runs)
        first = group.index[group.tpr >= target_tpr]
        parameter = runs.strength.iloc[0]
        base = {**runs.iloc[0][["method", "model", "task", "strength"]].to_dict(), "sweep": sweep,
                "runs": int(runs.tpr.notna().sum()), "low_run": None, "high_run": None, "share": math.nan}
        if group.empty:
            rows.append({**base, "value": math.nan, "tpr": math.nan, **{label: math.nan for label in QUALITY},
                         "setting": "not measured at this length: see the swept runs"})
            continue
        if first.empty:
            best = group.loc[group.tpr.idxmax()]
            rows.append({**base, "value": math.nan, "tpr": math.nan,
                         "setting": f"not reached: best TPR {short_of(best.tpr, target_tpr)} at "
                                    f"{parameter}={best.value:g}",
                         **{label: math.nan for label in QUALITY}})
            continue
        high = group.loc[first[0]]
        if first[0] == 0 or high.tpr == target_tpr:
            note = f"swept run{'s' if len(high.run_ids) > 1 else ''} {', '.join(high.run_ids)}" + (
                " (the weakest swept: a weaker one may reach it too)" if first[0] == 0 and high.tpr > target_tpr else "")
            rows.append({**base, "value": high.value, "tpr": high.tpr, "setting": note, "low_run": high.run_ids,
                         "high_run": high.run_ids, "share": 0.0, **{label: high[label] for label in QUALITY}})
            continue
        low = group.loc[first[0] - 1]
        share = (target_tpr - low.tpr) / (high.tpr - low.tpr)
        rows.append({**base, "value": low.value + share * (high.value - low.value), "tpr": target_tpr,
                     "setting": f"interpolated between {parameter}={low.value:g} and {high.value:g}",
                     "low_run": low.run_ids, "high_run": high.run_ids, "share": share,
                     **{label: _between(low[label], high[label], share) for label in QUALITY}})
    return pd.DataFrame(rows, columns=["method", "model", "task", "sweep", "strength", "value", "tpr", "setting", "runs",
                                       *QUALITY, "low_run", "high_run", "share"])


def on_tradeoff(table: pd.DataFrame, points: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """Where each matched setting sits on a trade-off chart of `points` (one row per run, by run_id): the mean x and y
    of its runs at each strength, interpolated as the setting is. Settings whose runs are not all among the points are
    left out."""
    placed = points.set_index("run_id")
    rows = []
    for row in table.dropna(subset=["low_run"]).itertuples():
        if {*row.low_run, *row.high_run} <= set(placed.index):
            low, high = (placed.loc[list(run_ids), [x, y]].astype(float).mean() for run_ids in (row.low_run, row.high_run))
            rows.append({"method": row.method, "task": row.task, "setting": row.setting,
                         x: _between(low[x], high[x], row.share), y: _between(low[y], high[y], row.share)})
    return pd.DataFrame(rows, columns=["method", "task", "setting", x, y])


def sweep_lines(points: pd.DataFrame, swept: pd.DataFrame, x: str, y: str) -> pd.DataFrame:
    """The vertices of the lines through runs on a trade-off chart (`points`: one row per run, with method, model and
    task), each `line` of two or more vertices in order of strength. A sweep (`swept`: `sweep_tprs`'s run ids, sweeps
    and values) is a line, and its runs at one strength (seeds, replicates) are one vertex, their mean x and y, as
    equal strength reads them and `on_tradeoff` places a setting: joined run by run, the line zigzagged between seeds
    and missed the setting placed at their mean. The runs of a method, model and task in no sweep (no scores by length)
    are one line, run by run, in order of x."""
    placed = points.merge(swept[["run_id", "sweep", "value"]].rename(columns={"value": "strength"}), on="run_id",
                          how="left")
    line = placed.sweep.fillna(placed.method + " · " + placed.model + " · " + placed.task)
    vertex = placed.strength.map(repr).where(placed.strength.notna(), "run " + placed.run_id)
    vertices = placed.assign(line=line, vertex=vertex).groupby(["line", "vertex"], as_index=False).agg(
        method=("method", "first"), model=("model", "first"), task=("task", "first"),
        strength=("strength", "first"), **{x: (x, "mean"), y: (y, "mean")})
    vertices = vertices[vertices.groupby("line").vertex.transform("size") > 1]
    return vertices.sort_values(["line", "strength", x]).drop(columns="vertex").reset_index(drop=True)


def _number(value) -> float:
    return math.nan if value is None or pd.isna(value) else float(value)


def _between(low, high, share: float) -> float:
    low, high = _number(low), _number(high)
    return low + share * (high - low)


def equal_strength(store, report: dict, target_tpr: float, fpr: float, tokens: int,
                   run_ids: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The swept points and the settings matched to the target, after checking the target."""
    check_target(target_tpr, fpr, tokens)
    points = with_quality(sweep_tprs(store, fpr, tokens, run_ids), report)
    return points, matched(points, target_tpr)


def check_target(target_tpr: float, fpr: float, tokens: int | None) -> None:
    """`tokens` None: T is read from the runs later (`default_tokens`)."""
    if not 0 < target_tpr <= 1:
        raise ValueError(f"The target TPR must be in (0, 1], not {target_tpr}.")
    if not 0 < fpr < 1:
        raise ValueError(f"The FPR must be in (0, 1), not {fpr}.")
    if tokens is not None and tokens < 1:
        raise ValueError(f"The number of tokens must be at least 1, not {tokens}.")
