"""Every watermark and detector name fwsapp knows, with its score direction; importable without torch.

p-value scores (EXP-edit) are "lower is watermarked"; all others are "higher". Names are
case-insensitive, and the paper's file spellings (DIP, EXPEdit) are aliases.
"""
from __future__ import annotations

SCORE_DIRECTIONS = {
    "KGW": "higher", "SWEET": "higher", "DiPmark": "higher", "EXP-edit": "lower", "Unigram": "higher",
    "SynthID": "higher", "LogRank": "higher", "DetectGPT": "higher", "Fast-DetectGPT": "higher",
}
ALIASES = {"DIP": "DiPmark", "EXPEdit": "EXP-edit"}
# Detectors with no watermark: model text (positives) against the dataset's human reference (negatives).
POST_HOC = ("LogRank", "DetectGPT", "Fast-DetectGPT")


def detection_kinds(method: str) -> tuple[str, str]:
    """(positive, negative) text kinds for a method's detection metrics."""
    return ("unwatermarked", "reference") if canonical_name(method) in POST_HOC else ("watermarked", "unwatermarked")


def canonical_name(name: str) -> str:
    """The registered spelling of a method name: 'kgw' -> 'KGW', 'expedit' -> 'EXP-edit'."""
    wanted = name.strip().lower()
    for key in list(SCORE_DIRECTIONS) + list(ALIASES):
        if key.lower() == wanted:
            return ALIASES.get(key, key)
    raise ValueError(f"Unknown watermark method '{name}'. Known: {', '.join(SCORE_DIRECTIONS)}.")
