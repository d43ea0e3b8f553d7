"""Experiments: a spec file's grid of runs, its dry run, and launching it here or on a Ray cluster."""
import streamlit as st

from fwsapp import counted
from fwsapp.data.tasks import tasks_named
from fwsapp.ui import render as markup
from fwsapp.orchestration.grid import SpecError
from fwsapp.paths import EXPERIMENTS_DIR
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Experiments")
    st.caption(
        "A spec file (TOML) holds a whole grid: models × tasks × seeds × methods with their sweeps, then the score, "
        "analyze and judge steps. Runs already stored are skipped, so launching a spec again finishes what is missing. "
        "`python -m fwsapp grid SPEC` does the same headless."
    )

    source = st.radio("Spec", ["A shipped spec", "Upload a TOML file"], horizontal=True)
    if source == "A shipped spec":
        shipped = sorted(EXPERIMENTS_DIR.glob("*.toml"))
        chosen = st.selectbox("File", shipped, format_func=lambda path: path.name)
        text = chosen.read_text()
        base = str(chosen)
    else:
        upload = st.file_uploader("Spec file", type=["toml"])
        if upload is None:
            st.info("Upload a spec; experiments/demo.toml in the project is a small example to start from.")
            st.stop()
        base = upload.name
        try:
            text = upload.getvalue().decode()
        except UnicodeDecodeError:
            st.error(markup.message(f"{upload.name}: not a text file. A spec is TOML text."))
            st.stop()
    with st.expander("Spec file", expanded=False):
        st.code(text, language="toml")
    try:
        uploaded = source != "A shipped spec"
        spec = queries.grid_spec(base, text, uploaded)  # loaded once, for the plan too
        table = queries.grid_plan(resources.revision(), base, text, uploaded)
    except SpecError as error:
        st.error(markup.message(str(error)))
        st.stop()

    missing, units = int(table["units missing"].sum()), int(table["units"].sum())
    st.subheader("Dry run")
    st.caption(f"{counted(len(table), 'run', 'runs')}; {missing} of {units} units (batches) still to generate"
               + (f"; then {', '.join(spec.steps.names())}." if spec.steps.names() else "."))
    st.dataframe(tasks_named(table), hide_index=True, width="stretch")

    address = st.text_input("Ray cluster address", "", placeholder="host:6379, or local; empty: in this process",
                            help="The head node's address (`ray start --head` prints it). Each worker keeps one model "
                                 "loaded; this app writes every result.").strip()
    manager = resources.jobs()
    if st.button("Launch", type="primary", disabled=bool(manager.active("grid"))):
        manager.start_grid(spec, address or None)
        st.rerun()
    widgets.job_status("grid", "samples")

    done = table[table["units missing"] == 0]
    if not done.empty:
        st.caption(f"{len(done)} of the spec's runs are complete: open them on")
        for page, label in (("pages/detect.py", "Detect"), ("pages/quality.py", "Quality"), ("pages/entities.py", "Entities")):
            st.page_link(page, label=label)


render()
