"""Rate: clinicians score two answers to the same prompt, blind to which one carries the watermark."""
import streamlit as st

from fwsapp import render
from fwsapp.ui import queries, resources
from fwsapp.human import (DEFAULT_FRACTION, RATERS_PER_ITEM, RatingError, next_item, progress, questions, sample_items,
                          skip, submit_rating)
from fwsapp.ui.router import through_router

through_router()

st.title("Rate answers")
st.caption(
    "You see a prompt, its ground-truth reference and two answers, A and B. One was generated with a "
    "watermark and one without; you are not told which. Rate each answer from 1 (very poor) to 5 (excellent)."
)
name = st.text_input("Your name", value=st.session_state.get("rater", ""), key="rater-name")
if not name.strip():
    st.info("Enter your name to start. Your ratings are saved as you submit them.")
    st.stop()
st.session_state["rater"] = name
store = resources.store()
try:
    item = next_item(store, name)
    done, total = progress(store, name)
except RatingError as error:
    st.error(render.message(str(error)))
    st.stop()
if item is None:
    if total == 0:
        runs = queries.runs(resources.revision())
        st.info("No items to rate yet. Items are a share of each run's samples, each shown to three raters.")
        if runs.empty:
            st.stop()
        if st.button(f"Add {int(DEFAULT_FRACTION * 100)} % of every run's samples to rate", type="primary"):
            added = sum(sample_items(store, run_id, DEFAULT_FRACTION) for run_id in runs.run_id)
            st.success(f"Added {added} items.")
            st.rerun()
        st.caption("The FWS page (Choose items for human rating) picks runs and shares one by one.")
    elif done == 0:
        st.info(f"All {total} items already have their {RATERS_PER_ITEM} ratings from other raters, so none is left "
                "for you. More items can be added on the FWS page (Choose items for human rating).")
    else:
        st.success(f"Nothing left to rate: you have rated or skipped {done} of the {total} items; the rest have their "
                   f"{RATERS_PER_ITEM} ratings. Thank you.")
    st.stop()
st.progress(done / total if total else 0.0, text=f"{done + 1} of {total}")

sample = queries.sample_row(resources.revision(), item.run_id, item.sample_idx)
st.markdown(f"**Prompt:** {render.inert(sample['prompt'])}", unsafe_allow_html=True)
st.markdown(f"**Reference (ground truth):** {render.inert(sample['reference'])}", unsafe_allow_html=True)
answers = ("watermarked_text", "unwatermarked_text") if item.watermarked_first else ("unwatermarked_text", "watermarked_text")
key = f"{item.run_id}-{item.sample_idx}"
scores = {}
with st.form(f"rate-{key}", clear_on_submit=True):
    columns = st.columns(2)
    for column, letter, text_key in zip(columns, "AB", answers):
        with column:
            st.markdown(f"**Answer {letter}**")
            st.markdown(render.inert(sample[text_key]), unsafe_allow_html=True)
            scores[letter] = [
                st.radio(question, [1, 2, 3, 4, 5], index=None, horizontal=True, key=f"{key}-{letter}-{aspect}")
                for aspect, question in questions(sample["task"]).items()
            ]
    comment = st.text_area("Comment (optional)", key=f"{key}-comment")
    buttons = st.columns([1, 1, 6])
    submitted = buttons[0].form_submit_button("Submit", type="primary")
    skipped = buttons[1].form_submit_button("Skip")
if skipped:
    skip(store, name, item)
    st.rerun()
if submitted:
    if any(value is None for letter in "AB" for value in scores[letter]):
        st.error("Rate all three questions for both answers, or press Skip.")
    else:
        try:
            submit_rating(store, name, item, scores["A"], scores["B"], comment)
        except RatingError as error:
            st.error(render.message(str(error)))
        else:
            st.toast(f"Saved your rating of item {done + 1} of {total}.")
            st.rerun()
