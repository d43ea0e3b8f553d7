"""Addresses: whether one is this machine's alone (a server bound there is reached from here only, and a key sent there
stays here: the app and the detection service need a token off loopback; a judge's key sent off it is announced), and
whether a server's address a user gave is one (a serving engine's, a judge's)."""
from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def is_loopback(address: str | None) -> bool:
    """Whether a server bound to `address` can be reached from this machine only. Streamlit binds every interface
    when the address is unset, so None and "" are not loopback."""
    if not address:
        return False
    if address.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


def checked_server_url(url: str, option: str = "The server address", example: str = "http://localhost:8000/v1") -> str:
    """`url` if it is an http or https address with a host and a valid port and no user name or password; else a
    ValueError naming `option` and an `example` of one."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        port_ok = parts.port is None or parts.port > 0
    except ValueError:  # not a number, or out of range
        port_ok = False
    if parts.username is not None or parts.password is not None:
        # A password in the address would be printed in messages and stored with the run: say so without echoing it.
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        raise ValueError(f"{option} {shown} (as given) holds a user name or password: give the address without them; the server's API "
                         "key is read from an environment variable you name, never from the address.")
    if parts.scheme not in ("http", "https") or not parts.hostname or not port_ok:
        raise ValueError(f"{option} {url!r} is not a server's address: give its base URL, e.g. {example}.")
    return url
