"""What a run is called wherever runs sit side by side: its method, then what sets its parameters apart from the
method's defaults, then its id where two runs of one model, task and method still read alike.

Every table, legend and selector names runs this way, so two KGW runs that differ only in δ are two rows with δ in
their names, and two runs with the same settings (another seed, a rerun) are two rows with their ids: nothing is
averaged together unless a page says it pools, and which runs.
"""
from __future__ import annotations

import json

import pandas as pd

from fwsapp.data.tasks import task_label
from fwsapp.store import generated_here
from fwsapp.watermark import methods

IMPORTED = "imported"


def settings(method: str, params, imported: bool) -> str:
    """'delta=1', 'delta=2 (defaults)' (a method's strength is always named), 'defaults', or for an import 'imported'
    with what its file names recorded ('imported, delta=2, gamma=0.5'): the paper's settings, not ours."""
    params = json.loads(params) if isinstance(params, str) else (params or {})
    if imported:
        return ", ".join([IMPORTED, *(f"{key}={value:g}" for key, value in sorted(params.items()))])
    return methods.info(method).settings(params)


def run_settings(runs: pd.DataFrame) -> pd.Series:
    """Each run's settings label, indexed by run id, with the id added where the label alone is ambiguous: another
    run of the same model, task and method has the same settings."""
    if runs.empty:
        return pd.Series(dtype=object, index=pd.Index([], name="run_id"))
    labels = [settings(run.method, run.params, bool(run.imported)) for run in runs.itertuples()]
    frame = runs[["run_id", "model", "task", "method"]].assign(settings=labels)
    ambiguous = frame.duplicated(["model", "task", "method", "settings"], keep=False)
    named = frame.settings.where(~ambiguous, frame.settings + " · " + frame.run_id)
    return pd.Series(named.to_numpy(), index=pd.Index(frame.run_id, name="run_id"), name="settings")


def with_settings(frame: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """`frame` (with a run_id column) with each run's `settings` beside it."""
    return frame.assign(settings=frame.run_id.map(run_settings(runs)))


def run_label(run: dict) -> str:
    """A selector's label for one run: method and settings, task, model, size and id (ids make it unique)."""
    return (f"{run['method']} · {settings(run['method'], run['params'], bool(run['imported']))} · {task_label(run['task'])} · "
            f"{run['model']} · n={run['samples_done']} · {run['run_id']}")


def text_source(run) -> str:
    """Where a run's texts came from (`Store.run()`'s record or a `runs()` row): imported, served (a serving engine
    answered), or generated here."""
    return IMPORTED if run["imported"] else "generated" if generated_here(run) else "served"


def generated_elsewhere(runs: pd.DataFrame) -> set[str]:
    """The ids of the runs (`Store.runs()` rows) whose generator is not loaded here: imported or served."""
    return {run.run_id for _, run in runs.iterrows() if not generated_here(run)}


def elsewhere_sources(runs: pd.DataFrame) -> str:
    """Where the texts of those `runs` whose generator is not loaded here came from, in words: "imported", "served" or
    "imported and served" ("" where every one was generated here)."""
    return " and ".join(sorted({text_source(run) for _, run in runs.iterrows() if not generated_here(run)}))


def listing(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs (`Store.runs()` rows) as `runs` lists them for people: id, method and settings, model, task, where the
    texts came from, samples stored of those planned, status with its reason, and when it began."""
    source = [text_source(run) for _, run in runs.iterrows()]
    status = [f"{status}: {reason}" if pd.notna(reason) else status
              for status, reason in zip(runs.status, runs.status_reason)]
    return pd.DataFrame({"run": runs.run_id, "method": runs.method, "settings": runs.run_id.map(run_settings(runs)),
                         "model": runs.model, "task": runs.task, "source": source,
                         "samples": [f"{done} of {planned}" for done, planned in zip(runs.samples_done, runs.n)],
                         "status": status, "created": runs.created.dt.strftime("%Y-%m-%d %H:%M")})


def ready(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs (`Store.runs()` rows) whose texts are all stored: none still generating, none without a sample. Only
    these are a job's inputs, so one run still writing cannot fail a job for the others."""
    return runs[(runs.status != "running") & (runs.samples_done > 0)]
