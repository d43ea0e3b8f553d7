"""Entropy: where the watermark moves probability mass (the paper's Figures 3, 4 and 7)."""
import plotly.express as px
import streamlit as st

from fwsapp.data.tasks import TASKS
from fwsapp.entities.introduced import HALLUCINATION_THRESHOLD
from fwsapp.entities.entropy import HIGH, LOW
from fwsapp.results.entropy_shift import (bin_table, density_frame, entropy_models, series_names, series_order,
                                         stand_in_models)
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.entities.recognizers import RECOGNIZERS, recognizers_of
from fwsapp.results.run_names import elsewhere_sources, with_settings
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui import render as markup
from fwsapp.ui.router import through_router

through_router()


def launch(runs) -> None:
    """The expander that starts an analysis job: entropies (a stand-in model for imports) and disease entities."""
    with widgets.kept_open("Compute missing analyses (entropies and disease entities)", "analyze-open"):
        labels = widgets.job_inputs(runs)
        chosen = st.multiselect("Runs", list(labels), default=list(labels), format_func=labels.get, key="analyze-runs")
        elsewhere = elsewhere_sources(runs[runs.run_id.isin(chosen)])
        entropy_model = None
        if elsewhere:
            st.info(f"The {elsewhere} runs have no model here (a serving engine's model runs on its server): their "
                    "entropies need one. The embedded model is a stand-in for the paper's 7B generators, so treat its "
                    "entropies as indicative only.")
            if st.checkbox(f"Use {EMBEDDED_MODEL} for the {elsewhere} runs", key="analyze-embedded"):
                entropy_model = EMBEDDED_MODEL
        threshold = st.slider("Hallucination threshold: an introduced entity is unsupported when its similarity to every "
                              "reference entity is below this", 0.05, 0.95, HALLUCINATION_THRESHOLD, 0.05,
                              key="analyze-threshold")
        recognizer = st.selectbox("Disease recognizer", [name for name in recognizers_of("disease")
                                                        if name in RECOGNIZERS.available()],
                                  format_func=lambda name: f"{name}: {RECOGNIZERS[name].help}",
                                  key="analyze-recognizer", help="Each recognizer's analysis is stored apart; figures "
                                  "show the default one's where a run has it.")
        if st.button("Analyse", disabled=not chosen or bool(resources.jobs().active("analyze"))):
            resources.jobs().start_analysis(chosen, entropy_model, threshold, recognizer)
            st.rerun()
        widgets.job_status("analyze", "samples")


def chosen_runs(runs, values, measured) -> tuple[str, object]:
    """The Task choice and, where a task has runs of several models, the Model choice: the runs drawn below are one
    model's, since two models' runs of one method and settings would be one curve, their texts pooled. Tasks and
    models with something to draw come first, so the page never opens on an empty one after an import."""
    drawable = runs[runs.run_id.isin(set(values.run_id) | set(measured))]
    tasks = sorted((task for task in TASKS if task in set(runs.task)), key=lambda name: name not in set(drawable.task))
    task = st.radio("Task", tasks, horizontal=True, format_func=lambda name: TASKS[name].label, key="entropy-task")
    of_task = runs[runs.task == task]
    models = sorted(set(of_task.model), key=lambda name: (name not in set(drawable.model), name))
    if len(models) > 1:
        chosen_model = st.radio("Model", models, horizontal=True, key="entropy-model", format_func=markup.message)
        of_task = of_task[of_task.model == chosen_model]
    # One generator's runs may be read under two models (imports analysed with two stand-ins): their unwatermarked
    # texts would be one curve of two models' entropies, and each watermarked run set against it.
    if len(read_under := entropy_models(values, of_task)) > 1:
        chosen_under = st.radio("Entropies under", read_under, horizontal=True, key="entropy-under",
                                format_func=markup.message)
        of_task = of_task[of_task.run_id.isin(set(values[values.entropy_model == chosen_under].run_id))]
    if stand_ins := stand_in_models(values[values.run_id.isin(set(of_task.run_id))], of_task):
        st.caption(markup.message(f"The entropies of the {elsewhere_sources(of_task)} runs are under "
                                  f"{', '.join(stand_ins)}, "
                                  "a model named for their generator (not loaded here): indicative only unless it is "
                                  "that generator."))
    return task, of_task


def densities(values, runs, task: str) -> None:
    """The entropy densities of the reference, the unwatermarked texts and each watermarked run, and their bins."""
    curves = density_frame(values, runs, task)
    colours = widgets.series_colours(curves.series.unique() if not curves.empty else ())
    if curves.empty:
        st.info("No entropies for this task yet. Runs generated here record them; references, and the texts of "
                "imported and served runs, need the analysis above (imported and served runs need a model).")
        return
    st.subheader("Entropy densities")
    figure = px.line(curves, x="entropy", y="density", color="series", color_discrete_map=colours,
                     labels={"entropy": "token entropy (nats)", "density": "density (KDE)", "series": "text"})
    for boundary in (LOW, HIGH):
        figure.add_vline(x=boundary, line_dash="dot", line_color="grey")
    widgets.chart(figure)
    st.caption("Gaussian KDE reflected at 0, where entropies stop: near-certain tokens pile up there, and a plain KDE "
               "(seaborn's default) halves their density at 0 and draws a bump beside it.")
    st.subheader("Share of tokens per entropy bin")
    widgets.table(bin_table(values, runs, task).rename(columns={
        "low": f"low (< {LOW} nats) %", "mid": f"mid ({LOW}–{HIGH} nats) %", "high": f"high (> {HIGH} nats) %"}))
    st.caption("Shifts in percentage points. Each method's row is held against the unwatermarked texts and references of "
               "its own runs (the same prompts, at the same length), so where runs differ in prompts or length its "
               "shift is not its share less the pooled rows' (the curves above pool them). None: its runs' "
               "unwatermarked texts or references have no entropies yet (the analysis above computes them).")


def entity_entropies(entities, runs) -> None:
    """The mean token entropy inside the most frequent disease entities, per text."""
    entities = entities[entities.run_id.isin(set(runs.run_id)) & entities.entropy.notna()] \
        if not entities.empty else entities
    if entities.empty:
        return
    st.subheader("Entropy inside disease entities")
    top = st.slider("Most frequent entities", 3, 20, 8, key="entropy-top")
    frequent = entities.normalized.value_counts().head(top).index
    shown = with_settings(entities[entities.normalized.isin(frequent)], runs)
    shown = shown.assign(series=series_names(shown))
    figure = px.box(shown, x="normalized", y="entropy", color="series", points="all",
                    category_orders={"series": series_order(shown.series),  # as the densities' legend
                                     "normalized": list(frequent)},  # the most frequent first
                    color_discrete_map=widgets.series_colours(shown.series.unique()),
                    labels={"normalized": "disease entity", "entropy": "mean token entropy (nats)", "series": "text"})
    widgets.chart(figure)


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Token entropy")
    st.caption(
        "The entropy of the generating model's next-token distribution at each token, for the reference "
        "(teacher-forced after the prompt), the unwatermarked text and each method's watermarked text. "
        f"Bins: low < {LOW}, mid {LOW}–{HIGH}, high > {HIGH} nats."
    )
    runs = widgets.runs_or_stop()
    launch(runs)
    values = queries.entropy_values(resources.revision())
    entities, _ = queries.entity_rows(resources.revision())
    # Entities count only with their entropies: an imported run's entities alone draw nothing here.
    measured = entities[entities.entropy.notna()].run_id if not entities.empty else []
    task, shown = chosen_runs(runs, values, measured)
    densities(values, shown, task)
    entity_entropies(entities, shown)

render()
