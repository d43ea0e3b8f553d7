"""Generate: unwatermarked and watermarked outputs for a medical task, in a background job."""
import pandas as pd
import streamlit as st

from fwsapp import share_text
from fwsapp.ui import render as markup
from fwsapp.ui import queries, resources, widgets
from fwsapp.data.loaders import DEMO, DatasetError, load_dataset, save_upload
from fwsapp.data.tasks import TASKS
from fwsapp.generation.run_config import RunConfig
from fwsapp.models import EMBEDDED_MODEL, PRESETS
from fwsapp.watermark.methods import METHODS, p_resolution, score_label, served_names
from fwsapp.ui.router import through_router

through_router()


LATEST = 10  # samples shown under the job; every one of a small run
SERVED = "A serving engine (vLLM)"
GENERATORS = {"This app (transformers)": "the model loaded in this app's process",
              SERVED: "your own OpenAI-compatible server, watermarking as it is configured to"}


def latest_samples(job) -> None:
    """The running or finished job's latest samples side by side, with its coverage warning and fitted key."""
    run_id = job.key.removeprefix("generate:")
    table = queries.samples(resources.revision(), run_id)
    if table.empty:
        return
    shown = table.tail(LATEST)
    st.caption(markup.message(f"{'Latest ' + str(len(shown)) + ' of ' + str(len(table)) if len(table) > LATEST else 'All'} "
                              f"samples of {job.label}: the same prompt, without and with the watermark"))
    coverage = queries.watermark_coverage(resources.revision(), (run_id,))
    if not coverage.empty and coverage["flags"].iloc[0]:
        flags, share = coverage["flags"].iloc[0], coverage["watermarked share"].iloc[0]
        st.warning(markup.message(f"This run carries no watermark as asked: {flags}. {share_text(share)} of "
                                  "its tokens are watermarked; the Detect page's Coverage tab says why."))
    if fitted := queries.run_fit(resources.revision(), run_id):
        st.caption(markup.message(f"Part of {table.method.iloc[0]}'s key was fitted on {fitted['references']} references "
                                  "of this dataset before the run began, and is kept with the run, so its texts are "
                                  "detected with that fit wherever the dataset goes."))
    runs = queries.runs(resources.revision())
    step = p_resolution(table.method.iloc[0], runs[runs.run_id == run_id].params.iloc[0])
    for row in shown.iloc[::-1].itertuples():
        st.markdown(f"**Prompt {row.sample_idx}:** {markup.inert(row.prompt)}", unsafe_allow_html=True)
        plain, marked = st.columns(2)
        name = score_label(row.method)
        plain.markdown(f"**Unwatermarked** · {markup.score_equation(name, row.score_unwatermarked, step)}",
                       unsafe_allow_html=True)
        plain.markdown(markup.inert(row.unwatermarked_text), unsafe_allow_html=True)
        if isinstance(row.watermarked_text, str):
            rejected = getattr(row, "watermarked_rejections", None)
            cost = (f" · {row.watermarked_seconds:.1f} s" if pd.notna(row.watermarked_seconds) else "") + (
                f" · {int(rejected)} candidate sentences rejected" if pd.notna(rejected) else "")
            marked.markdown(f"**Watermarked** · {markup.score_equation(name, row.score_watermarked, step)}{cost}",
                            unsafe_allow_html=True)
            marked.markdown(markup.inert(row.watermarked_text), unsafe_allow_html=True)
        else:
            marked.caption("Post-hoc detector: no watermarked text; the model text is scored against the reference.")
        st.divider()


def dataset_choice(task: str) -> tuple[str, int]:
    """The dataset (the demo, or an uploaded file kept under data/) and how many prompts it holds; stops the page with
    what was wrong in a file."""
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
    return dataset, available


def generator_choice(shown: RunConfig) -> tuple[str, str | None, str, str | None, str | None]:
    """Where the run is generated: (choice, server URL, model, API key variable, tokenizer); stops the page until a
    served run names its server and model."""
    where = st.radio("Generated by", list(GENERATORS), index=int(shown.server is not None), horizontal=True,
                     help="; ".join(f"{name}: {help}" for name, help in GENERATORS.items()))
    server = api_key_env = tokenizer = None
    if where == SERVED:
        server = st.text_input("Server URL", shown.server or "", placeholder="http://localhost:8000/v1")
        model_name = st.text_input("Served model", shown.model if shown.server else "",
                                   placeholder="the name it serves, as in GET /v1/models")
        key_variable, tokenizer_name = st.columns(2)
        api_key_env = key_variable.text_input("API key variable", placeholder="optional: VLLM_API_KEY",
                                              help="The environment variable of this app's server holding the API "
                                                   "key, if the engine wants one; the key itself is never shown.")
        tokenizer = tokenizer_name.text_input("Tokenizer", (shown.tokenizer or "") if shown.server else "",
                                              placeholder="default: the served model's",
                                              help="For the detector's vocabulary, and answers returned without "
                                                   "token ids.")
        st.caption("Each prompt is asked twice: as served (watermarked by the engine), and with \"watermarking\": "
                   "false. The watermark's key is the engine's: type $VARIABLE to read it from the environment, "
                   "and only its fingerprint is stored.")
        if not (server and model_name):
            st.info("Give the server's URL and the model it serves.")
            st.stop()
    else:
        model_choices = list(PRESETS) + ["Other Hugging Face id or local path"]
        preset = st.selectbox("Model", model_choices,
                              index=model_choices.index(shown.model if shown.model in PRESETS else model_choices[-1]),
                              format_func=lambda name: PRESETS.get(name, name))
        model_name = preset if preset in PRESETS else st.text_input(
            "Model id or path", "" if shown.model in PRESETS else shown.model, placeholder="org/model or /path/to/model")
        if preset != EMBEDDED_MODEL:
            st.caption("7B models need a GPU and a local copy or Hub access; the embedded model always works offline.")
    return where, server, model_name, api_key_env, tokenizer


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
        dataset, available = dataset_choice(task)
        where, server, model_name, api_key_env, tokenizer = generator_choice(shown)
    with right:
        offered = served_names() if where == SERVED else METHODS.names()
        method = st.selectbox("Watermark", offered, index=offered.index(shown.method) if shown.method in offered else 0,
                              help="; ".join(f"{entry.name}: {entry.help}" for entry in METHODS if entry.name in offered))
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
            max_new_tokens=int(max_new_tokens), batch_size=int(batch_size), seed=int(seed_value), server=server,
            tokenizer=tokenizer.strip() or None if tokenizer else None,
        )
    except ValueError as error:  # a parameter out of range: said before any work starts
        st.error(markup.message(str(error)))
        st.stop()
    if st.button("Run", type="primary", disabled=bool(manager.active("generate"))):
        manager.start_generation(config, api_key_env or None)
        st.rerun()

    widgets.job_status("generate", "samples", body=latest_samples)


render()
