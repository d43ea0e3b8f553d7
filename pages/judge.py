"""Judge: a pairwise LLM judge scores unwatermarked vs watermarked outputs on the paper's three criteria."""
from typing import NamedTuple

import plotly.express as px
import streamlit as st

from fwsapp import counted
from fwsapp.ui import render as markup
from fwsapp.judge import verdicts
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.tasks import TASKS, task_label, task_labels
from fwsapp.judge.backends import JudgeError, api_key_from_environment, local_duration
from fwsapp.judge.registry import CONCURRENT_REQUESTS, JUDGE_BACKENDS, REQUEST_TIMEOUT_SECONDS
from fwsapp.quality.registry import ASPECT_LABELS, ASPECTS
from fwsapp.judge.prompts import PROMPT_VERSION, template_text
from fwsapp.judge.runner import JudgeSettings, budget_counted
from fwsapp.judge.summary import indiscriminate_judges, smoke_test_judges
from fwsapp.ui.router import through_router

through_router()


class BackendChoice(NamedTuple):
    """The judge as the Backend section sets it up."""

    kind: str
    base_url: str | None
    judge_model: str | None
    local: bool
    timeout: float
    api_key: str | None
    settings: JudgeSettings


def backend_section() -> BackendChoice:
    """Which judge, where, and how hard to push it; with a connection test."""
    st.subheader("Backend")
    backend_kind = st.radio("Backend", JUDGE_BACKENDS.names(), horizontal=True,
                            format_func=lambda name: JUDGE_BACKENDS[name].menu_label, key="judge-backend")
    backend = JUDGE_BACKENDS[backend_kind]
    settings_columns = st.columns(4)
    base_url = None
    if "base_url" in backend.needs:
        base_url = settings_columns[0].text_input("Base URL", "http://localhost:8000/v1", key="judge-base-url")
    default_model = backend.default_model
    judge_model = settings_columns[1].text_input("Judge model", default_model, key=f"judge-model-{backend_kind}") or None
    local = backend.in_process
    if local:  # one forward pass at a time, no network, no bill: these settings would do nothing
        concurrency, timeout, use_budget, budget = 1, REQUEST_TIMEOUT_SECONDS, False, None
        settings_columns[2].caption("The local model judges one pair at a time, decoding the verdict straight into its "
                                    "format: a few seconds a pair with the embedded model on 2 CPU cores, longer "
                                    "for longer answers (the estimate below counts their tokens).")
    else:
        concurrency = settings_columns[2].number_input(
            "Concurrent requests", 1, 64, CONCURRENT_REQUESTS,
            help="A server that answers one request at a time (llama.cpp on a CPU) queues "
            "the rest, and the queueing counts against the timeout: give it 1, or a larger timeout.")
        timeout = settings_columns[3].number_input("Timeout (s)", 1.0, 600.0, REQUEST_TIMEOUT_SECONDS,
                                                   help="Per request, queueing at the server included.")
    option_columns = st.columns(4)
    swap = option_columns[0].checkbox("Both orders", help="Judge each pair as A/B and as B/A and average the two; "
                                                         "also reports position consistency.")
    retry_failed = option_columns[1].checkbox(
        "Ask again for failed verdicts", key="judge-retry-failed",
        help="Verdicts that came back but could not be parsed are final unless asked again; unreachable pairs are "
             "always asked again.")
    if not local:
        priced = budget_counted(judge_model or default_model or "")
        use_budget = option_columns[2].checkbox(
            "Budget cap", disabled=not priced,
            help=None if priced else "No price is known for this judge model, so its spend is not counted and no cap "
                                     "can be kept.") and priced
        budget = option_columns[3].number_input("Budget (US$)", 0.0, 10_000.0, 5.0, 0.5, disabled=not use_budget)
    api_key = None
    if not local:
        api_key = st.text_input(
            "API key (kept for this browser session only; never stored, logged or exported)", type="password",
            key=f"judge-api-key-{backend_kind}",
            help="OpenAI: without it, OPENAI_API_KEY or st.secrets is used. A compatible server gets only the key "
                 "entered here, never OPENAI_API_KEY.") or None
    if "key" in backend.needs and not api_key:
        if api_key_from_environment():
            st.caption(f"API key: found in {backend.key_env} or st.secrets. It is never stored or exported.")
        else:
            st.warning(f"No {backend.menu_label} key: enter it above, set {backend.key_env}, or add it to "
                       ".streamlit/secrets.toml.")

    if st.button("Test connection"):
        try:
            st.success(markup.message(resources.judge_backend_check(backend_kind, judge_model, base_url, float(timeout),
                                                                    api_key)))
        except (JudgeError, ValueError, OSError) as error:
            st.error(markup.message(f"The backend did not answer: {error}"))
    return BackendChoice(backend_kind, base_url, judge_model or default_model, local, float(timeout), api_key,
                         JudgeSettings(concurrency=int(concurrency), swap=swap,
                                       budget_usd=budget if use_budget else None, retry_failed=retry_failed))


def run_section(runs, choice: BackendChoice) -> None:
    """Which runs to judge, what it will cost, and the job."""
    st.subheader("Run")
    labels = widgets.job_inputs(runs)
    # The last selection survives a visit to another page; the first choice is a run with no verdicts yet, never a run
    # already judged (an imported run comes with the paper's verdicts).
    judged = queries.judged_run_ids(resources.revision())
    remembered = [run_id for run_id in st.session_state.get("judge_selection", []) if run_id in labels]
    default = remembered or [run_id for run_id in labels if run_id not in judged][:1]
    chosen = st.multiselect("Runs to judge", list(labels), default=default, format_func=labels.get)
    st.session_state["judge_selection"] = chosen
    if not default and not chosen:
        st.caption("Every run has verdicts already; choose one to judge it again with another judge model.")
    if chosen:
        plan = queries.judge_plan(resources.revision(), tuple(chosen), choice.kind, choice.judge_model,
                                  choice.settings.swap, choice.settings.retry_failed)
        cost = (f"about {local_duration(plan['pairs'], plan['prompt_tokens'])} here, no cost" if choice.local
                else f"about ${plan['cost']:.2f}" if plan["cost"] is not None else "cost unknown for this model")
        st.write(
            f"{plan['described']}: about {plan['prompt_tokens']:,} prompt "
            f"and {plan['completion_tokens']:,} completion tokens, {cost}."
        )
    manager = resources.jobs()
    nothing_to_judge = not chosen or plan["pairs"] == 0
    if st.button("Judge", type="primary", disabled=nothing_to_judge or bool(manager.active("judge")),
                 help="Every chosen pair is judged already by this judge model." if chosen and nothing_to_judge else None):
        manager.start_judge(chosen, choice.kind, choice.judge_model, choice.base_url, choice.settings,
                            timeout=choice.timeout, api_key=choice.api_key)
        st.rerun()
    widgets.job_status("judge", "pairs")


def means_section() -> None:
    """Mean scores with and without the watermark, and the drop per aspect."""
    means = queries.judge_means(resources.revision())
    if means.empty:  # none while every verdict failed
        return
    means = means.assign(task=means.task.map(task_label), aspect=means.aspect.map(ASPECT_LABELS))
    aspects = [ASPECT_LABELS[aspect] for aspect in ASPECTS]
    st.subheader("Mean scores, unwatermarked vs watermarked")
    # Bars along the runs' names, written once at the left of each row of panels: upright under each panel, the long
    # names (model · method · settings · judge) slanted across their neighbours and squeezed the bars.
    bars = means.assign(label=means.label.str.replace(" · judge ", "<br>judge ", regex=False))
    figure = px.bar(
        bars, y="label", x="mean", color="kind", barmode="group", orientation="h", facet_col="aspect",
        facet_row="task", category_orders={"aspect": aspects, "kind": ["unwatermarked", "watermarked"],
                                           "label": sorted(set(bars.label)),  # from the top, as the drops
                                           "task": [label for label in task_labels() if label in set(means.task)]},
        color_discrete_map=widgets.BASELINE_COLOURS,
        labels={"mean": "mean (1–5)", "label": "", "kind": "text"}, range_x=[0, 5],
        height=int((90 * bars.label.nunique() + 60) * bars.task.nunique() + 120),
    )
    figure.for_each_annotation(lambda note: note.update(text=note.text.split("=")[-1]))
    # The runs' axis spans every run: with the mean's axis fixed (0-5) in matched facets, plotly.js left this one at its
    # default range, -1 to 4, which hid every run past the fifth.
    figure.update_yaxes(range=[-0.5, bars.label.nunique() - 0.5])
    widgets.chart(figure)
    drops = means[means.kind == "watermarked"].pivot_table(index=["task", "label"], columns="aspect", values="drop_pct")
    drops.index.names = ["Task", "Run"]
    st.caption("Drop % = (unwatermarked − watermarked) / unwatermarked × 100")
    st.dataframe(drops[aspects], width="stretch", column_config=widgets.worded_columns(drops[aspects], decimals=1))


def verdicts_section(judgments) -> None:
    """The verdicts, filtered, and one opened beside its texts."""
    st.subheader("Verdicts")
    filters = st.columns(4)
    method = filters[0].selectbox("Method", ["all"] + sorted(judgments.method.unique()))
    task = filters[1].selectbox("Task", ["all"] + sorted(judgments.task.unique(), key=task_label),
                                format_func=task_label, key="verdict-task")
    status = filters[2].selectbox("Status", ["all", "ok", "failed", "unreachable"],
                                  help="failed: a verdict came back but could not be parsed; unreachable: no verdict came "
                                       "back (asked again on the next run)")
    max_fact = filters[3].slider("Watermarked factual accuracy at most", 1.0, 5.0, 5.0, 0.5)
    view = verdicts.filter_verdicts(judgments, method, task, status, max_fact)
    st.caption(counted(len(view), "verdict", "verdicts"))
    if view.empty:
        return
    st.dataframe(verdicts.verdict_table(view), hide_index=True, width="stretch")
    picked = st.selectbox("Open a verdict", range(len(view)), format_func=lambda i: verdicts.verdict_label(view.iloc[i]))
    verdict = view.iloc[picked]
    sample = queries.sample_row(resources.revision(), verdict.run_id, int(verdict.sample_idx))
    st.markdown(f"**Prompt:** {markup.inert(sample['prompt'])}", unsafe_allow_html=True)
    st.markdown(f"**Reference:** {markup.inert(sample['reference'])}", unsafe_allow_html=True)
    answer_a, answer_b = st.columns(2)
    for column, letter, is_watermarked in ((answer_a, "A", verdict.watermarked_first), (answer_b, "B", not verdict.watermarked_first)):
        kind = "watermarked" if is_watermarked else "unwatermarked"
        scores = verdict[f"scores_{kind}"]
        column.markdown(f"**Answer {letter}** ({kind}) · scores {verdicts.scores_text(scores, verdict.status)}",
                        unsafe_allow_html=True)
        column.markdown(markup.inert(sample[f"{kind}_text"]), unsafe_allow_html=True)
    st.markdown(f"**Parse status:** {verdict.status}" + (f" ({markup.inert(verdict.reason)})" if verdict.reason else ""),
                unsafe_allow_html=True)
    st.markdown("**Judge's reasoning**")
    st.markdown(markup.inert(verdict.raw_output), unsafe_allow_html=True)


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Judge")
    st.caption(
        "For every sample an LLM judge sees the prompt and both outputs as answers A and B (in a stored random "
        "order) and scores each 1–5 for coherence, relevance (completeness for summaries) and factual accuracy. "
        "The paper used gpt-4o-2024-08-06."
    )

    runs = widgets.runs_or_stop()

    with st.expander(f"Judge prompt templates (version {PROMPT_VERSION})"):
        shown = st.radio("Task", list(TASKS), horizontal=True, format_func=lambda name: TASKS[name].label, key="template-task")
        st.code(template_text(shown), language=None, wrap_lines=True)

    choice = backend_section()
    run_section(runs, choice)
    judgments = queries.judgments(resources.revision())
    if judgments.empty:
        st.stop()

    for warning in indiscriminate_judges(judgments):
        st.warning(markup.message(warning))
    smoke = smoke_test_judges(judgments)
    if smoke:
        st.info(markup.message(
            f"The verdicts of {', '.join(smoke)} are a smoke test: the embedded 135M model is forced into the verdict "
            "format, so they test the plumbing, not the texts. They are marked so below, and the FWS and Report pages "
            "leave them out of FWS and the rankings unless you count them there."))
    means_section()
    verdicts_section(judgments)


render()
