"""Rate: clinicians score two answers to the same prompt, blind to which one carries the watermark."""
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.ui import queries, resources, widgets
from fwsapp.human.ratings import (
    DEFAULT_FRACTION,
    RATERS_PER_ITEM,
    RatingError,
    history,
    next_item,
    progress,
    questions,
    sample_items,
    skip,
    submit_rating,
)
from fwsapp.ui.router import through_router

through_router()


def go_back(steps: int) -> None:
    st.session_state["rate-back"] = max(0, st.session_state.get("rate-back", 0) + steps)


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
        done_items = history(store, name)
        done, total = progress(store, name)
        back = min(st.session_state.get("rate-back", 0), len(done_items))  # items back from the next one
        item = done_items[-back].item if back else next_item(store, name)
    except RatingError as error:
        st.error(markup.message(str(error)))
        st.stop()
    navigation = st.columns([1, 1, 6])
    navigation[0].button("Previous", on_click=go_back, args=(1,), disabled=back >= len(done_items), width="stretch",
                         help="Go back to an item you rated or skipped, and change your ratings.")
    navigation[1].button("Next", on_click=go_back, args=(-1,), disabled=back == 0, width="stretch")
    if item is None:
        if total == 0:
            runs = queries.runs(resources.revision())
            st.info("No items to rate yet. Items are a share of each run's samples, each shown to three raters.")
            if runs.empty:
                widgets.no_runs_yet()
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
    earlier = done_items[-back] if back else None
    position = len(done_items) - back
    st.markdown('<div id="rate-item"></div>', unsafe_allow_html=True)  # where a submitted rating brings the next item
    st.progress(position / total if total else 0.0, text=f"{position + 1} of {total}")
    if earlier is not None:
        st.caption(f"You {'rated' if earlier.scores_a else 'skipped'} this item earlier. Change your ratings and save them, "
                   "or press Next.")

    sample = queries.sample_row(resources.revision(), item.run_id, item.sample_idx)
    answers = ("watermarked_text", "unwatermarked_text") if item.watermarked_first else ("unwatermarked_text", "watermarked_text")
    key = f"{'revise-' if earlier else ''}{item.run_id}-{item.sample_idx}"
    given = {"A": earlier.scores_a, "B": earlier.scores_b} if earlier and earlier.scores_a else {}
    pressed, scores, comment = widgets.rating_form(
        key, sample["prompt"], sample["reference"], tuple(sample[text_key] for text_key in answers),
        questions(sample["task"]), given, (earlier.comment or "") if earlier else "", revising=earlier is not None)
    skipped, submitted = pressed == "skip", pressed == "submit"
    if skipped:
        skip(store, name, item)
        st.session_state["rate_scroll"] = True
        st.rerun()
    if submitted:
        if widgets.unanswered(scores):
            st.error("Rate all three questions for both answers, or press Skip.")
        else:
            try:
                submit_rating(store, name, item, scores["A"], scores["B"], comment, revise=earlier is not None)
            except RatingError as error:
                st.error(markup.message(str(error)))
            else:
                st.toast(f"Saved your rating of item {position + 1} of {total}.")
                if earlier is not None:
                    go_back(-1)
                st.session_state["rate_scroll"] = True
                st.rerun()
    if st.session_state.pop("rate_scroll", False):  # the next item's prompt in view, not below the last one's buttons
        widgets.scroll_to("rate-item")


render()
