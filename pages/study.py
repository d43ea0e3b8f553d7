"""Study: the researcher's view of a clinician study served to a team. Create it, invite raters (each gets a link whose
token is shown once and stored only hashed), revoke links, follow progress, attention checks and agreement, settle
disagreements, export the ratings, and delete the study."""
import pandas as pd
import streamlit as st

from fwsapp import counted
from fwsapp.ui import render as markup
from fwsapp.human import study
from fwsapp.human.access import app_address_of_page, invite_link
from fwsapp.results.export import EXPORT_FORMATS
from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA, default_mapping
from fwsapp.human.ratings import RATERS_PER_ITEM
from fwsapp.ui import queries, resources, widgets
from fwsapp.ui.router import through_router

through_router()

NEW_LINKS = "study-new-links"  # links just made, shown until the admin leaves the page's session


def remember_links(invites: list[study.Invite]) -> None:
    """Keep the new links for `show_new_links`, the only time they can be shown."""
    address = app_address_of_page(st.context.url)
    st.session_state[NEW_LINKS] = [(invite.name, invite_link(address, invite.token)) for invite in invites]


def show_new_links() -> None:
    """The raters' links just made, shown this once."""
    links = st.session_state.get(NEW_LINKS)
    if not links:
        return
    st.warning("Send each rater their link now: it is shown this once. Only a hash of it is stored, so it cannot be "
               "shown again; a lost link is revoked and replaced by a new invitation.")
    for name, link in links:
        st.text(name)
        st.code(link, language=None)
    if st.button("I have sent the links"):
        st.session_state.pop(NEW_LINKS)
        st.rerun()


def create_form(runs: pd.DataFrame) -> None:
    """A new study: its runs, raters and items, made in one go."""
    with st.expander("Create a study", expanded=queries.studies(resources.revision()).empty):
        with st.form("study-create"):
            name = st.text_input("Name", placeholder="e.g. QA pilot, November")
            labels = widgets.job_inputs(runs)
            chosen = st.multiselect("Runs the items are drawn from", list(labels), format_func=labels.get)
            columns = st.columns(3)
            share = columns[0].slider("Share of each run's samples", 0.01, 1.0, study.DEFAULT_ITEM_SHARE, 0.01)
            per_item = columns[1].number_input("Raters per item", 1, 20, RATERS_PER_ITEM)
            attention = columns[2].slider("Attention checks (share shown twice)", 0.0, 0.5,
                                          study.DEFAULT_ATTENTION_SHARE, 0.01)
            entity_task = st.checkbox("Also ask for verdicts on the disease names in each answer (the Entities task)")
            names = st.text_area("Raters, one name per line", help="For your eyes only: raters never see names.")
            submitted = st.form_submit_button("Create the study and its links", type="primary")
        if submitted:
            try:
                created, invites = study.create(resources.store(), name, chosen, share, None, int(per_item), attention,
                                                entity_task, raters=[line for line in names.splitlines() if line.strip()])
            except (study.StudyError, ValueError) as error:
                st.error(markup.message(str(error)))
                return
            remember_links(invites)
            st.session_state["study-chosen"] = created.name
            st.rerun()


def links_panel(chosen: study.Study) -> None:
    """Each rater's link, made anew on request (a link is shown once, only its hash is kept)."""
    store = resources.store()
    raters = store.raters(chosen.study_id)
    with st.form("study-invite", clear_on_submit=True):
        names = st.text_area("Invite more raters, one name per line",
                             help="A rater invited now takes the items still short of raters.")
        if st.form_submit_button("Make their links"):
            try:
                invites = study.invite(store, chosen, [line for line in names.splitlines() if line.strip()])
            except study.StudyError as error:
                st.error(markup.message(str(error)))
            else:
                remember_links(invites)
                st.rerun()
    open_links = raters[raters.revoked.isna()]
    if not open_links.empty:
        labels = dict(zip(open_links.rater_id, open_links.name))
        revoked = st.selectbox("Revoke a link", list(labels), format_func=lambda rater_id: f"{labels[rater_id]} ({rater_id})",
                               index=None, placeholder="choose a rater")
        if st.button("Revoke", disabled=revoked is None, help="The link stops working at once; the ratings given stay."):
            unrated = study.revoke(store, revoked)
            widgets.rerun_saying(f"Revoked the link of {labels[revoked]}: it opens nothing from now on. Their "
                                 f"{counted(unrated, 'unrated item goes', 'unrated items go')} to the raters you invite next.")


def delete_panel(chosen: study.Study) -> None:
    """Delete the study, once its name is typed: its links and its raters' answers go, its runs stay."""
    st.warning(markup.message(study.deletion_question(resources.store(), chosen)))
    typed = st.text_input("Type the study's name to confirm", key=f"study-delete-{chosen.study_id}").strip()
    if st.button("Delete this study", disabled=typed != chosen.name):
        deleted = study.delete(resources.store(), chosen)
        st.session_state.pop("study-chosen", None)
        widgets.rerun_saying(f"Deleted the study {chosen.name!r} ({counted(sum(deleted.values()), 'row', 'rows')}); "
                             "its runs stay.")


def render() -> None:
    """The study the admin runs: create it, invite raters, watch their progress, close it."""
    st.title("Study")
    st.caption("A clinician study served to a team: each rater opens their own link, sees only their own items in their "
               "own order, and never learns which answer carries the watermark.")
    runs = widgets.runs_or_stop()
    show_new_links()
    create_form(runs)
    studies = queries.studies(resources.revision())
    legacy = queries.legacy_raters(resources.revision())
    if not legacy.empty:
        with st.expander(f"Legacy raters ({len(legacy)}): ratings under names typed on the Rate page"):
            st.dataframe(legacy, hide_index=True)
    if studies.empty:
        st.info("No study yet: create one above.")
        st.stop()
    names = list(studies.name)
    current = st.session_state.get("study-chosen")
    name = st.selectbox("Study", names, index=names.index(current) if current in names else len(names) - 1,
                        key="study-chosen")
    chosen = study.study(resources.store(), name)
    st.caption(chosen.describe())
    progress, agreement, adjudication, links, export, delete = st.tabs(
        ["Progress", "Agreement", "Disagreements", "Links", "Export", "Delete"])
    revision = resources.revision()
    with progress:
        if short := queries.study_short_of_raters(revision, chosen.study_id):
            st.warning(markup.message(short))
        st.subheader("Raters")
        st.dataframe(widgets.uniform(queries.study_rater_progress(revision, chosen.study_id)), hide_index=True,
                     width="stretch")
        st.caption(f"Attention consistency: the share of a rater's second showings (A and B swapped) rated within "
                   f"{study.CONSISTENT_WITHIN} point of the first on every aspect of both answers, and how many of how "
                   "many. Raters never see it.")
        st.subheader("Items")
        st.dataframe(queries.study_item_progress(revision, chosen.study_id), hide_index=True, width="stretch")
    rated = queries.study_ratings(revision, chosen.study_id)
    with agreement:
        if rated.empty:
            st.info("No ratings yet.")
        else:
            samples = queries.fws_samples(revision, tuple(sorted(default_mapping().items())))
            widgets.human_agreement(rated, samples, DEFAULT_ALPHA, DEFAULT_BETA, f"judge ({samples['judges']})")
    with adjudication:
        found = study.disagreements(rated) if not rated.empty else pd.DataFrame()
        st.caption(f"Texts whose raters are {study.DISAGREEMENT} points apart or more on an aspect.")
        if found.empty:
            st.info("No disagreements of that size.")
        else:
            st.dataframe(found, hide_index=True, width="stretch")
    with links:
        links_panel(chosen)
    with export:
        st.caption("One row per rater × item × text, raters by their ids: no names, no tokens; with the letter each "
                   "text was shown under, the seconds spent, and when a rating was given and last revised.")
        for kind, file_format in EXPORT_FORMATS.items():
            widgets.download(f"Ratings ({kind})", study.ratings_file(rated, kind), f"{chosen.name}.{kind}",
                             file_format.mime, disabled=rated.empty)
        if chosen.entity_task:
            verdicts = study.entity_verdicts(resources.store(), chosen)
            st.caption("The Entities task: each rater's verdict on each disease name an answer introduced.")
            for kind, file_format in EXPORT_FORMATS.items():
                widgets.download(f"Entity verdicts ({kind})", study.ratings_file(verdicts, kind),
                                 f"{chosen.name}.entities.{kind}", file_format.mime, disabled=verdicts.empty)
    with delete:
        delete_panel(chosen)


render()
