"""Whose key goes where: the judge's API key is read only from the environment variable the command line names, never
from a spec, and where it goes is said before anything is sent."""
from __future__ import annotations

import os
import sys
from typing import Protocol


class JudgeSettingsOfASpec(Protocol):
    """What a spec says of its judge that decides where a key goes (the grid's [steps] judge)."""

    api_key_env: str | None
    base_url: str | None


def confirmed_judge_key(spec_name: str, judge: JudgeSettingsOfASpec | None, confirmed: str | None) -> str | None:
    """The judge's key for a spec, read only from the variable the command line names. Specs are shared and re-run,
    so a spec never chooses which secret leaves this machine: the variable it names must be confirmed by the same
    --api-key-env, and where the key goes is said (on stderr) before anything is sent."""
    named = judge.api_key_env if judge else None
    if named and confirmed != named:
        raise ValueError(f"{spec_name}: [steps] judge would send the key in ${named}; a spec does not choose which "
                         f"secret leaves this machine: confirm it with --api-key-env {named}"
                         + (f" (not {confirmed})." if confirmed else "."))
    if not confirmed:
        return None
    if not judge:
        raise ValueError(f"--api-key-env {confirmed}: {spec_name} has no [steps] judge to send a key to.")
    key = os.environ.get(confirmed)
    if not key:
        raise ValueError(f"--api-key-env {confirmed}: that environment variable is not set.")
    url = judge.base_url
    if url is None:
        print(f"The judge key in ${confirmed} goes to OpenAI's API.", file=sys.stderr)
    elif not loopback(url):
        print(f"The judge key in ${confirmed} goes to {url}, which is not this machine.", file=sys.stderr)
    return key


def loopback(url: str) -> bool:
    """Whether a URL's host is this machine (localhost or a loopback address)."""
    from urllib.parse import urlsplit

    from fwsapp.network import is_loopback

    return is_loopback(urlsplit(url).hostname)
