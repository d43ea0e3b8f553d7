"""Who may open what, when the app is served to more than one person.

- **The admin** holds `FWSAPP_ADMIN_TOKEN` (or `admin_token` in `.streamlit/secrets.toml`). Every page but the rater
  view asks for it once per browser session. With no admin token set, the app serves only the loopback address: the
  single user at their own machine is the admin, as on a laptop.
- **A rater** holds an invite link: `?invite=<token>`, a random token of 256 bits (`secrets.token_urlsafe`). Only its
  SHA-256 is stored, so the database never holds a working link. The link alone identifies the rater, and it opens the
  rater view and nothing else. A revoked link opens nothing.

Tokens are compared with `hmac.compare_digest`, against every stored hash without stopping at a match, so how long a
refusal takes says nothing about how close a guess came.
"""
from __future__ import annotations

import hashlib
import hmac
import math
import os
import secrets
import threading
import time
from collections import Counter, deque

from fwsapp.network import checked_server_url, is_loopback

ADMIN_TOKEN_VARIABLE = "FWSAPP_ADMIN_TOKEN"
ADMIN_TOKEN_SECRET = "admin_token"
INVITE_PARAMETER = "invite"
DEFAULT_APP_ADDRESS = "http://localhost:8501"  # `make run`'s, seen from the machine it serves on
TOKEN_BYTES = 32  # 256 bits; the issue asks for at least 128
# Off loopback an admin token must be at least this long (32 URL-safe characters carry 192 bits when random) ...
MIN_ADMIN_TOKEN_CHARACTERS = 32
# ... and look random: at least this many bits by `token_bits` (32 random URL-safe characters give about 150).
MIN_ADMIN_TOKEN_BITS = 128
# Each failed admin sign-in waits longer than the last, up to this many seconds, until one succeeds.
MAX_FAILURE_DELAY = 30.0
# At most this many wrong admin tokens in any window of this many seconds, over every session together; past them no
# token is checked until the window has room.
MAX_FAILURES_PER_WINDOW = 5
FAILURE_WINDOW_SECONDS = 60.0
INVALID_LINK = "This link does not open anything: it is unknown or was revoked. Ask the study's organiser for a new one."


def new_token() -> str:
    return secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    """What is stored of a token: its SHA-256, hex. A token of 256 random bits needs no salt or slow hash: it cannot
    be guessed from a dictionary."""
    return hashlib.sha256(token.encode()).hexdigest()


def matching(token: str, hashes: dict[str, str]) -> str | None:
    """The key of `hashes` (key -> stored hash) whose hash is the token's, or None. Every stored hash is compared, in
    constant time each."""
    presented = token_hash(token or "")
    found = None
    for key, stored in hashes.items():
        if hmac.compare_digest(stored, presented):
            found = key
    return found


def admin_token() -> str | None:
    """The admin token from the environment, else from Streamlit's secrets; None when neither sets one."""
    token = os.environ.get(ADMIN_TOKEN_VARIABLE)
    if token:
        return token
    try:
        import streamlit as st

        return st.secrets.get(ADMIN_TOKEN_SECRET) or None
    except Exception:  # no secrets file, or not running under streamlit
        return None


def is_admin_token(presented: str, expected: str) -> bool:
    return hmac.compare_digest(token_hash(presented or ""), token_hash(expected))


def serving_problem(address: str | None, admin: str | None, served: str = "This app is served",
                    exposed: str = "read and delete its data",
                    local: str = "serve it on localhost only (`make run` does)") -> str | None:
    """Why a server must not listen on `address` with this admin token, or None when it may: off loopback it needs a
    token, and one long enough not to be guessed. `served` names the server, `exposed` what anyone could do without
    the token, `local` how to keep it on loopback: the app's by default."""
    if is_loopback(address):
        return None
    where = address or "every network interface"
    new = "(python3 -c 'import secrets; print(secrets.token_urlsafe(32))') and start it again."
    if admin and len(admin) < MIN_ADMIN_TOKEN_CHARACTERS:
        return (f"{served} on {where} with an admin token of {len(admin)} characters, which can be guessed. "
                f"Set {ADMIN_TOKEN_VARIABLE} to at least {MIN_ADMIN_TOKEN_CHARACTERS} random characters {new}")
    if admin and token_bits(admin) < MIN_ADMIN_TOKEN_BITS:
        return (f"{served} on {where} with an admin token that does not look random (a word, a pattern or "
                f"few distinct characters: about {token_bits(admin):.0f} bits, fewer than {MIN_ADMIN_TOKEN_BITS}). "
                f"Set {ADMIN_TOKEN_VARIABLE} to a random token {new}")
    if admin:
        return None
    return (f"{served} on {where} and no admin token is set, so anyone who can reach it could {exposed}. Set "
            f"{ADMIN_TOKEN_VARIABLE} (or {ADMIN_TOKEN_SECRET} in .streamlit/secrets.toml) to a long random string and "
            f"start it again, or {local}.")


def token_bits(token: str) -> float:
    """A cautious estimate of a token's entropy in bits: its length times the lesser of the bits per character its
    character classes allow (lower, upper, digits, the rest) and the Shannon entropy of its own characters, so a long
    token of few distinct characters, a repeated pattern or a phrase of lower-case words counts for little. Written
    here because the maintained estimators (zxcvbn) judge passwords people choose, not random tokens."""
    if not token:
        return 0.0
    classes = [(str.islower, 26), (str.isupper, 26), (str.isdigit, 10)]
    alphabet = sum(size for test, size in classes if any(test(character) for character in token))
    if any(not any(test(character) for test, _ in classes) for character in token):
        alphabet += 32  # punctuation and the rest
    counts = Counter(token)
    shannon = -sum(count / len(token) * math.log2(count / len(token)) for count in counts.values())
    return len(token) * min(math.log2(alphabet), shannon)


def app_address(url: str) -> str:
    """Where raters reach the app, checked before a study or an invite is made (its links are shown only once): a
    server's address (`checked_server_url`) with no query or fragment, which the invite link's own query would follow."""
    from urllib.parse import urlsplit

    address = checked_server_url(url.strip(), "The app's address", DEFAULT_APP_ADDRESS)
    parts = urlsplit(address)
    if parts.query or parts.fragment:
        raise ValueError(f"The app's address {url!r} has a query or a fragment: give it without them (an invite link "
                         "adds its own).")
    return address.rstrip("/")


def app_address_of_page(page_url: str | None) -> str:
    """Where raters reach the app, from the address of the page the admin has open: the app's address (its base path
    included) is the page's less the page's own name, query and fragment. The default port's loopback address when
    the page's address is unknown (a session with no browser)."""
    from urllib.parse import urlsplit, urlunsplit

    if not page_url:
        return DEFAULT_APP_ADDRESS
    parts = urlsplit(page_url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path.rsplit("/", 1)[0], "", ""))


def invite_link(base_url: str, token: str) -> str:
    return f"{app_address(base_url)}/?{INVITE_PARAMETER}={token}"


class Throttle:
    """Admin sign-ins, server-wide. One is checked at a time, so parallel sessions queue rather than guess side by
    side; each failure waits twice as long as the one before (0.5 s, 1 s, 2 s, … up to MAX_FAILURE_DELAY) before the
    next sign-in is checked; and past MAX_FAILURES_PER_WINDOW failures in FAILURE_WINDOW_SECONDS no token is checked
    at all until the window has room. A success starts the doubling again."""

    def __init__(self, clock=time.monotonic, sleep=time.sleep):
        self.failures = 0
        self.recent: deque[float] = deque()  # when the failures of the current window happened
        self.clock, self.sleep = clock, sleep
        self._lock = threading.Lock()

    def sign_in(self, check) -> tuple[bool, float | None]:
        """(whether `check()` passed, the seconds to wait when none is checked now because of too many failures)."""
        with self._lock:
            now = self.clock()
            while self.recent and now - self.recent[0] >= FAILURE_WINDOW_SECONDS:
                self.recent.popleft()
            if len(self.recent) >= MAX_FAILURES_PER_WINDOW:
                return False, FAILURE_WINDOW_SECONDS - (now - self.recent[0])
            if check():
                self.failures = 0
                return True, None
            self.failures += 1
            self.recent.append(now)
            self.sleep(min(0.5 * 2 ** (self.failures - 1), MAX_FAILURE_DELAY))  # the lock held: the next one waits too
            return False, None


SIGN_IN = Throttle()
