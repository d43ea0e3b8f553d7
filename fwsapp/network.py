"""Whether an address is this machine's alone: a server bound there is reached from here only, and a key sent there
stays here. The app and the detection service need a token off loopback; a judge's key sent off it is announced."""
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
