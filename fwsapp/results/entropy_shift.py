"""The paper's entropy-shift analysis per task: the per-token entropies (`fwsapp.entities.entropy`) of the references,
the unwatermarked texts and each watermarked run, as density curves and shares per bin, each run a series named as
every page names it (`run_names`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fwsapp.entities.entropy import BINS, bin_shares
from fwsapp.results.run_names import generated_elsewhere, run_settings


def density(values, grid) -> np.ndarray:
    """Gaussian KDE (scipy) of non-negative values on a grid from 0, reflected at 0 (Silverman 1986, 3.10): an
    entropy is never below 0, and a plain KDE put the mass of the many near-certain tokens partly below it, so the
    curve fell to about half their density at 0 and rose in a false bump beside it. scipy has no boundary option."""
    from scipy.stats import gaussian_kde

    values = np.asarray(values, dtype=float)
    if len(values) < 2 or np.ptp(values) == 0:
        return np.zeros(len(grid))
    kde, grid = gaussian_kde(values), np.asarray(grid, dtype=float)
    return kde(grid) + kde(-grid)


def entropy_models(values, runs) -> list[str]:
    """The models whose next-token distributions the entropies of `runs` are of (`token_values`: one per run)."""
    return sorted(set(values[values.run_id.isin(set(runs.run_id))].entropy_model))


def stand_in_models(values, runs) -> list[str]:
    """The models whose entropies stand in for the generators of imported and served runs (not loaded here) among
    `runs`."""
    return sorted(set(values[values.run_id.isin(generated_elsewhere(runs))].entropy_model))


def series_values(values, runs, task: str):
    """Per-token entropies of one task labelled by series: 'reference', 'unwatermarked', or the watermarked run
    (its method and settings, `run_names`: two KGW runs that differ in δ are two series). The page gives it one
    model's runs at a time (two models' runs of one method and settings would be one series).

    Runs of several methods over the same prompts share their references, and their unwatermarked texts
    (generation reuses them): each such text is counted once per model, not once per run."""
    named = runs[["run_id", "method", "task", "model"]].assign(settings=run_settings(runs).to_numpy())
    own = values.merge(named, on="run_id")
    own = own[own.task == task]
    shared = own[own.text_kind != "watermarked"]
    texts = shared.groupby(["run_id", "sample_idx", "text_kind", "model"], sort=False).entropy.agg(tuple).reset_index()
    distinct = texts.drop_duplicates(["model", "sample_idx", "text_kind", "entropy"])[["run_id", "sample_idx", "text_kind"]]
    own = pd.concat([own[own.text_kind == "watermarked"], shared.merge(distinct, on=["run_id", "sample_idx", "text_kind"])],
                    ignore_index=True)
    return own.assign(series=series_names(own))


BASELINES = ("unwatermarked", "reference")


def series_names(frame) -> pd.Series:
    """The series each row of `frame` (text_kind, method and settings columns) belongs to: its text kind, or for a
    watermarked text its run's method and settings."""
    return frame.text_kind.where(frame.text_kind != "watermarked", frame.method + " · " + frame.settings)


def series_order(series) -> list[str]:
    """`series` in the order every chart and table of them keeps: the baselines, then the runs by name. Sorted as
    text, the baselines fell among the runs ('SynthID', 'reference', 'unwatermarked', 'vLLM-Gumbel'), and a chart
    that kept its rows' order listed them otherwise."""
    present = set(series)
    return [name for name in BASELINES if name in present] + sorted(present - set(BASELINES))


def _grouped(labelled):
    """(series, its rows) in `series_order`."""
    return [(series, labelled[labelled.series == series]) for series in series_order(labelled.series)]


def density_frame(values, runs, task: str, grid=None):
    """KDE curves per series for a task: columns series, entropy, density."""
    grid = np.linspace(0, 10, 201) if grid is None else grid
    frames = [pd.DataFrame({"series": series, "entropy": grid, "density": density(group.entropy, grid)})
              for series, group in _grouped(series_values(values, runs, task))]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["series", "entropy", "density"])


def bin_table(values, runs, task: str):
    """Percent of tokens per entropy bin and series, with the shift in percentage points from the unwatermarked texts
    and from the references (the paper's entropy-shift analysis). A watermarked series is held against the
    unwatermarked texts and references of its own runs, the same prompts at the same length: held against every run's,
    a sweep's 24-token runs read the shares of 96-token answers' later tokens as the watermark's doing (δ 4 moved 13
    points out of the high bin that way, and 0.8 into it against its own texts). The unwatermarked and reference rows
    pool every run's. None: the series' runs have no entropies of that baseline."""
    labelled = series_values(values, runs, task)
    rows = []
    for series, group in _grouped(labelled):
        own = labelled if series in BASELINES else series_values(values, runs[runs.run_id.isin(set(group.run_id))], task)
        row = {"series": series, "tokens": len(group), **bin_shares(group.entropy)}
        for baseline in BASELINES:
            base = bin_shares(own[own.series == baseline].entropy)
            for name in BINS:
                row[f"{name} shift vs {baseline} (pp)"] = None if base[name] is None else row[name] - base[name]
        rows.append(row)
    return pd.DataFrame(rows)
