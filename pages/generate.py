"""Generate: unwatermarked and watermarked outputs for a medical task, in a background job."""
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.loaders import DEMO, DatasetError, load_dataset, save_upload
from fwsapp.data.tasks import TASKS
from fwsapp.generation.generate import RunConfig
from fwsapp.models import EMBEDDED_MODEL, PRESETS
from fwsapp.watermark.methods import METHODS, score_label
from fwsapp.ui.router import through_router

through_router()


LATEST = 10  # samples shown under the job; every one of a small run


def latest_samples(job) -> None:
    table = queries.samples(resources.revision(), job.key.removeprefix("generate:"))
    if table.empty:
        return
    shown = table.tail(LATEST)
    st.caption(markup.message(f"{'Latest ' + str(len(shown)) + ' of ' + str(len(table)) if len(table) > LATEST else 'All'} "
                              f"samples of {job.label}: the same prompt, without and with the watermark"))
    for row in shown.iloc[::-1].itertuples():
        st.markdown(f"**Prompt {row.sample_idx}:** {markup.inert(row.prompt)}", unsafe_allow_html=True)
        plain, marked = st.columns(2)
        name = score_label(row.method)
        plain.markdown(f"**Unwatermarked** · {name} = {row.score_unwatermarked:.2f}", unsafe_allow_html=True)
        plain.markdown(markup.inert(row.unwatermarked_text), unsafe_allow_html=True)
        if isinstance(row.watermarked_text, str):
            marked.markdown(f"**Watermarked** · {name} = {row.score_watermarked:.2f}", unsafe_allow_html=True)
            marked.markdown(markup.inert(row.watermarked_text), unsafe_allow_html=True)
        else:
            marked.caption("Post-hoc detector: no watermarked text; the model text is scored against the reference.")
        st.divider()


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Generate")
    st.caption(
        "Pick a medical task and a watermark. The job generates an unwatermarked and a watermarked output per "
        "prompt with the same model and seed, stores both with their detection scores, and survives leaving the page."
    )

    manager = resources.jobs()
    # The form shows what the latest job makes, so coming back to the page while it runs does not reset it.
    latest = manager.latest("generate")
    shown = latest.config if latest is not None and latest.config is not None else RunConfig(task=next(iter(TASKS)),
                                                                                             method=METHODS.default)
    left, right = st.columns(2)
    with left:
        task = st.selectbox("Task", list(TASKS), index=list(TASKS).index(shown.task),
                            format_func=lambda name: f"{TASKS[name].label} ({TASKS[name].dataset})")
        source = st.radio("Dataset", ["Built-in demo data", "Upload a file"], horizontal=True)
        dataset = DEMO
        if source == "Upload a file":
            upload = st.file_uploader("JSON, JSONL or CSV: `prompt` + `natural`/`reference`, or a raw table", type=["json", "jsonl", "csv"])
            if upload is None:
                st.info("Upload a file, or use the built-in demo data.")
                st.stop()
            try:
                dataset = str(save_upload(task, upload.name, upload.getvalue()))
            except DatasetError as error:
                st.error(markup.message(str(error)))
                st.stop()
        else:
            st.caption("Demo data written for fwsapp: short, illustrative, not clinical advice.")
        try:
            available = len(load_dataset(task, dataset))
        except DatasetError as error:
            st.error(markup.message(str(error)))
            st.stop()
        model_choices = list(PRESETS) + ["Other Hugging Face id or local path"]
        preset = st.selectbox("Model", model_choices,
                              index=model_choices.index(shown.model if shown.model in PRESETS else model_choices[-1]),
                              format_func=lambda name: PRESETS.get(name, name))
        model_name = preset if preset in PRESETS else st.text_input(
            "Model id or path", "" if shown.model in PRESETS else shown.model, placeholder="org/model or /path/to/model")
        if preset != EMBEDDED_MODEL:
            st.caption("7B models need a GPU and a local copy or Hub access; the embedded model always works offline.")
    with right:
        method = st.selectbox("Watermark", METHODS.names(), index=METHODS.names().index(shown.method),
                              help="; ".join(f"{entry.name}: {entry.help}" for entry in METHODS))
        st.caption(METHODS[method].help)
        params = widgets.param_inputs(METHODS[method], f"generate-{method}",
                                      shown.params if method == shown.method else None)
        count, tokens, batch, seed = st.columns(4)
        n = count.number_input("Samples", 1, available, min(shown.n, available), help=f"{available} available")
        max_new_tokens = tokens.number_input("New tokens", 8, 1024, shown.max_new_tokens, step=8)
        batch_size = batch.number_input("Batch size", 1, 64, shown.batch_size)
        seed_value = seed.number_input("Seed", 0, 2**31 - 1, shown.seed)

    if not model_name:
        st.stop()
    try:
        config = RunConfig(
            task=task, method=method, dataset=dataset, model=model_name, params=params, n=int(n),
            max_new_tokens=int(max_new_tokens), batch_size=int(batch_size), seed=int(seed_value),
        )
    except ValueError as error:  # a parameter out of range: said before any work starts
        st.error(markup.message(str(error)))
        st.stop()
    if st.button("Run", type="primary", disabled=bool(manager.active("generate"))):
        manager.start_generation(config)
        st.rerun()


    widgets.job_status("generate", "samples", body=latest_samples)


render()
