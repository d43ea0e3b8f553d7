"""A watermark key kept in an environment variable.

A secret parameter (a method's key) may be given as `$VAR` instead of its value. The run then records
`$VAR scrypt:<salt>:<fingerprint>`: the variable's name and a salted, deliberately slow fingerprint of the key, never
the key. The record is what run ids, tables and exports carry; the key is read from the variable again wherever a
watermark is built (generation, detection, attacks), and must still match its fingerprint.

Why scrypt: most methods' keys are at most 2^40, so a fast hash of the key gives it away (an unsalted SHA-256 of a
five-digit key falls at once). At N = 2^15 one fingerprint costs about 0.1 s and 32 MiB, so trying every 2^40 key costs
some 4,000 CPU-years, and the salt keeps that work from serving two installations. The salt is this installation's
(kept in the cache folder), so one key has one record here and a repeated command keeps its run id; a record made
elsewhere carries its own salt and is checked with it. Records from before (`sha256:`) are still checked, never written.
Torch-free.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets

# `$VAR` as written; `$VAR scrypt:<salt>:<fingerprint>` (or an older `$VAR sha256:<fingerprint>`) as recorded.
REFERENCE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)(?: (scrypt:[0-9a-f]{16}:[0-9a-f]{16}|sha256:[0-9a-f]{16}))?$")
SCRYPT_COST = {"n": 2**15, "r": 8, "p": 1, "maxmem": 2**26}
SALT_FILE = "key_salt"


def installation_salt() -> str:
    """This installation's salt (16 hex digits), made once in the cache folder, readable by its owner alone."""
    from fwsapp.paths import CACHE_DIR

    path = CACHE_DIR / SALT_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:  # two processes making it at once keep the first one's
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip()
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_hex(8))
        return path.read_text().strip()


@functools.lru_cache(maxsize=64)
def _scrypt(key: str, salt: str) -> str:
    return hashlib.scrypt(key.encode(), salt=bytes.fromhex(salt), dklen=8, **SCRYPT_COST).hex()


def fingerprint(key: int | str, salt: str | None = None) -> str:
    """`scrypt:<salt>:<digest>` of the key, with this installation's salt unless one is given."""
    salt = salt or installation_salt()
    return f"scrypt:{salt}:{_scrypt(str(key).strip(), salt)}"


def matches(key: str, recorded_fingerprint: str) -> bool:
    """Whether `key` is the one a recorded fingerprint (scrypt, or an older sha256) was made of."""
    kind, _, rest = recorded_fingerprint.partition(":")
    if kind == "sha256":
        return hashlib.sha256(key.encode()).hexdigest()[:16] == rest
    salt, _, _ = rest.partition(":")
    return fingerprint(key, salt) == recorded_fingerprint


def is_reference(value) -> bool:
    return isinstance(value, str) and REFERENCE.match(value.strip()) is not None


def is_recorded(value: str) -> bool:
    """Whether a reference carries the fingerprint of the key it was recorded with (`$VAR scrypt:…`)."""
    return REFERENCE.match(value.strip()).group(2) is not None


def variable(value: str) -> str:
    """The name of the environment variable a reference reads."""
    return REFERENCE.match(value.strip()).group(1)


def recorded(value: str, where: str) -> str:
    """The record of a reference: `$VAR` gets the fingerprint of the key the variable holds now; a record is checked
    against it."""
    return f"${variable(value)} {fingerprint(resolved(value, where))}"


def resolved(value: str, where: str) -> str:
    """The key a reference stands for, read from its variable; one line saying what to set where it is unset or holds
    another key than the one recorded. The key itself is never in a message."""
    name, expected = REFERENCE.match(value.strip()).groups()
    key = os.environ.get(name, "").strip()
    if not key:
        raise ValueError(f"{where} is kept in ${name}, which is not set here: set it to the key"
                         + (" whose fingerprint the run recorded" if expected else "") + " and run again.")
    if expected and not matches(key, expected):
        raise ValueError(f"{where}: ${name} holds another key than the one recorded: set it to that key and run "
                         "again.")
    return key
