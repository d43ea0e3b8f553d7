"""The paper's tables, built from the report: pure functions from the report dict to DataFrames.

Table 1: detection and quality. Table 2: ROUGE, F1 and factual consistency. Table 4: FWS, Auto and GPTJ.
The judge drop-% table (the paper's appendix). Rendered as Markdown or as LaTeX table fragments.
"""
from __future__ import annotations

from datetime import datetime, timezone

import pandas as pd

from fwsapp.data.tasks import TASKS
from fwsapp.detection.roc import interval_label, tpr_label
from fwsapp.judge.summary import judge_name

UNWATERMARKED = "Unwatermarked"


def _get(block: dict | None, *keys):
    for key in keys:
        if block is None:
            return None
        block = block.get(key)
    return block


def _reference_rows(report: dict, make_row) -> list[dict]:
    """One unwatermarked row per (model, task): the first run's unwatermarked values stand for it, and its
    Settings say which run that is."""
    rows, seen = [], set()
    for run in report["runs"]:
        key = (run["model"], run["task"])
        if key not in seen:
            seen.add(key)
            rows.append({**make_row(run), "Settings": reference_settings(run)})
    return rows


def reference_settings(run: dict) -> str:
    return f"texts of run {run['run_id']}"


def _named(run: dict, method: str | None = None) -> dict:
    """The columns that say which run a row is: model, task, method and what sets the run apart (`run_names`)."""
    return {"Model": run["model"], "Task": run["task"], "Method": method or run["method"], "Settings": run["settings"]}


def runs_table(report: dict) -> pd.DataFrame:
    """Where every number below comes from: each run's source, sample count, AUROC with its interval, the
    judge's successes and failures, and the perplexity oracle."""
    def interval(run):
        return interval_label(run["detection"]) if run.get("detection") else None

    rows = [{
        **_named(run), "Run": run["run_id"],
        "Source": _source(run), "n": run["n"],
        "AUROC": _get(run, "detection", "auroc"), "AUROC 95% CI": interval(run),
        "Judged": _get(run, "judge", "n_judged"), "Judge failed": _get(run, "judge", "n_failed"),
        "Judge unreachable": _get(run, "judge", "n_unreachable"),
        "Judge": ", ".join(map(judge_name, _get(run, "judge", "judge_models") or [])) or None,
        "PPL oracle": _ppl_oracle(run),
    } for run in report["runs"]]
    if not rows:
        return pd.DataFrame(rows)
    # Counts stay whole numbers where some runs have none (no judge yet).
    return _ordered(rows).astype({"n": "Int64", "Judged": "Int64", "Judge failed": "Int64", "Judge unreachable": "Int64"})


def _source(run: dict) -> str:
    return "imported" if run["imported"] else "generated"


def _ppl_oracle(run: dict) -> str | None:
    """The model a run's perplexity was read under; None while it has none."""
    return (_get(run, "quality", "configs", "ppl") or "").removeprefix("oracle=") or None


def table1(report: dict) -> pd.DataFrame:
    """Detection (AUROC, TPR at FPR) and quality (PPL, SimCSE similarity to the unwatermarked text)."""
    rows = [
        {
            **_named(run),
            "AUROC": _get(run, "detection", "auroc"),
            **{f"TPR@{label}": tpr_label(run["detection"], key) if run.get("detection") else None
               for label, key in (("0%", "0"), ("1%", "0.01"), ("5%", "0.05"))},
            "PPL": _get(run, "quality", "ppl", "watermarked"),
            "SimCSE": _get(run, "quality", "simcse", "watermarked"),
        }
        for run in report["runs"]
    ]
    rows += _reference_rows(report, lambda run: {
        **_named(run, UNWATERMARKED),
        "PPL": _get(run, "quality", "ppl", "unwatermarked"),
        # SimCSE is the watermarked text's similarity to this one: none of its own.
        "SimCSE": None,
    })
    return _ordered(rows)


def table2(report: dict) -> pd.DataFrame:
    """ROUGE-2 and ROUGE-L (F1 for QA) against the reference, and the factual-consistency score."""
    def row(run, kind, method):
        return {
            **_named(run, method),
            "ROUGE-2": _get(run, "quality", "rouge2", kind),
            "ROUGE-L": _get(run, "quality", "rougeL", kind),
            "F1": _get(run, "quality", "f1", kind),
            "Factuality": _get(run, "quality", "factuality", kind),
        }

    rows = [row(run, "watermarked", run["method"]) for run in report["runs"]]
    rows += _reference_rows(report, lambda run: row(run, "unwatermarked", UNWATERMARKED))
    return _ordered(rows)


def table4(report: dict) -> pd.DataFrame:
    """FWS per method × task, Auto (metrics) and Judge (the paper's GPTJ: whichever judge the report counts, named in
    the table's title), with the unwatermarked reference row. One row per
    model, method and settings: runs are never averaged together (a row's cells are its runs of each task)."""
    def row(run, kind, method):
        return {
            **_named(run, method),
            "Auto": _get(run, "quality", "fws_auto", kind), "Judge": _get(run, "judge", "fws", kind),
        }

    rows = [row(run, "watermarked", run["method"]) for run in report["runs"]]
    # The unwatermarked row of a model: its first run of each task, named in the table's caption, not per cell.
    rows += [{**reference, "Settings": ""} for reference in
             _reference_rows(report, lambda run: row(run, "unwatermarked", UNWATERMARKED))]
    long = pd.DataFrame(rows)
    wide = long.pivot_table(index=["Model", "Method", "Settings"], columns="Task", values=["Auto", "Judge"],
                            aggfunc="first", dropna=False)
    wide = wide.swaplevel(axis=1).sort_index(axis=1, level=0, key=lambda level: level.map(_task_order))
    wide.columns = [f"{TASKS[task].label} {source}" for task, source in wide.columns]
    wide = wide.dropna(how="all").reset_index()  # no rows for model × method combinations that were never run
    return wide.sort_values(["Model", "Method", "Settings"],
                            key=lambda column: column.map(_method_order) if column.name == "Method" else column)


def judge_drop_table(report: dict) -> pd.DataFrame:
    rows = [
        {
            **_named(run),
            "Coherence drop %": _get(run, "judge", "drop_pct", "coherence"),
            "Relevance drop %": _get(run, "judge", "drop_pct", "relevance"),
            "Factual accuracy drop %": _get(run, "judge", "drop_pct", "factual_accuracy"),
        }
        for run in report["runs"]
        if run.get("judge")
    ]
    return _ordered(rows) if rows else pd.DataFrame(rows)


def _task_order(task: str) -> int:
    return list(TASKS).index(task) if task in TASKS else len(TASKS)


def _method_order(method: str) -> str:
    return "" if method == UNWATERMARKED else method


def _ordered(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["_task"] = frame.Task.map(_task_order)
    frame["_method"] = frame.Method.map(_method_order)
    return frame.sort_values(["Model", "_task", "_method", "Settings"]).drop(columns=["_task", "_method"]).reset_index(drop=True)


TABLES = {
    "Runs: source, n, intervals, judge and oracle": runs_table,
    "Table 1: detection and quality": table1,
    "Table 2: ROUGE, F1 and factual consistency": table2,
    "Table 4: FWS (Auto and judge)": table4,
    "Judge drop %": judge_drop_table,
}


def _cell(value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return "–"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def to_markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(_cell(value).replace("|", "\\|") for value in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


def to_latex(frame: pd.DataFrame, caption: str) -> str:
    """A table fragment (table + tabular, booktabs rules); text is escaped for LaTeX."""
    tabular = frame.to_latex(index=False, escape=True, na_rep="--", float_format="%.3f")
    return "\n".join(["\\begin{table}[t]", "\\centering", f"\\caption{{{latex_escape(caption)}}}", tabular.strip(), "\\end{table}"])


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "α": r"$\alpha$", "β": r"$\beta$", "·": r"$\cdot$",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(char, char) for char in text)


def weights_line(report: dict) -> str:
    """The FWS weights every FWS figure of the report was computed with."""
    return f"FWS = α(Rel + FactAcc) + β·Coh with α = {report['alpha']:g}, β = {report['beta']:g}"


def report_tables(report: dict) -> list[tuple[str, pd.DataFrame]]:
    """(title, table) of every table with rows, as the Report page and the exports show them: Table 4's title
    names the FWS weights its values were computed with."""
    tables = []
    for title, build in TABLES.items():
        frame = build(report)
        if not frame.empty:
            if build is table4:  # names its weights and its judge: no figure says 'GPT' of another judge
                title = (f"Table 4: FWS (Auto and judge: {report.get('judges', 'no judge')}), α = {report['alpha']:g}, "
                         f"β = {report['beta']:g}")
            tables.append((title, frame))
    return tables


def provenance(report: dict, when: datetime | None = None) -> str:
    """Where the numbers come from: the fwsapp version, the time, the database and its runs."""
    from fwsapp import __version__

    when = when or datetime.now(timezone.utc)
    runs = [run["run_id"] for run in report["runs"]]
    return (f"fwsapp {__version__}, {when:%Y-%m-%d %H:%M} UTC; database {report.get('database', 'unnamed')}; "
            f"{len(runs)} run{'s' if len(runs) != 1 else ''}: {', '.join(runs) or 'none'}")


def render(report: dict, fmt: str, when: datetime | None = None) -> str:
    """Every table as Markdown or LaTeX fragments. Markdown, a document of its own, begins with a title, the
    provenance (version, time, database, runs) and the FWS weights."""
    parts = [f"# fwsapp report: watermarking and medical factuality\n\n{provenance(report, when)}.\n\n"
             f"{weights_line(report)}.\n"] if fmt == "markdown" else []
    parts += [f"## {title}\n\n{to_markdown(frame)}\n" if fmt == "markdown" else to_latex(frame, title)
              for title, frame in report_tables(report)]
    return "\n\n".join(parts) + "\n"


# Quality (the paper's Tables 1 and 2 for one task): which direction is better per column.
LOWER_IS_BETTER = {"PPL"}


# What a quality row is about rather than a measurement of it: never bolded or differenced.
PROVENANCE_COLUMNS = ("Model", "Method", "Settings", "n", "source", "PPL oracle")


def quality_table(report: dict, task: str) -> pd.DataFrame:
    """One row per method (and the unwatermarked reference) for a task: PPL, SimCSE, ROUGE-2,
    ROUGE-L (F1 for QA), and factual consistency under its own name."""
    runs = [run for run in report["runs"] if run["task"] == task]
    name = next((_get(run, "quality", "factuality", "name") for run in runs if _get(run, "quality", "factuality", "name")), None)
    factual_label = name or "Factual consistency"

    def row(run, kind, method):
        values = {
            "Model": run["model"], "Method": method, "Settings": run["settings"],
            "PPL": _get(run, "quality", "ppl", kind), "SimCSE": _get(run, "quality", "simcse", kind),
            "SimCSE to ref.": _get(run, "quality", "simcse_reference", kind),
            "ROUGE-2": _get(run, "quality", "rouge2", kind),
        }
        if task == "qa":
            values["F1"] = _get(run, "quality", "f1", kind)
        else:
            values["ROUGE-L"] = _get(run, "quality", "rougeL", kind)
        values[factual_label] = _get(run, "quality", "factuality", kind)
        # Where the numbers come from, after them, so the measurements fit a 1,400 px page. Perplexity is only
        # comparable under one oracle: say whose it is.
        values.update({"n": run["n"], "source": _source(run), "PPL oracle": _ppl_oracle(run)})
        return values

    rows = [row(run, "watermarked", run["method"]) for run in runs]
    rows += _reference_rows({"runs": runs}, lambda run: row(run, "unwatermarked", UNWATERMARKED))
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame["_method"] = frame.Method.map(_method_order)
    return frame.sort_values(["Model", "_method", "Settings"]).drop(columns="_method").reset_index(drop=True)


def best_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """True where a cell holds its column's best value (per model): lowest PPL, highest otherwise. Where every row
    of a model has the same value (ROUGE-2 0.000 throughout) none is best."""
    best = pd.DataFrame(False, index=frame.index, columns=frame.columns)
    for column in frame.columns:
        if column in PROVENANCE_COLUMNS or not pd.api.types.is_numeric_dtype(frame[column]):
            continue
        for _, group in frame.groupby("Model"):
            values = group[column].dropna()
            if values.nunique() < 2:
                continue
            target = values.min() if column in LOWER_IS_BETTER else values.max()
            best.loc[values.index[values == target], column] = True
    return best


def difference_from_unwatermarked(frame: pd.DataFrame) -> pd.DataFrame:
    """Each watermarked row minus its model's unwatermarked row, per numeric column; columns with no
    difference anywhere (SimCSE, whose baseline is the unwatermarked text) are left out."""
    numeric = [column for column in frame.columns if column not in PROVENANCE_COLUMNS]
    rows = []
    for model, group in frame.groupby("Model"):
        reference = group[group.Method == UNWATERMARKED]
        if reference.empty:
            continue
        for _, current in group[group.Method != UNWATERMARKED].iterrows():
            rows.append({"Model": model, "Method": current.Method, "Settings": current.Settings,
                         **{column: _minus(current[column], reference.iloc[0][column]) for column in numeric}})
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def _minus(value, reference):
    if value is None or reference is None or pd.isna(value) or pd.isna(reference):
        return None
    return float(value) - float(reference)


def quality_latex(frame: pd.DataFrame, caption: str) -> str:
    """The quality table as a LaTeX fragment with each column's best value in bold."""
    best = best_cells(frame)
    shown = frame.astype(object).copy()
    for column in frame.columns:
        for index in frame.index:
            value = frame.at[index, column]
            if isinstance(value, float) and not pd.isna(value):
                text = f"{value:.3f}"
                shown.at[index, column] = f"\\textbf{{{text}}}" if best.at[index, column] else text
            elif value is None or (isinstance(value, float) and pd.isna(value)):
                shown.at[index, column] = "--"
            else:
                shown.at[index, column] = latex_escape(str(value))
    shown.columns = [latex_escape(column) for column in shown.columns]
    tabular = shown.to_latex(index=False, escape=False)
    return "\n".join(["\\begin{table}[t]", "\\centering", f"\\caption{{{latex_escape(caption)}}}", tabular.strip(), "\\end{table}"])
