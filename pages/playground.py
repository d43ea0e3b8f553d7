"""Playground: type a prompt, see it answered without and with a watermark, token by token, with the detector's say."""
import pandas as pd
import streamlit as st

from fwsapp import render
from fwsapp.data.loaders import load_dataset
from fwsapp.data.tasks import TASKS
from fwsapp.methods import REGISTRY, WATERMARKS, score_label
from fwsapp.models import EMBEDDED_MODEL, PRESETS
from fwsapp.playground import KINDS, keep, try_prompt
from fwsapp.ui import resources, widgets
from fwsapp.ui.router import through_router

through_router()

st.title("Playground")
st.caption(
    "Type a prompt, pick a watermark and its strength, and compare the two answers: the same model and seed, "
    "without and with the watermark, each token coloured by how the detector counts it. Change δ or the method and "
    "generate again: every try is kept in the history below, so the trade-off shows live."
)

HISTORY = "playground_history"
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
    method = st.selectbox("Watermark", WATERMARKS, help="; ".join(f"{m}: {REGISTRY[m].description}" for m in WATERMARKS))
    params = widgets.param_inputs(REGISTRY[method], f"playground-{method}")
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
                           on_step=lambda kind, step: status.caption(f"Generating the {kind} answer: token {step} of {max_new_tokens}…"))
    except ValueError as error:  # an empty prompt, a parameter out of range: before any generation
        status.error(render.message(str(error)))
        st.stop()
    status.empty()
    st.session_state["playground_trial"] = trial
    history = st.session_state.setdefault(HISTORY, [])
    history.append({  # the answer first; the long parameter list last, where it may run off the page
        "method": method,
        f"{score_label(method)} unwatermarked": trial.detections["unwatermarked"].score,
        f"{score_label(method)} watermarked": trial.detections["watermarked"].score,
        "watermark detected": trial.verdict("watermarked"), "false alarm": trial.verdict("unwatermarked"),
        "new tokens": int(max_new_tokens), "seed": int(seed), "seconds": round(trial.seconds, 1),
        "params": ", ".join(f"{key}={value}" for key, value in params.items()),
    })

trial = st.session_state.get("playground_trial")
if trial is not None:
    label = score_label(trial.config.method)
    columns = st.columns(2)
    for column, kind in zip(columns, KINDS):
        found = trial.detections[kind]
        verdict = "watermark detected" if trial.verdict(kind) else "no watermark detected"
        column.markdown(f"**{kind.capitalize()}** · {label} = {found.score:.2f} · {verdict} · "
                        f"{found.num_tokens_scored} tokens scored")
        if found.token_flags:
            column.markdown(render.token_view(trial.tokens[kind], found.token_flags), unsafe_allow_html=True)
        else:
            column.text(trial.text(kind))
    st.caption(f"{trial.config.method}: green = the token counts for the watermark, red = against, grey = not scored "
               f"(the first tokens only seed the green list). Prompt: " + render.message(trial.prompt[:120]))
    if st.button("Keep as a run", disabled=not trial.reference,
                 help="Stores this try as a one-sample run, as the Generate page would, for the other pages."):
        run_id = keep(resources.store(), trial)
        st.success(f"Kept as run {run_id}: open it on the Detect, Quality or Judge page.")
    if not trial.reference:
        st.caption("Add a reference answer above and generate again to keep a try: the quality metrics compare with it.")

history = st.session_state.get(HISTORY, [])
if history:
    st.subheader("History")
    st.dataframe(pd.DataFrame(history[::-1]), hide_index=True, width="stretch")
