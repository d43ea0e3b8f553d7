"""FWS: the Factuality-Weighted Score, live under α and β, with where method rankings flip, the
detectability trade-off, and agreement with clinicians' ratings."""
from typing import NamedTuple

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import streamlit as st

from fwsapp import counted, percent
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui import render as markup
from fwsapp.data.tasks import TASKS, task_label, tasks_named
from fwsapp.quality.registry import ASPECT_LABELS, column_label
from fwsapp.results.fws import (HEADINGS, POOLED_REFERENCE, PRESETS, aspect_choices, fws_views, pooled_reference, ratio_weights,
                                shown_source, source_label)
from fwsapp.human.agreement import friedman_nemenyi, sensitivity_table
from fwsapp.human.ratings import DEFAULT_FRACTION, sample_items
from fwsapp.judge.backends import LOCAL_DEMO_NOTE, local_duration
from fwsapp.judge.runner import JudgeSettings
from fwsapp.judge.summary import counted_judges, counted_judgments, indiscriminate_judges, smoke_test_judges
from fwsapp.judge.registry import IN_PROCESS_BACKEND
from fwsapp.results.export import csv_bytes
from fwsapp.results.report import DETECTABILITY
from fwsapp.sample_size import MINIMUM, not_enough
from fwsapp.detection.strength import (DEFAULT_TOKENS, TOKENS_STEP, default_tokens, headings, no_tpr_reason,
                                       on_tradeoff, sweep_lines)
from fwsapp.results.paired import EQUAL_STRENGTH, comparable_methods, written
from fwsapp.ui.router import through_router

through_router()


class Weighting(NamedTuple):
    """What every section reads: the weights, the Auto mapping, whether smoke-test verdicts count, and the judges."""

    alpha: float
    beta: float
    mapping_key: tuple
    include_smoke: bool
    judge: str | None  # the one judge whose verdicts count (None: the default)
    judges: str
    source_names: dict


class StrengthTarget(NamedTuple):
    tpr: float
    fpr: float
    tokens: int


def weights_section() -> tuple[float, float]:
    """α and β: a paper preset, a factuality : coherence ratio, or free; shared with the Report page."""
    # The weights are the session's, shared with the Report page: a preset when they are one, else free.
    shared = widgets.fws_weights()
    shared_preset = next((name for name, weights in PRESETS.items() if weights == shared), None)
    mode = st.radio("Weights", ["Paper preset", "Factuality : coherence ratio", "Free α and β"], horizontal=True,
                    index=0 if shared_preset else 2, key="fws-mode")
    if mode == "Paper preset":
        preset = st.selectbox("Preset", list(PRESETS), index=list(PRESETS).index(shared_preset or "Current"), key="fws-preset",
                              format_func=lambda name: f"{name} (α={PRESETS[name][0]}, β={PRESETS[name][1]})")
        alpha, beta = PRESETS[preset]
    elif mode == "Factuality : coherence ratio":
        ratio = st.slider("Factuality : coherence (α : β), keeping 2α + β = 1", 0.25, 8.0, 2.0, 0.25, key="fws-ratio")
        alpha, beta = ratio_weights(ratio)
    else:
        columns = st.columns(2)
        alpha = columns[0].slider("α (relevance and factual accuracy)", 0.0, 1.0, shared[0], 0.01, key="fws-alpha")
        beta = columns[1].slider("β (coherence)", 0.0, 1.0, shared[1], 0.01, key="fws-beta")
    widgets.set_fws_weights(alpha, beta)
    st.write(f"α = {alpha:.3f}, β = {beta:.3f}, 2α + β = {2 * alpha + beta:.3f} (the Report page uses the same weights)")
    if abs(2 * alpha + beta - 1) > 1e-9:
        st.warning(f"2α + β = {2 * alpha + beta:.3f}, not 1: FWS is then off the 0–1 scale of the presets and the ratio "
                   "mode, so its values do not compare with theirs. The flip chart keeps 2α + β = 1 and marks your weights "
                   "by their ratio α/β only.")
    return alpha, beta


def auto_mapping() -> dict:
    """Which metric stands for each aspect in Auto-FWS."""
    with st.expander("Auto-FWS mapping: which metric stands for each aspect"):
        mapping = {}
        for aspect, options in aspect_choices().items():
            mapping[aspect] = st.selectbox(
                ASPECT_LABELS[aspect], options, index=0, key=f"map-{aspect}", format_func=source_label,
                help="The first is the default. A metric named in brackets replaces the first for the tasks it names. "
                     "SimCSE to ref.: SimCSE similarity to the reference, measured alike for both texts.",
            )
        metric_names = queries.metric_names(resources.revision())
        st.caption(f"Metrics stored so far: {', '.join(map(column_label, metric_names)) or 'none'}.")
    return mapping


def show_table(title: str, table, empty: str, source: str, weighting: Weighting) -> None:
    """One FWS table, with which runs its pooled unwatermarked row averages."""
    st.subheader(markup.message(title))
    if table.empty:
        st.info(empty)
        return
    shown = table.rename(columns={**HEADINGS, **{task: TASKS[task].label for task in TASKS}}).round(3)
    widgets.table(shown)
    pooled = pooled_reference(queries.fws_means(resources.revision(), weighting.mapping_key,
                                                weighting.include_smoke, weighting.judge)[source])
    several = pooled[pooled.run_id.str.contains(",")]
    st.caption("One row per run of each task: Settings say what sets a run apart from its method's defaults, with its "
               "id where two runs share them." + ("" if several.empty else " The Unwatermarked row (Settings '"
               f"{POOLED_REFERENCE}') averages the unwatermarked texts of several runs: " + "; ".join(
                   f"{row.model}, {task_label(row.task)}: {row.run_id}"
                   for row in several.itertuples()) + "."))


def judge_in_place(runs) -> None:
    """The embedded model judges the unjudged runs, from here; a real judge's settings are on the Judge page."""
    judged = queries.judged_run_ids(resources.revision())
    unjudged = tuple(run_id for run_id in runs.run_id if run_id not in judged)
    backend = IN_PROCESS_BACKEND
    plan = queries.judge_plan(resources.revision(), unjudged, backend.name, backend.default_model, False, False)
    manager = resources.jobs()
    about = local_duration(plan["pairs"], plan["prompt_tokens"])
    if plan["pairs"] and st.button(f"Judge {counted(plan['pairs'], 'pair', 'pairs')} with the embedded model now (about {about})",
                                   disabled=bool(manager.active("judge")), key="fws-judge-local"):
        manager.start_judge(list(unjudged), backend.name, None, None, JudgeSettings(concurrency=1))
        st.rerun()
    st.caption(f"The embedded model as a judge: {LOCAL_DEMO_NOTE}. For GPT-4o or your own "
               "server, the Judge page has the settings.")
    widgets.job_status("judge", "pairs")


def ranking_and_flips(views: dict, weighting: Weighting) -> None:
    """The ranking of methods, where rankings flip along α/β, and the judge's drop per aspect."""
    if not views["ranking"].empty:
        st.subheader("Ranking of methods")
        st.caption(markup.message(f"Ranked by the judge's FWS ({weighting.judges}), since some runs are judged; runs "
                                  "without verdicts are not in it.") if views["ranking_source"] == "GPTJ" else
                   "Ranked by Auto, the metrics' FWS: no run is judged yet (by a judge that counts). Once one is, the "
                   "ranking uses the judge's FWS.")
        ranking = tasks_named(views["ranking"]).rename(columns=HEADINGS).round(3)
        widgets.table(ranking)

    # Both sources, each in its own line style: judge data must not hide the metric-based curve.
    sweep = pd.concat([queries.ratio_sweep_cached(resources.revision(), weighting.mapping_key, source,
                                         weighting.include_smoke, weighting.judge).assign(
        source=weighting.source_names[source]) for source in ("GPTJ", "Auto")], ignore_index=True)
    if not sweep.empty:
        st.subheader("Where rankings flip: FWS along the factuality : coherence ratio")
        st.caption(markup.message(f"x: α/β with 2α + β = 1 (log scale); solid lines use the judge ({weighting.judges}), "
                                  "dashed ones the metrics (Auto). The dotted line marks the current weights."))
        # One line per model and run: with several models the model is part of the trace, never averaged in.
        several_models = sweep.model.nunique() > 1
        runs_named = sweep.method + " · " + sweep.settings.where(sweep.method != "Unwatermarked", "")
        runs_named = runs_named.str.removesuffix(" · ")
        sweep = sweep.assign(line=sweep.model + " · " + runs_named if several_models else runs_named,
                             task=sweep.task.map(task_label))
        figure = px.line(sweep, x="ratio", y="fws", color="line", line_dash="source", facet_col="task", log_x=True,
                         line_dash_map={weighting.source_names["GPTJ"]: "solid", weighting.source_names["Auto"]: "dash"},
                         facet_col_spacing=0.06,
                         labels={"ratio": "α/β", "fws": "FWS",
                                 "line": "model · method · settings" if several_models else "method · settings"},
                         color_discrete_map=None if several_models else widgets.series_colours(sweep.line.unique()))
        ticks = [0.25, 0.5, 1, 2, 4, 8]
        figure.update_xaxes(tickvals=ticks, ticktext=[f"{tick:g}" for tick in ticks], minor_showgrid=False)
        figure.for_each_annotation(lambda note: note.update(text=note.text.removeprefix("task=")))
        if weighting.beta > 0:
            figure.add_vline(x=weighting.alpha / weighting.beta, line_dash="dot", line_color="grey")
        widgets.chart(figure)

    drops = queries.judge_drops(resources.revision(), weighting.include_smoke, weighting.judge)
    if not drops.empty:
        st.subheader(markup.message(f"Judge drop % per aspect ({weighting.judges})"))
        widgets.table(drops)


def equal_strength_section(weighting: Weighting) -> tuple[StrengthTarget, pd.DataFrame, pd.DataFrame]:
    """Each sweep set to the same TPR after T tokens, and quality read there; returns the target, the swept runs and
    the settings matched."""
    st.subheader("Methods at equal strength")
    st.caption("At default settings a weaker watermark can look kinder to the facts only because it is weaker. Each "
               "sweep of a method's strength (runs that differ only in δ, DiPmark's α or SynthID's depth) is set to reach "
               "the same TPR after T tokens, interpolated between swept runs where needed; quality is read there. "
               "`python -m fwsapp grid experiments/strength.toml` makes such sweeps.")
    columns = st.columns(3)
    target_tpr = columns[0].number_input("Target TPR", 0.05, 1.0, 0.9, 0.05, key="strength-tpr")
    target_fpr = columns[1].selectbox("at FPR", (0.01, 0.05), format_func=percent, key="strength-fpr")
    reached = queries.strength_reach(resources.revision())
    target_tokens = columns[2].number_input("after T tokens", TOKENS_STEP, 1024, default_tokens(reached), TOKENS_STEP,
                                            key="strength-tokens",
                                            help=f"opens at {DEFAULT_TOKENS}, or shorter where the swept runs' answers are")
    swept, matched = queries.equal_strength(resources.revision(), float(target_tpr), target_fpr, int(target_tokens),
                                            weighting.alpha, weighting.beta, weighting.include_smoke, weighting.judge)
    if swept.empty:
        st.info("No sweep to compare yet: it needs runs of one method that differ only in its strength parameter, "
                "with scores by length (Detect page, Length tab).")
        return StrengthTarget(float(target_tpr), target_fpr, int(target_tokens)), swept, matched
    named = headings(target_fpr, int(target_tokens))
    swept_shown = widgets.uniform(tasks_named(swept.drop(columns="sweep"))).rename(columns=named)
    if not (matched.runs > 0).any():
        st.warning(no_tpr_reason(reached, int(target_tokens)))
        widgets.table(swept_shown)
    else:
        widgets.table(widgets.uniform(tasks_named(matched.drop(columns=["sweep", "low_run", "high_run", "share"])))
                      .rename(columns=named))
        with st.expander("The swept runs"):
            widgets.table(swept_shown)
    return StrengthTarget(float(target_tpr), target_fpr, int(target_tokens)), swept, matched


def paired_section(runs, target: StrengthTarget, weighting: Weighting) -> None:
    """Two methods text by text, at equal δ and at equal strength."""
    st.subheader("Two methods text by text")
    st.caption("Whether one method leaves fewer unsupported disease names than another, beyond the noise: runs of the "
               "two that differ only in the method pair seed by seed, and their texts prompt by prompt. Each row is the "
               "candidate minus the baseline over the paired texts, at equal δ and at equal strength (each method at "
               "the value, run on every seed, whose TPR after T tokens is nearest the target above), with a 95 % "
               f"interval from a bootstrap over prompts (from {MINIMUM['bootstrap']} prompts that carry the measure; for a "
               "share, as many with a mention on each side), a permutation p-value, and the smallest difference the "
               "texts could detect (80 % power). `python -m bench.entity_study` makes such runs; `python -m fwsapp "
               "paired` prints the same table.")
    comparable = comparable_methods(runs.method.unique())
    if len(comparable) < 2:
        st.info("Needs runs of two methods with a strength parameter (δ) on the same prompts and seeds.")
    else:
        columns = st.columns(2)  # by default the registry's first method is the baseline and its next the candidate
        candidate = columns[0].selectbox("Candidate", comparable, key="paired-candidate", index=1)
        others = [name for name in comparable if name != candidate]
        baseline = columns[1].selectbox("Baseline", others, key="paired-baseline")
        differences = queries.paired_comparison(resources.revision(), candidate, baseline, target.tpr,
                                                target.fpr, target.tokens, weighting.alpha, weighting.beta, weighting.mapping_key)
        if differences.empty:
            st.info(markup.message(queries.unpaired_reason(resources.revision(), candidate, baseline,
                                                           target.tpr, target.fpr, target.tokens)))
        else:
            st.dataframe(tasks_named(written(differences)), hide_index=True, width="stretch")
            if EQUAL_STRENGTH not in set(differences.setting):
                st.caption(queries.no_equal_strength(resources.revision(), candidate, baseline, target.tokens))


def tradeoff_section(views: dict, detect_column: str, tradeoff_source: str, weighting: Weighting, target: StrengthTarget,
                     swept: pd.DataFrame, matched: pd.DataFrame) -> None:
    """Detectability against FWS: each method's settings joined, the equal-strength points, the Pareto front."""
    st.subheader("Trade-off: detectability against FWS")
    points, front, reference = views["tradeoff"], views["front"], views["reference"]
    if points.empty:
        st.info("Needs runs with both detection scores and FWS inputs.")
    else:
        points = points.assign(run=points.method + " · " + points.settings, task=points.task.map(task_label))
        figure = px.scatter(points, x=detect_column, y="fws", color="run", symbol="task", hover_data=["model", "run_id"],
                            labels={detect_column: DETECTABILITY[detect_column], "fws": f"FWS, {weighting.source_names[tradeoff_source]}",
                                    "run": "method · settings"})
        for _, line in sweep_lines(points, swept, detect_column, "fws").groupby("line", sort=False):
            method, model, task = line.iloc[0][["method", "model", "task"]]
            figure.add_trace(go.Scatter(x=line[detect_column], y=line.fws, mode="lines",
                                        name=f"{method} ({model}, {task})", line={"width": 1, "color": "grey"}))
        placed = on_tradeoff(matched, points, detect_column, "fws")
        if not placed.empty:
            figure.add_trace(go.Scatter(x=placed[detect_column], y=placed.fws, mode="markers", text=placed.setting,
                                        name=f"equal strength: TPR {target.tpr:g} after {target.tokens} tokens",
                                        marker={"symbol": "star", "size": 16, "color": "black"}))
        # A front of one run is that run's point: as a line it would draw nothing and fill the legend.
        for task, task_front in (group for group in front.groupby("task") if len(group[1]) > 1):
            figure.add_trace(go.Scatter(x=task_front[detect_column], y=task_front.fws, mode="lines",
                                        name=f"Pareto front, {task_label(task)}",
                                        line={"dash": "dash"}))
        several_models = reference.model.nunique() > 1
        for row in reference.itertuples():
            figure.add_hline(y=row.fws, line_dash="dot", line_color="grey", annotation_position="bottom right",
                             annotation_text=f"unwatermarked{' ' + row.model if several_models else ''}, {task_label(row.task)}")
        figure.update_traces(marker={"size": 12}, selector={"mode": "markers"})
        figure.update_xaxes(range=[-0.02, 1.02])  # AUROC and TPR are rates: one fixed scale, however few points
        widgets.chart(figure)


def clinician_agreement(runs, weighting: Weighting) -> None:
    """Items for clinicians to rate, and how each weighting of FWS agrees with their ratings."""
    st.header("Agreement with clinicians")
    with st.expander("Choose items for human rating"):
        labels = widgets.job_inputs(runs)
        chosen = st.multiselect("Runs", list(labels), format_func=labels.get, key="human-runs")
        fraction = st.slider("Share of each run's samples", 0.01, 1.0, DEFAULT_FRACTION, 0.01, key="human-fraction")
        if st.button("Add items to rate", disabled=not chosen):
            added = sum(sample_items(resources.store(), run_id, fraction) for run_id in chosen)
            st.success(f"Added {counted(added, 'item', 'items')}. Each goes to 3 different raters on the Rate page.")

    rated = queries.human_ratings(resources.revision())
    if rated.empty:
        st.info("No human ratings yet. Raters use the Rate page.")
        return
    samples = queries.fws_samples(resources.revision(), weighting.mapping_key, weighting.include_smoke, weighting.judge)
    judge_label = f"judge ({weighting.judges})"
    humans = widgets.human_agreement(rated, samples, weighting.alpha, weighting.beta, judge_label)
    st.subheader("Sensitivity of each weighting (FWS-to-human r)")
    widgets.table(widgets.uniform(sensitivity_table(humans, samples["judge"], samples["auto"], judge_label)))
    statistic, p_value, nemenyi = friedman_nemenyi(rated)
    st.subheader("Do the aspects differ? Friedman test, Nemenyi post-hoc")
    if statistic is None:
        st.info(f"{not_enough(len(rated))}: the Friedman test needs {MINIMUM['friedman']} ratings.")
    else:
        st.write(f"Friedman χ² = {statistic:.3f}, p = {markup.score_text(p_value, 'p')}. Nemenyi p-values between "
                 "aspects:")
        st.dataframe(markup.scores_written(nemenyi, dict.fromkeys(nemenyi.columns, "p")), width="stretch")
    widgets.download("Download ratings (CSV)", csv_bytes(rated), "human-ratings.csv", "text/csv")


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Factuality-Weighted Score")
    st.latex(r"\mathrm{FWS} = \alpha\,(\mathrm{Rel} + \mathrm{FactAcc}) + \beta\,\mathrm{Coh}")
    st.caption("Every aspect is scaled to [0, 1]: judge scores are divided by 5. The judge's FWS (the paper's GPTJ, named "
               "below by the judge that gave it) uses an LLM judge's verdicts; Auto uses automatic metrics.")
    runs = widgets.runs_or_stop()
    alpha, beta = weights_section()
    mapping_key = tuple(sorted(auto_mapping().items()))
    all_verdicts = queries.judgments(resources.revision())
    include_smoke = widgets.count_smoke_tests(smoke_test_judges(all_verdicts), "fws-smoke")
    judge = widgets.judge_choice(counted_judges(all_verdicts, include_smoke), "fws-judge")
    for warning in indiscriminate_judges(counted_judgments(all_verdicts, include_smoke, judge)):
        st.warning(markup.message(warning))
    judges = queries.fws_samples(resources.revision(), mapping_key, include_smoke, judge)["judges"]
    weighting = Weighting(alpha, beta, mapping_key, include_smoke, judge, judges,
                          {"GPTJ": f"judge ({judges})", "Auto": "Auto (metrics)"})
    detect_column = st.selectbox("Detectability for the trade-off chart", list(DETECTABILITY),
                                 format_func=DETECTABILITY.get, key="fws-detect")
    prepared = queries.fws_prepared(resources.revision(), mapping_key, include_smoke, judge)
    sources = list(prepared)  # GPTJ and Auto
    tradeoff_source = st.radio("FWS for the trade-off chart", sources, index=sources.index(shown_source(prepared)),
                               # Labels that do not name the judge: a radio whose labels change with the Judge
                               # chooser was drawn with neither option selected.
                               horizontal=True, key="fws-source", format_func={"GPTJ": "judge", "Auto": "Auto (metrics)"}.get)
    views = fws_views(prepared, alpha, beta, detect_column, tradeoff_source)
    show_table(f"FWS, judge ({judges})", views["gptj"], "No judge verdicts yet: judging asks an LLM to score each pair, or "
                                                   "import a judged log.", "judge", weighting)
    if views["gptj"].empty:
        judge_in_place(runs)
    show_table("FWS, Auto (metrics)", views["auto"], "No run has all three mapped metrics yet.", "auto", weighting)
    if views["auto"].empty:
        widgets.model_free_metrics(list(runs.run_id), automatic=False)
        widgets.job_status("score", "sample × metric values")
    ranking_and_flips(views, weighting)
    target, swept, matched = equal_strength_section(weighting)
    paired_section(runs, target, weighting)
    tradeoff_section(views, detect_column, tradeoff_source, weighting, target, swept, matched)
    clinician_agreement(runs, weighting)


render()
