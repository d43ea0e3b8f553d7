"""Every page runs through app.py's router, even on the first request of a fresh server.

Streamlit decides at its first session whether the app uses the old `pages/` folder mode: the folder
exists, so until app.py has called `st.navigation` once, a request straight to /report runs
pages/report.py alone, without the sidebar's sections or the database panel. A page that finds that
mode still on runs app.py in its place, within the same script run (so a clicked button's value is not
lost to a rerun): app.py's `st.navigation` turns the folder mode off for the process and runs the
requested page, whose url path is the same in both modes.

Why a router and not a setting: Streamlit (1.67) has no option to turn that mode off. `PagesManager` sets it from the
existence of a `pages/` folder beside the main script, and only `st.navigation` clears it; the owner's layout keeps
`pages/` there.
"""
from pathlib import Path

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx


def through_router() -> None:
    """Call first on every page."""
    if not PagesManager.uses_pages_directory:
        return
    app = Path(get_script_run_ctx().main_script_path)
    exec(compile(app.read_text(), str(app), "exec"), {"__name__": "__main__", "__file__": str(app)})  # noqa: S102
    st.stop()  # the page has run inside app.py
