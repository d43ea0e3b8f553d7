"""Report: the paper's tables over every run, live, with Markdown and LaTeX downloads; each run's samples exported."""
import streamlit as st

from fwsapp.results.export import EXPORT_FORMATS
from fwsapp.results.run_names import run_label
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui import render as markup
from fwsapp.results.tables import render as table_html, report_tables, weights_line
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """The page, drawn top to bottom."""
    st.title("Report")
    st.caption("The paper's tables, rebuilt from every run in the database: generated and imported. None means not computed yet.")
    columns = st.columns(2)
    shared = widgets.fws_weights()
    alpha = columns[0].number_input("α (relevance and factual accuracy)", 0.0, 1.0, shared[0], 0.01)
    beta = columns[1].number_input("β (coherence)", 0.0, 1.0, shared[1], 0.01)
    widgets.set_fws_weights(alpha, beta)
    include_smoke = widgets.count_smoke_tests(queries.report_parts(resources.revision())["smoke_tests_left_out"],
                                             "report-smoke")
    judge = widgets.judge_choice(queries.report_parts(resources.revision(), include_smoke)["judge_choices"],
                                 "report-judge")
    report = queries.report(resources.revision(), alpha, beta, include_smoke, judge)
    st.caption(f"The FWS page uses the same weights. Table 4 and both downloads state them: {weights_line(report)}.")
    if not report["runs"]:
        widgets.no_runs_yet()
        st.stop()
    for title, frame in report_tables(report):
        st.subheader(markup.message(title))  # Table 4 names the judge, as it was typed or imported
        widgets.exported_table(frame)
    runs = queries.runs(resources.revision())
    named = {row.run_id: run_label(row._asdict()) for row in runs.itertuples()}
    # The files are built only while the expander is open, not on every draw. They are handed over as bytes, not as a
    # callable run on the click: Streamlit drops a file built on the click after two runs of the page's fragments (the
    # sidebar's watcher runs every 2 s), so a browser slow to fetch it got nothing.
    with widgets.kept_open("Export a run", "export-open") as export:
        st.caption("A row per sample: the prompt, the reference, both texts and their token ids, the detection scores, "
                   "each text's evidence record, each stored quality metric per text (`quality_<metric>_<kind>`) "
                   "and one judge's 1-5 scores (`judge_<aspect>_<kind>`, the judge in `judge_model`). "
                   "`python -m fwsapp export` writes the same.")
        exported = st.selectbox("Run", list(named), format_func=named.get, key="export-run")
        exported_judge = widgets.judge_choice(queries.run_judges(resources.revision(), exported), "export-judge")
        if export.open:
            buttons = st.columns(len(EXPORT_FORMATS))
            for column, (fmt, file_format) in zip(buttons, EXPORT_FORMATS.items()):
                widgets.download(f"Download {file_format.label}",
                                 queries.export(resources.revision(), exported, fmt, exported_judge),
                                 f"fwsapp-{exported}.{fmt}", file_format.mime, column, key=f"export-{fmt}")
    with st.expander("Delete a run"):
        st.caption("Removes the run with every row that belongs to it: texts, scores, verdicts, analyses, ratings. "
                   "`python -m fwsapp runs --delete ID` does the same.")
        doomed = st.selectbox("Run", list(named), format_func=named.get, key="delete-run")
        typed = st.text_input("Type the run id to confirm", key="delete-confirm").strip()
        busy = resources.jobs().generating(doomed) if doomed else None
        if busy is not None:
            st.warning(markup.message(f"{busy.label} is generating this run: cancel it first (its page has Cancel), then "
                                       "delete."))
        if st.button("Delete this run", disabled=typed != doomed or busy is not None):
            deleted = resources.store().delete_run(doomed)
            widgets.rerun_saying(f"Deleted run {doomed}: " + ", ".join(f"{table} {count}" for table, count in
                                                                     deleted.items() if count))
    downloads = st.columns(2)
    widgets.download("Download Markdown", table_html(report, "markdown"), "fwsapp-tables.md", "text/markdown",
                     downloads[0])
    widgets.download("Download LaTeX", table_html(report, "latex"), "fwsapp-tables.tex", "text/x-tex", downloads[1])


render()
