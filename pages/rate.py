"""Rate: clinicians score two answers to the same prompt, blind to which one carries the watermark."""
import streamlit as st

from fwsapp import counted
from fwsapp.ui import render as markup
from fwsapp.ui import queries, resources, widgets
from fwsapp.human.ratings import DEFAULT_FRACTION, RATERS_PER_ITEM, OpenRater, sample_items
from fwsapp.human.workflow import RatingError
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """The page, drawn top to bottom."""
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
        rater = OpenRater(name)
    except RatingError as error:
        st.error(markup.message(str(error)))
        st.stop()
    task, queue = widgets.rating_session(rater, "rate-back")
    if task is not None:
        return
    if queue.total == 0:
        runs = queries.runs(resources.revision())
        st.info("No items to rate yet. Items are a share of each run's samples, each shown to three raters.")
        if runs.empty:
            widgets.no_runs_yet()
            st.stop()
        if st.button(f"Add {int(DEFAULT_FRACTION * 100)} % of every run's samples to rate", type="primary"):
            added = sum(sample_items(store, run_id, DEFAULT_FRACTION) for run_id in runs.run_id)
            widgets.rerun_saying(f"Added {counted(added, 'item', 'items')}.")
        st.caption("The FWS page (Choose items for human rating) picks runs and shares one by one.")
    elif not queue.done:
        st.info(f"All {queue.total} items already have their {RATERS_PER_ITEM} ratings from other raters, so none is left "
                "for you. More items can be added on the FWS page (Choose items for human rating).")
    else:
        st.success(f"Nothing left to rate: you have rated or skipped {len(queue.done)} of the {queue.total} items; the "
                   f"rest have their {RATERS_PER_ITEM} ratings. Thank you.")

render()
