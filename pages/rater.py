"""The rater view: what an invite link opens. The rater's own items, in their own order, and nothing else of the app:
no sidebar, no other page, no database path, no run or method named anywhere in the page."""
import streamlit as st

from fwsapp.ui import render as markup
from fwsapp.human import study
from fwsapp.entities.introduced import VERDICTS, name_verdict, names_to_judge, rater_verdicts, record_verdict
from fwsapp.human.workflow import RatingError, Task
from fwsapp.ui import gate, queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()


def render() -> None:
    """A rater's own items, one at a time, blinded to which answer is watermarked."""
    rater_id = st.session_state[gate.RATER_ID]
    store = resources.store()
    st.title("Rate answers")
    st.caption("You see a prompt, its ground-truth reference and two answers to it, A and B, from two different "
               "systems; you are not told which is which. Rate each answer from 1 (very poor) to 5 (excellent). Each "
               "rating is saved when you submit it; you can go back and change it. Only you and the study's organiser "
               "see your ratings.")
    rater = study.StudyRater(rater_id)
    task, queue = widgets.rating_session(rater, "rater-back")
    if task is None:
        st.success(f"Nothing left to rate: you have done all {queue.total} of your items. Thank you." if queue.total else
                   "No items are assigned to you yet. The study's organiser will tell you when there are.")
        st.stop()
    if study.rater_study(store, rater_id).entity_task and not task.repeat:
        sample = queries.sample_row(resources.revision(), task.run_id, task.sample_idx)
        name_verdicts(rater, task, task.texts("watermarked", "unwatermarked"),
                      (sample["watermarked_text"], sample["unwatermarked_text"]))


def name_verdicts(rater: study.StudyRater, task: Task, kinds: tuple[str, str], texts: tuple[str, str]) -> None:
    """The Entities task: a verdict on each disease name an answer introduced (one its reference does not name), filed
    under the rater's id. Answers go by their letters; nothing says which text a name came from."""
    entities, _ = queries.entity_rows(resources.revision())
    mine = entities[(entities.run_id == task.run_id) & (entities.sample_idx == task.sample_idx)]
    names = {letter: names_to_judge(mine, kind) for letter, kind in zip("AB", kinds)}
    if not any(names.values()):
        return
    st.subheader("Disease names in the answers")
    if refused := st.session_state.pop("verdict-refused", None):
        st.error(markup.message(refused))
    st.caption("Each name below appears in an answer but not in the reference. Is it right? Your verdict is saved as "
               "you choose it.")
    store = resources.store()
    recorded = rater_verdicts(store, rater.identity, task.run_id, task.sample_idx)

    def save(name, key: str) -> None:
        verdict = next(code for code, label in VERDICTS.items() if label == st.session_state[key])
        try:
            rater.check_open(store)  # a revoked link writes nothing, not even from a callback
        except RatingError as error:
            st.session_state["verdict-refused"] = str(error)
            return
        record_verdict(store, rater.identity, task.run_id, task.sample_idx, name, verdict)

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
