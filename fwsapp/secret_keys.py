"""A watermark key kept in an environment variable.

A secret parameter (a method's key) may be given as `$VAR` instead of its value. The run then records
`$VAR sha256:<fingerprint>`: the variable's name and the first 16 hex digits of the key's SHA-256, never the key. The
record is what run ids, tables and exports carry; the key is read from the variable again wherever a watermark is built
(generation, detection, attacks), and must still match its fingerprint. Torch-free.
"""
from __future__ import annotations

import hashlib
import os
import re

# `$VAR` as written; `$VAR sha256:…` as recorded.
REFERENCE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)(?: sha256:([0-9a-f]{16}))?$")


def fingerprint(key: int | str) -> str:
    return hashlib.sha256(str(key).strip().encode()).hexdigest()[:16]


def is_reference(value) -> bool:
    return isinstance(value, str) and REFERENCE.match(value.strip()) is not None


def recorded(value: str, where: str) -> str:
    """The record of a reference: `$VAR` gets the fingerprint of the key the variable holds now; a record is checked
    against it."""
    variable, _ = REFERENCE.match(value.strip()).groups()
    return f"${variable} sha256:{fingerprint(resolved(value, where))}"


def resolved(value: str, where: str) -> str:
    """The key a reference stands for, read from its variable; one line saying what to set where it is unset or holds
    another key than the one recorded."""
    variable, expected = REFERENCE.match(value.strip()).groups()
    key = os.environ.get(variable, "").strip()
    if not key:
        raise ValueError(f"{where} is kept in ${variable}, which is not set here: set it to the key"
                         + (f" (sha256 {expected}…)" if expected else "") + " and run again.")
    if expected and fingerprint(key) != expected:
        raise ValueError(f"{where}: ${variable} holds another key than the one recorded (sha256 {expected}…): set it "
                         "to that key and run again.")
    return key
