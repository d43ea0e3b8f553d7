"""Quality: what each watermark costs in text quality, by the paper's automatic metrics."""
import plotly.express as px
import streamlit as st

from fwsapp.results.run_names import with_settings
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.tasks import TASKS, task_label
from fwsapp.models import DEFAULT_ENCODER
from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA
from fwsapp.quality.scoring import EMBEDDED_ORACLE_TOKENS_PER_SECOND, perplexity_metric
from fwsapp.quality.registry import METRICS, column_label, default_metrics, in_stored_order, unread_setting
from fwsapp.results.tables import best_cells, difference_from_unwatermarked, quality_latex, quality_table
from fwsapp import duration
from fwsapp.results.export import csv_bytes
from fwsapp.ui.router import through_router

through_router()


def model_metrics_form(runs) -> None:
    """Metrics that need a model, computed as a job, with perplexity's plan shown before it starts."""
    with widgets.kept_open("Perplexity, BERTScore, AlignScore: metrics that need a model", "score-open"):
        labels = widgets.job_inputs(runs)
        chosen = st.multiselect("Runs", list(labels), default=list(labels), format_func=labels.get, key="score-runs")
        offered = METRICS.available()
        metrics = st.multiselect("Metrics", offered, default=[name for name in default_metrics() if name in offered],
                                 key="score-metrics",
                                 format_func=lambda name: f"{name}: {METRICS[name].label}",
                                 help="  \n".join(f"{entry.name}: {entry.help}" for entry in METRICS))
        oracle = st.text_input("Perplexity oracle (empty: each run's own model)", key="score-oracle") or None
        checkpoint = st.text_input("AlignScore checkpoint (empty: the offline stand-in)", key="score-alignscore") or None
        consent_needed = False
        if perplexity_metric() in metrics and chosen:
            plan = queries.perplexity_plan(resources.revision(), tuple(chosen), oracle)
            st.caption("Perplexity, before it starts: the oracle per run, and what is left to score.")
            st.dataframe(plan, hide_index=True, width="stretch")
            tokens = int(plan["tokens (about)"].sum())
            if tokens:  # none when every run's perplexity is stored, or no oracle is named for it (said below)
                st.caption(f"About {tokens:,} tokens to read: roughly {duration(tokens / EMBEDDED_ORACLE_TOKENS_PER_SECOND)} "
                           "with the embedded 135M model on this machine's CPU (measured, docs/benchmarks.md); a 7B "
                           "oracle takes tens of times longer on a CPU.")
            unnamed = plan[plan.oracle == "none (name one)"]
            if not unnamed.empty:
                st.info(f"Runs {', '.join(unnamed.run)} (imported, or generated through a serving engine) get no "
                        "perplexity until an oracle is named above: the model that wrote them is not here.")
            foreign = plan[~plan["own generator"] & (plan["samples to score"] > 0)]
            if not foreign.empty:
                consent_needed = not st.checkbox(
                    f"Score {', '.join(foreign.run)} with {', '.join(sorted(set(foreign.oracle)))}, a model other than "
                    f"the one that wrote {'it' if len(foreign) == 1 else 'them'} ({', '.join(sorted(set(foreign.generator)))}): "
                    "the perplexities will be that oracle's, not comparable with the generator's or the paper's.",
                    key="score-consent")
        unread = unread_setting(tuple(metrics), oracle=oracle, alignscore_checkpoint=checkpoint)
        if unread:
            st.error(unread)
        manager = resources.jobs()
        if st.button("Compute", disabled=not chosen or not metrics or bool(unread) or consent_needed
                     or bool(manager.active("score"))):
            manager.start_scoring(chosen, tuple(metrics), oracle, checkpoint)
            st.rerun()


def task_tables(runs) -> None:
    """Per task, one row per run, the best cells in bold, the differences from unwatermarked and downloads."""
    report = queries.report(resources.revision(), DEFAULT_ALPHA, DEFAULT_BETA)
    for task in [name for name in TASKS if name in set(runs.task)]:
        table = quality_table(report, task)
        if table.empty:
            continue
        st.subheader(f"{TASKS[task].label} ({TASKS[task].dataset})")
        best = best_cells(table)
        widgets.exported_table(table, bold=best)  # as its LaTeX and the report: 0.00016 is not 0.000
        st.caption("One row per run: Settings are what sets a run apart from its method's defaults, with its id where "
                   "two runs share them; the Unwatermarked row holds the texts of the run it names. "
                   "Best value per column and model in bold (lowest perplexity, highest otherwise; none where all are "
                   "equal). None: not computed yet, or none of its own (the unwatermarked row's SimCSE: SimCSE is the "
                   "watermarked text's similarity to "
                   "the unwatermarked one). Difference from unwatermarked, each run's watermarked texts against its "
                   "own unwatermarked ones (the same prompts):")
        widgets.exported_table(difference_from_unwatermarked(report, task))
        downloads = st.columns(2)
        widgets.download("CSV", csv_bytes(table), f"quality-{task}.csv", "text/csv", downloads[0], key=f"csv-{task}")
        widgets.download("LaTeX", quality_latex(table, f"Quality, {TASKS[task].label}"), f"quality-{task}.tex",
                         "text/x-tex", downloads[1], key=f"tex-{task}")


def distributions(runs) -> None:
    """Per-sample values of a metric, one box per run."""
    values = queries.metric_values(resources.revision())
    if not values.empty:
        st.subheader("Per-sample distributions")
        metric = st.selectbox("Metric", in_stored_order(values.metric), key="dist-metric", format_func=column_label)
        # One box per run: a 135M demo run and an imported 7B run, or KGW at two δ, never share a box.
        shown = with_settings(values[values.metric == metric], runs)
        shown = shown.assign(run=shown.model + " · " + shown.method + " · " + shown.settings)
        figure = px.box(shown, x="run", y="value", color="text_kind", facet_col="task", points="outliers",
                        # As the tables: the tasks in their order, the runs by model, method and settings.
                        category_orders={"task": [task for task in TASKS if task in set(shown.task)],
                                         "run": sorted(set(shown.run))},
                        labels={"value": column_label(metric), "text_kind": "text", "run": "model · method · settings"},
                        color_discrete_map=widgets.BASELINE_COLOURS)
        figure.for_each_annotation(lambda note: note.update(text=task_label(note.text.removeprefix("task="))))
        widgets.chart(figure)


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Quality")
    st.caption(
        f"Perplexity under an oracle model (the run's own model by default), SimCSE-style similarity of the "
        f"watermarked to the unwatermarked output with **{DEFAULT_ENCODER}** (numbers depend on the encoder), "
        "ROUGE-2/L or token F1 against the reference, and factual consistency: AlignScore when a checkpoint is "
        "given, otherwise the offline stand-in *disease-entity support* (the share of the output's disease "
        "mentions that the reference supports)."
    )
    runs = widgets.runs_or_stop()
    widgets.model_free_metrics(list(runs.run_id), automatic=True)
    widgets.job_status("score", "sample × metric values")

    model_metrics_form(runs)
    task_tables(runs)
    distributions(runs)

render()
