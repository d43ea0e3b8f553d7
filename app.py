"""fwsapp: what does an LLM watermark do to the medical facts in a text? Run with `make run`."""
import streamlit as st

from fwsapp.ui import gate, queries, render, resources, widgets
from fwsapp.store import StoreError

# A rater's invite link opens their ratings and nothing else: every URL path of this session leads there, and
# nothing on it, the browser tab's title included, says what the study compares.
if gate.rater() is not None:
    st.set_page_config(page_title="Rate answers", page_icon="🩺", layout="wide")
    st.navigation([st.Page("pages/rater.py", title="Rate answers", icon="🩺", url_path="rater")], position="hidden").run()
    st.stop()
# The sign-in page says nothing of what the app studies: a rater who drops ?invite from a link lands there.
st.set_page_config(page_title="fwsapp", page_icon="🩺", layout="wide")
gate.admin_or_stop()

SECTIONS = {
    "Start": [
        st.Page("pages/home.py", title="Home", icon="🏠", default=True),
        st.Page("pages/playground.py", title="Playground", icon="🎛️", url_path="playground"),
    ],
    "Pipeline": [
        st.Page("pages/generate.py", title="Generate", icon="✍️"),
        st.Page("pages/detect.py", title="Detect", icon="🔎"),
        st.Page("pages/robustness.py", title="Robustness", icon="🛡️"),
        st.Page("pages/quality.py", title="Quality", icon="📏"),
        st.Page("pages/judge.py", title="Judge", icon="⚖️"),
        st.Page("pages/experiments.py", title="Experiments", icon="🧪"),
    ],
    "Why": [
        st.Page("pages/entities.py", title="Entities", icon="🧬"),
        st.Page("pages/entropy.py", title="Entropy", icon="📈"),
    ],
    "Results": [
        st.Page("pages/fws.py", title="FWS", icon="⚖"),
        st.Page("pages/rate.py", title="Rate", icon="🩺"),
        st.Page("pages/study.py", title="Study", icon="👥"),
        st.Page("pages/report.py", title="Report", icon="📋"),
        st.Page("pages/import.py", title="Import", icon="📥"),
    ],
}
pages = st.navigation(
    SECTIONS,
    position="hidden",  # listed below by hand: Streamlit's own list would first paint every file of pages/
)

with st.sidebar:
    # Every page in sight, by section (folded behind "View more", Rate, Report and Import were hard to find).
    for section, section_pages in SECTIONS.items():
        st.caption(section)
        for page in section_pages:
            st.page_link(page)
    st.caption("Database")
    st.code(str(resources.db_path()), language=None)
    try:
        resources.store()
    except StoreError as error:
        st.error(render.message(str(error)))
        st.stop()
    writes_before_page = widgets.mark_drawn()
    widgets.running_jobs()
    models_in_use = st.empty()
    widgets.models_in_use(models_in_use)
    # Checked when opened (the app reruns then), not at every first paint: the device check imports torch, about a
    # second and a half that a page which loads no model need not wait for.
    with st.expander("Setup check", key="setup-check", on_change="rerun"):
        if st.session_state.get("setup-check"):
            st.text("\n".join(f"{row.status}: {row.topic} {row.item}\n    {row.detail}"
                               for row in queries.setup_checks().itertuples()))
        st.caption("The same as `python -m fwsapp doctor`: what fits in memory, what is available offline.")

widgets.done_notice()  # what the click that reran the page did, above the page it reran
pages.run()
widgets.models_in_use(models_in_use)  # again: the page may have loaded one (the Playground, the Detect page's text box)
widgets.own_writes_drawn(writes_before_page)
