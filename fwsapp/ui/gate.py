"""Who gets which pages (`fwsapp.human.access`): a rater's invite link opens the rater view alone, for the whole browser
session; everyone else needs the admin token, when one is set, once per browser session. Without one, the app serves
loopback only, and the user at that machine is the admin."""
from __future__ import annotations


import streamlit as st

from fwsapp.human import access, study
from fwsapp.ui import resources

RATER_TOKEN = "rater-token"  # session state: the invite token this browser session opened with
RATER_ID = "rater-id"
ADMIN = "admin"


def rater() -> str | None:
    """The rater id this session's invite link opens; None for a session that came without one. A link that opens
    nothing (unknown, or revoked even a moment ago) gets one line and nothing else of the app."""
    token = st.query_params.get(access.INVITE_PARAMETER) or st.session_state.get(RATER_TOKEN)
    if token is None:
        return None
    st.session_state[RATER_TOKEN] = token  # a rater who edits the URL stays in the rater view
    found = study.rater_for(resources.store(), token)
    if found is None:
        st.session_state.pop(RATER_ID, None)
        st.error(access.INVALID_LINK)
        st.stop()
    st.session_state[RATER_ID] = found
    return found


def admin_or_stop() -> None:
    """Go on for the admin; otherwise say why not (an unprotected server on a network) or ask for the token."""
    expected = access.admin_token()
    problem = access.serving_problem(st.get_option("server.address"), expected)
    if problem:
        st.error(problem)
        st.stop()
    if expected is None or st.session_state.get(ADMIN):
        return
    st.title("fwsapp")
    with st.form("admin-token"):
        entered = st.text_input("Admin token", type="password",
                                help=f"The value of {access.ADMIN_TOKEN_VARIABLE} on the server. Raters open their "
                                     "invite link instead.")
        submitted = st.form_submit_button("Open the app", type="primary")
    if submitted:
        passed, locked_for = access.SIGN_IN.sign_in(lambda: access.is_admin_token(entered, expected))
        if passed:
            st.session_state[ADMIN] = True
            st.rerun()
        st.error(f"Too many wrong admin tokens on this server: no token is checked for {locked_for:.0f} s. Try again "
                 "then." if locked_for is not None else "That is not the admin token.")
    st.stop()
