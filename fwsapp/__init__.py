"""fwsapp: what does an LLM watermark do to the medical facts in a text?"""

import os

__version__ = "0.13.0"

# OpenMP threads that wait sleep rather than spin, on a machine other work shares (fwsapp/models/threads.py); set before
# torch is imported, and only where the environment has not chosen.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# What a bad input, a locked database, a missing model or a failing judge raises: reported as one line by the CLI
# and the app's jobs, never as a traceback. Anything else is a bug and keeps its traceback.
EXPECTED_ERRORS = (ValueError, RuntimeError, OSError)


def one_line(error: BaseException, limit: int = 200) -> str:
    """An error as one line of a message or a status reason: its first line, or its type where it says nothing."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:limit]


def counted(count: int, singular: str, plural: str) -> str:
    """A count and its noun (with its verb, where given) in agreement: counted(1, "run has", "runs have")."""
    return f"{count:,} {singular if count == 1 else plural}"


def units(count: int, unit: str, qualifier: str = "") -> str:
    """A count of a method's units (`MethodInfo.unit`: token or sentence), in agreement: units(1, "sentence",
    "scored") is "1 scored sentence", units(17, "token") "17 tokens"."""
    named = f"{qualifier} {unit}" if qualifier else unit
    return counted(count, named, f"{named}s")


def in_words(items: list[str], last: str = "and") -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c" (`last`: the word before the last one)."""
    items = list(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}" if len(items) > 1 else "".join(items)


def duration(seconds: float) -> str:
    """A duration as people read it: '45 s', '2 min 10 s', '3 h 5 min' (never '0.0 min')."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    return f"{minutes} min {seconds} s" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def percent(share: float) -> str:
    """A share (a false-positive rate, say) as a percentage with the decimals it has: 0.001 is "0.1%" and 0.025 "2.5%",
    where a whole-percent format wrote "0%" and "2%"."""
    return f"{share * 100:.6g}%"


def share_text(share: float) -> str:
    """A measured share (of words changed, tokens watermarked, texts still detected) to a tenth of a percent, with
    "under 0.1%" and "over 99.9%" at the ends: one dose among 200 answers' words changed is not "0.0%", one word of a
    150-word answer not "1%", and 249 verdicts of 250 not "100%"."""
    if 0 < share < 0.0005:
        return "under 0.1%"
    if 0.9995 <= share < 1:
        return "over 99.9%"
    return f"{share:.1%}"


def p_text(p: float) -> str:
    """A p-value as written: in significant digits (a strong correlation's p is 3.2e-27, not 0 or 0.000), and one that
    underflowed to 0 as below the smallest double."""
    return "< 1e-300" if p == 0 else f"{p:.3g}"
