"""`make run`: Streamlit serving app.py, its pages routed by app.py's st.navigation from a fresh server's first paint.

Streamlit treats a project with a pages/ folder as a "version 1" multipage app until st.navigation first runs: the
first script run of a server process routes by the folder, and names the browser tab after app.py ("app") for an
instant, a rater's link and the sign-in included. The app routes with st.navigation alone, so the launcher says so
before the server starts. Options after `python -m fwsapp.ui.serve` go to `streamlit run` (--server.port 8502, …).
"""
from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app.py"


def settle_lazy_imports() -> None:
    """Import transformers whole (0.6 s, no torch) before any script runs. Its package module stands in sys.modules
    before its `__init__` has finished, and a second thread that imports from it meanwhile fails ("cannot import name
    'AutoTokenizer' from 'transformers'"). The pages import it when they first need a model, and two script runs of one
    session overlap (a page still loading its taggers and the rerun a keystroke starts), so it is imported here, once,
    and torch still only when a page needs it."""
    import transformers  # noqa: F401


def main(argv: list[str] | None = None) -> None:
    from streamlit.runtime.pages_manager import PagesManager
    from streamlit.web import cli

    settle_lazy_imports()
    PagesManager.uses_pages_directory = False  # what app.py's first st.navigation call sets, set before the first run
    sys.argv = ["streamlit", "run", str(APP), *(sys.argv[1:] if argv is None else argv)]
    cli.main()


if __name__ == "__main__":
    main()
