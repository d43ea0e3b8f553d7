"""Report: the paper's tables over every run, live, with Markdown and LaTeX downloads."""
import streamlit as st

from fwsapp.ui import queries, resources
from fwsapp.fws import DEFAULT_ALPHA, DEFAULT_BETA
from fwsapp.tables import TABLES, render
from fwsapp.ui.router import through_router

through_router()

st.title("Report")
st.caption("The paper's tables, rebuilt from every run in the database: generated and imported. None means not computed yet.")
columns = st.columns(2)
alpha = columns[0].number_input("α (relevance and factual accuracy)", 0.0, 1.0, DEFAULT_ALPHA, 0.01)
beta = columns[1].number_input("β (coherence)", 0.0, 1.0, DEFAULT_BETA, 0.01)
report = queries.report(resources.revision(), alpha, beta)
if not report["runs"]:
    st.info("No runs yet: generate one, or import logs on the Import page.")
    st.stop()
for title, build in TABLES.items():
    frame = build(report)
    if frame.empty:
        continue
    st.subheader(title)
    st.dataframe(frame.style.format(precision=3), hide_index=True, width="stretch")
downloads = st.columns(2)
downloads[0].download_button("Download Markdown", render(report, "markdown"), "fwsapp-tables.md", "text/markdown")
downloads[1].download_button("Download LaTeX", render(report, "latex"), "fwsapp-tables.tex", "text/x-tex")
