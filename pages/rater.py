"""The rater view: what an invite link opens. The rater's own items, in their own order, and nothing else of the app:
no sidebar, no other page, no database path, no run or method named anywhere in the page."""
import time

import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.human import study
from fwsapp.entities.introduced import VERDICTS, name_verdict, names_to_judge, rater_verdicts, record_verdict
from fwsapp.human.ratings import RatingError, questions
from fwsapp.ui import gate, queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()

BACK = "rater-back"  # how many done items back from the next one the rater is looking at


def go_back(steps: int) -> None:
    st.session_state[BACK] = max(0, st.session_state.get(BACK, 0) + steps)


def render() -> None:
    rater_id = st.session_state[gate.RATER_ID]
    store = resources.store()
    st.title("Rate answers")
    st.caption("You see a prompt, its ground-truth reference and two answers to it, A and B, from two different "
               "systems; you are not told which is which. Rate each answer from 1 (very poor) to 5 (excellent). Each "
               "rating is saved when you submit it; you can go back and change it. Only you and the study's organiser "
               "see your ratings.")
    done, upcoming, count, total = study.tasks(store, rater_id)
    back = min(st.session_state.get(BACK, 0), len(done))
    task = done[-back] if back else upcoming
    navigation = st.columns([1, 1, 6])
    navigation[0].button("Previous", on_click=go_back, args=(1,), disabled=back >= len(done), width="stretch",
                         help="Go back to an item you rated or skipped, and change your rating.")
    navigation[1].button("Next", on_click=go_back, args=(-1,), disabled=back == 0, width="stretch")
    if task is None:
        st.success(f"Nothing left to rate: you have done all {total} of your items. Thank you." if total else
                   "No items are assigned to you yet. The study's organiser will tell you when there are.")
        st.stop()
    st.markdown('<div id="rate-item"></div>', unsafe_allow_html=True)  # where a submitted rating brings the next item
    position = len(done) - back if back else count
    st.progress(min(position / total, 1.0) if total else 0.0, text=f"{position + 1} of {total}")
    if back:
        st.caption(f"You {'rated' if task.scores_a else 'skipped'} this item earlier. Change your rating and save it, "
                   "or press Next.")
    sample = queries.sample_row(resources.revision(), task.run_id, task.sample_idx)
    shown = st.session_state.setdefault(f"shown-{task.handle}", time.monotonic())
    texts = (sample["watermarked_text"], sample["unwatermarked_text"])
    given = {"A": task.scores_a, "B": task.scores_b} if task.scores_a else {}
    pressed, scores, comment = widgets.rating_form(
        task.handle, sample["prompt"], sample["reference"], texts if task.watermarked_first else texts[::-1],
        questions(sample["task"]), given, task.comment or "", revising=bool(back), can_skip=not task.repeat)
    if pressed == "skip":
        study.skip(store, rater_id, task)
        st.session_state["rate_scroll"] = True
        st.rerun()
    if pressed == "submit":
        if widgets.unanswered(scores):
            st.error("Rate all three questions for both answers" + (", or press Skip." if not task.repeat else "."))
        else:
            try:
                study.submit(store, rater_id, task, scores["A"], scores["B"], comment,
                             seconds=time.monotonic() - shown, revise=bool(back))
            except RatingError as error:
                st.error(markup.message(str(error)))
            else:
                st.session_state.pop(f"shown-{task.handle}", None)
                st.toast("Saved your rating.")
                if back:
                    go_back(-1)
                st.session_state["rate_scroll"] = True
                st.rerun()
    if study.rater_study(store, rater_id).entity_task and not task.repeat:
        name_verdicts(rater_id, task, ("watermarked", "unwatermarked") if task.watermarked_first
                      else ("unwatermarked", "watermarked"), (sample["watermarked_text"], sample["unwatermarked_text"]))
    if st.session_state.pop("rate_scroll", False):
        widgets.scroll_to("rate-item")


def name_verdicts(rater_id: str, task: study.Task, kinds: tuple[str, str], texts: tuple[str, str]) -> None:
    """The Entities task: a verdict on each disease name an answer introduced (one its reference does not name), filed
    under the rater's id. Answers go by their letters; nothing says which text a name came from."""
    entities, _ = queries.entity_rows(resources.revision())
    mine = entities[(entities.run_id == task.run_id) & (entities.sample_idx == task.sample_idx)]
    names = {letter: names_to_judge(mine, kind) for letter, kind in zip("AB", kinds)}
    if not any(names.values()):
        return
    st.subheader("Disease names in the answers")
    st.caption("Each name below appears in an answer but not in the reference. Is it right? Your verdict is saved as "
               "you choose it.")
    store = resources.store()
    recorded = rater_verdicts(store, rater_id, task.run_id, task.sample_idx)

    def save(name, key: str) -> None:
        verdict = next(code for code, label in VERDICTS.items() if label == st.session_state[key])
        record_verdict(store, rater_id, task.run_id, task.sample_idx, name, verdict)

    by_letter = dict(zip("AB", texts if kinds[0] == "watermarked" else texts[::-1]))
    for letter, found in names.items():
        for index, name in enumerate(found):
            key = f"{task.handle}-{letter}-name-{index}"
            if key not in st.session_state:
                st.session_state[key] = VERDICTS.get(name_verdict(recorded, name))
            start, end = name.starts[0], name.ends[0]
            text = by_letter[letter] or ""
            line = st.columns([3, 4])
            line[0].markdown(f"**Answer {letter}:** {markup.inert(name.shown)}  \n"
                             f"…{markup.inert(text[max(0, start - 40):end + 40])}…", unsafe_allow_html=True)
            line[1].radio("Verdict", list(VERDICTS.values()), key=key, horizontal=True, label_visibility="collapsed",
                          on_change=save, args=(name, key))


render()
