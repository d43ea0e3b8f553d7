"""Playground: type a prompt, see it answered without and with a watermark, token by token, with the detector's say."""
import html

import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.data.loaders import load_dataset
from fwsapp.data.tasks import TASKS
from fwsapp.watermark.methods import METHODS, watermark_names
from fwsapp.models import EMBEDDED_MODEL, PRESETS, ModelLoadError
from fwsapp import duration
from fwsapp.generation.playground import KINDS, answer_figures, compare_methods, history_row, keep, try_prompt
from fwsapp.ui import resources, widgets
from fwsapp.ui.router import through_router

through_router()

HISTORY = "playground_history"


def comparison_progress(step) -> str:
    """Where a comparison is, and about how long it has left."""
    left = "" if step.seconds_left is None else f" · about {duration(step.seconds_left)} left"
    return (f"Answer {step.generation} of {step.generations} ({step.method}, {step.kind}): token {step.token}{left}. "
            "The unwatermarked answer is generated once for all the methods.")


def show_answer(container, trial, kind: str, figures: dict, title: str) -> None:
    found = trial.detections[kind]
    container.markdown(f"**{title}** · {html.escape(markup.answer_line(figures), quote=False)}", unsafe_allow_html=True)
    if found.token_flags:
        container.markdown(markup.detection_tokens(trial.tokens[kind], found), unsafe_allow_html=True)
        container.caption(markup.detection_legend(trial.config.method, found))
    else:
        container.text(trial.text(kind))


def single_try_view() -> None:
    """The latest try: both answers side by side, and keeping it as a run."""
    trial = st.session_state.get("playground_trial")
    if trial is not None:
        st.subheader("Result", anchor="playground-result")
        figures = answer_figures(trial)
        for column, kind in zip(st.columns(2), KINDS):
            show_answer(column, trial, kind, figures[kind], kind.capitalize())
        # The colours are said once, under each answer, in the method's own terms (a Gumbel answer has no green list).
        st.caption("Each method is held to its own threshold, shown beside its verdict. Prompt: "
                   + markup.message(trial.prompt[:120]))
        if st.button("Keep as a run", disabled=not trial.reference,
                     help="Stores this try as a one-sample run, as the Generate page would, for the other pages."):
            run_id = keep(resources.store(), trial)
            st.success(f"Kept as run {run_id}: open it on the Detect, Quality or Judge page.")
        if not trial.reference:
            st.caption("Add a reference answer above and generate again to keep a try: the quality metrics compare with it.")


def compare_view(prompt: str, model_name: str, max_new_tokens: int, seed: int, task: str, reference: str) -> None:
    """One prompt under several watermarks at their defaults, side by side."""
    st.subheader("Compare watermarks on this prompt")
    compared = st.multiselect("Watermarks, each at its defaults (same model, seed and length)", watermark_names(),
                              key="playground-compare")
    if st.button("Compare", disabled=not compared):
        status = st.empty()
        try:
            lm = resources.model(model_name)
            trials = compare_methods(lm, prompt, compared, int(max_new_tokens), int(seed), task=task, reference=reference,
                                     on_step=lambda step: status.caption(comparison_progress(step)))
        except (ValueError, ModelLoadError) as error:
            status.error(markup.message(str(error)))
            st.stop()
        status.empty()
        st.session_state["playground_comparison"] = trials
        st.session_state["playground_scroll"] = "playground-comparison"
        st.session_state.setdefault(HISTORY, []).extend(history_row(each) for each in trials)
    trials = st.session_state.get("playground_comparison")
    if trials:
        st.subheader("Side by side", anchor="playground-comparison")
        table = markup.tries_table([history_row(each) for each in trials]).drop(columns=["new tokens", "seed", "params"])
        st.dataframe(table, hide_index=True, width="stretch")
        per_row = 3
        for start in range(0, len(trials), per_row):
            for column, each in zip(st.columns(per_row), trials[start:start + per_row]):
                show_answer(column, each, "watermarked", answer_figures(each)["watermarked"], each.config.method)
        st.caption("Each watermarked answer beside the others; the unwatermarked answer is the same for all of them "
                   "(same model and seed): the single try above shows it.")


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Playground")
    st.caption(
        "Type a prompt, pick a watermark and its strength, and compare the two answers: the same model and seed, "
        "without and with the watermark, each token coloured by how the detector counts it. Change δ or the method and "
        "generate again: every try is kept in the history below, so the trade-off shows live."
    )
    left, right = st.columns([3, 2])
    with left:
        task = st.selectbox("Task (its dataset items below)", list(TASKS), index=list(TASKS).index("qa"),
                            format_func=lambda name: TASKS[name].label)
        items = load_dataset(task)
        item = st.selectbox("Start from a dataset item (or type your own below)", [None] + list(range(len(items))),
                            format_func=lambda index: "—" if index is None else items[index].prompt[:90])
        chosen = items[item] if item is not None else None
        prompt = st.text_area("Prompt", chosen.prompt if chosen else "What are the early signs of type 2 diabetes?",
                              height=90, key=f"playground-prompt-{task}-{item}")
        reference = st.text_area("Reference answer (optional; needed to keep the try as a run)",
                                 chosen.reference if chosen else "", height=70, key=f"playground-reference-{task}-{item}")
    with right:
        model_name = st.selectbox("Model", list(PRESETS), format_func=lambda name: PRESETS[name])
        method = st.selectbox("Watermark", watermark_names(), help="; ".join(f"{m}: {METHODS[m].help}" for m in watermark_names()))
        params = widgets.param_inputs(METHODS[method], f"playground-{method}")
        tokens_column, seed_column = st.columns(2)
        max_new_tokens = tokens_column.number_input("New tokens", 8, 512, 48, step=8)
        seed = seed_column.number_input("Seed", 0, 2**31 - 1, 42)
    if model_name != EMBEDDED_MODEL:
        st.caption("7B models need a GPU and a local copy or Hub access; the embedded model always works offline.")

    if st.button("Generate", type="primary"):
        status = st.empty()
        try:
            lm = resources.model(model_name)
            trial = try_prompt(lm, prompt, method, params, int(max_new_tokens), int(seed), task=task, reference=reference,
                               on_step=lambda kind, step: status.caption(
                                   f"Generating the {kind} answer: token {step} of {max_new_tokens}…"))
        except (ValueError, ModelLoadError) as error:  # an empty prompt, a bad parameter, a model not here: one line
            status.error(markup.message(str(error)))
            st.stop()
        status.empty()
        st.session_state["playground_trial"] = trial
        st.session_state["playground_scroll"] = "playground-result"
        st.session_state.setdefault(HISTORY, []).append(history_row(trial))
    single_try_view()
    compare_view(prompt, model_name, int(max_new_tokens), int(seed), task, reference)

    if target := st.session_state.pop("playground_scroll", None):
        widgets.scroll_to(target)  # the new result at the top of the viewport, not below the fold

    history = st.session_state.get(HISTORY, [])
    if history:
        st.subheader("History")
        st.dataframe(markup.tries_table(history[::-1]), hide_index=True, width="stretch")


render()
