"""Entities: disease names a watermark introduced or hallucinated, side by side with the reference."""
import streamlit as st

from fwsapp import render
from fwsapp.ui import queries, resources, widgets
from fwsapp.entities import (HALLUCINATION_THRESHOLD, entity_sample_label, entity_summary, record_verdict,
                             samples_by_hallucination, verdict_agreement)
from fwsapp.recognizer import STOPLIST
from fwsapp.ui.router import through_router

through_router()

st.title("Disease entities")
st.caption(
    f"Introduced: a disease in a generated text that its reference does not name. Hallucinated: an introduced "
    f"entity whose contextual embedding is less than {HALLUCINATION_THRESHOLD} cosine-similar to every reference "
    "entity. Yellow marks introduced entities, red hallucinated ones, blue the others; hover for the closest "
    "reference entity."
)
with st.expander("Stoplist: generic words never counted as entities"):
    st.write(", ".join(sorted(STOPLIST)))

runs = queries.runs(resources.revision())
entities, analyses = queries.entity_rows(resources.revision())
if analyses.empty:
    st.info("No entity analysis yet: run it on the Entropy page (Compute missing analyses) or with "
            "`python -m fwsapp analyze --all`.")
    st.stop()

st.subheader("Per method (the paper's Table 7)")
st.dataframe(entity_summary(entities, analyses, runs).round(3), hide_index=True, width="stretch")

st.subheader("Browser")
analysed = runs[runs.run_id.isin(set(analyses.run_id))]
labels = {row.run_id: widgets.run_label(row._asdict()) for row in analysed.itertuples()}
filters = st.columns(3)
chosen_runs = filters[0].multiselect("Methods (runs)", list(labels), default=list(labels)[:1], format_func=labels.get, key="entity-runs")
needle = filters[1].text_input("Entity contains", key="entity-filter").strip().lower()
low, high = filters[2].slider("Similarity of introduced entities", 0.0, 1.0, (0.0, 1.0), 0.05, key="entity-similarity")
view = entities[entities.run_id.isin(chosen_runs)]
if needle:
    view = view[view.normalized.str.contains(needle, regex=False)]
introduced = view[view.introduced & view.similarity.between(low, high)]
ranking = samples_by_hallucination(view, analyses[analyses.run_id.isin(chosen_runs)])
if ranking.empty:
    st.info("No sample matches these filters.")
    st.stop()
picked = st.selectbox("Sample (most hallucinated first)", range(len(ranking)), key="entity-sample",
                      format_func=lambda i: entity_sample_label(ranking.iloc[i]))
current = ranking.iloc[picked]
sample = queries.sample_row(resources.revision(), current.run_id, int(current.sample_idx))
mine = entities[(entities.run_id == current.run_id) & (entities.sample_idx == current.sample_idx)]
st.markdown(f"**Prompt:** {render.inert(sample['prompt'])}", unsafe_allow_html=True)
columns = st.columns(3)
for column, kind, title in zip(columns, ("reference", "unwatermarked", "watermarked"), ("Reference", "Unwatermarked", "Watermarked")):
    column.markdown(f"**{title}**")
    text = sample["reference"] if kind == "reference" else sample.get(f"{kind}_text")
    column.markdown(render.highlight_entities(text, mine[mine.text_kind == kind]), unsafe_allow_html=True)

st.subheader("Your verdicts")
rater = st.text_input("Your name", value=st.session_state.get("rater", ""), key="entity-rater")
candidates = mine[mine.introduced]
if candidates.empty:
    st.caption("This sample has no introduced entities to review.")
for row in candidates.itertuples():
    line = st.columns([4, 1, 1])
    status = "hallucinated (rule)" if row.hallucinated else "supported (rule)"
    line[0].markdown(f"{render.inert(row.entity)} · {row.text_kind} · {status}, similarity {row.similarity:.2f}",
                     unsafe_allow_html=True)
    for column, verdict, label in ((line[1], "correct", "Correct"), (line[2], "hallucinated", "Hallucinated")):
        if column.button(label, key=f"verdict-{row.run_id}-{row.sample_idx}-{row.text_kind}-{row.start_char}-{verdict}"):
            try:
                record_verdict(resources.store(), rater, row.run_id, row.sample_idx, row.text_kind, row.start_char, verdict)
                st.session_state["rater"] = rater
                st.rerun()
            except ValueError as error:
                st.error(render.message(str(error)))

counts, stats = verdict_agreement(resources.store())
if stats:
    st.subheader("Clinicians against the automatic rule")
    precision = f"{stats['precision']:.2f}" if stats["precision"] is not None else "–"
    recall = f"{stats['recall']:.2f}" if stats["recall"] is not None else "–"
    st.write(f"{stats['verdicts']} verdicts. Precision of the {HALLUCINATION_THRESHOLD} rule: {precision}; recall: {recall}.")
    st.dataframe(counts, width="stretch")
