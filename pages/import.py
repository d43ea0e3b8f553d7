"""Import: bring generations, detection scores and judge logs from MarkLLM pipelines or the paper."""
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.tasks import PAPER_FILE_CODES, TASKS, task_from_file_name, tasks_named
from fwsapp.orchestration.importer import (ImportProblem, LogFile, import_logs, model_from_file_name,
                                           settings_in_names)
from fwsapp.judge.records import PAPER_JUDGE
from fwsapp.watermark.methods import METHODS
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Import logs")
    st.caption(
        "Any subset of three JSON files becomes one run, marked as imported (no model). Texts that begin with "
        "their prompt have it removed before any metric. Pickle files are refused: unpickling runs code. In the paper's "
        "file names, " + ", ".join(f"{code} = {TASKS[task].label} ({TASKS[task].dataset})" for code, task in PAPER_FILE_CODES.items())
        + "; the task is chosen from the names when they say it."
    )
    left, right = st.columns(2)
    with left:
        generations = st.file_uploader("Generations: a JSON list of {watermarked_text, unwatermarked_text, natural_text, prompt?}",
                                       type=["json"])
        detection = st.file_uploader('Detection scores: {"watermarked_scores": [...], "unwatermarked_scores": [...]}', type=["json"])
        judged = st.file_uploader("Judge log (the paper's layout: sample_id, judge_output, scores_U, scores_W, ...)", type=["json"])
    uploads = [upload for upload in (generations, detection, judged) if upload is not None]
    if uploads:  # the uploader's chips cut long names short
        st.caption("Chosen files: " + "; ".join(markup.inert(upload.name) for upload in uploads), unsafe_allow_html=True)
    named = {task_from_file_name(upload.name) for upload in uploads} - {None}
    models = {model_from_file_name(upload.name) for upload in uploads} - {None}
    with right:
        method = st.selectbox("Method", METHODS.names(), help="The paper's spellings " + ", ".join(
            f"{alias} = {entry.name}" for entry in METHODS for alias in entry.aliases))
        model = st.text_input("Model", models.pop() if len(models) == 1 else "", placeholder="e.g. meditron",
                              help="Taken from the paper's file names when they say it (meditron, biomistral, jsl).")
        task = st.selectbox("Task", list(TASKS), format_func=lambda name: TASKS[name].label,
                            index=list(TASKS).index(named.pop()) if len(named) == 1 else 0,
                            help="The paper's file names say the task: " + ", ".join(
                                f"{code} = {TASKS[task].label}" for code, task in PAPER_FILE_CODES.items()))
        negatives = st.radio("The unwatermarked scores scored", ["reference", "unwatermarked"], horizontal=True,
                             format_func={"reference": "the human reference (MarkLLM's natural mode, the paper's logs)",
                                          "unwatermarked": "the unwatermarked output"}.get)
        judge_model = st.text_input("Judge model (of the judge log)", PAPER_JUDGE,
                                    help="The model that wrote the judge log's verdicts: the paper's logs were judged by "
                                         "GPT-4o. Verdicts are filed under this name.")
        direction = st.selectbox(
            "Score direction", ["from the method", "higher", "lower"],
            help="Higher means watermarked for z-scores; EXP-edit's p-values are lower-is-watermarked.",
        )

    with st.expander("The watermark's settings, where the files' names do not say them"):
        st.caption("Detection and attacks read the run's settings. The paper's names say γ and δ (g0.5-d2); a log "
                   "made on another GPU or under another key needs those said here, as the paper's jsl summarization "
                   "logs need 492 CUDA blocks (an RTX 3090-class card). Settings left at their default change nothing.")
        named = settings_in_names(method, [upload.name for upload in uploads])
        # Keyed by what the names say, so the inputs take the next files' settings, not the first files'.
        settings = widgets.param_inputs(METHODS[method], "-".join(["import", method, *(
            f"{key}{value:g}" for key, value in sorted(named.items()))]), named)

    if st.button("Import", type="primary"):
        files = {
            name: LogFile(upload.name, upload.getvalue()) if upload else None
            for name, upload in (("generations", generations), ("detection", detection), ("judged", judged))
        }
        if not model.strip():
            st.error("Name the model the logs come from (for example meditron).")
        else:
            try:
                present = set(resources.store().runs().run_id)
                run_id = import_logs(
                    resources.store(), method=method, model=model.strip(), task_name=task,
                    score_direction=None if direction == "from the method" else direction, negatives=negatives,
                    judge_model=judge_model, params=settings, **files,
                )
            except (ImportProblem, ValueError) as error:
                st.error(markup.message(f"Nothing was imported. {error}"))
            else:
                if run_id in present:
                    st.info(f"These files are already imported, as run {run_id}: nothing changed.")
                else:
                    st.success(f"Imported as run {run_id}. It appears on every page; the Report page has the paper's tables.")

    runs = queries.runs(resources.revision())
    imported = runs[runs.imported]
    if not imported.empty:
        st.subheader("Imported runs")
        st.dataframe(tasks_named(imported[["run_id", "method", "model", "task", "n", "created"]])
                     .rename(columns={"run_id": "run"}), hide_index=True, width="stretch")


render()
