"""The entropy gate of SWEET (Lee et al. 2024): a token is watermarked only where the model's next-token entropy exceeds
the threshold, so near-certain tokens (a drug's name once begun, a dose's unit) are left as the model wrote them. Torch
free: the coverage replay reads the entropies a run generated here stored with each answer (the raw logits' entropy
in nats, as SWEET's processor computes it)."""
from __future__ import annotations

from fwsapp.watermark.methods import WATERMARKED, GeneratedAnswer

LOW_ENTROPY = "next-token entropy at or below the threshold"


def coverage(params: dict, answer: GeneratedAnswer, sampling: dict) -> list[str]:
    """Per generated token, WATERMARKED where its next-token entropy exceeded `entropy_threshold`, else LOW_ENTROPY."""
    entropies = answer.entropies
    if entropies is None or len(entropies) != len(answer.token_ids):
        raise ValueError("SWEET's coverage replays its entropy gate on the entropies stored with each answer, and this "
                         "run has none for some answers: generate it here again to see its coverage.")
    threshold = params["entropy_threshold"]
    return [WATERMARKED if entropy > threshold else LOW_ENTROPY for entropy in entropies]
