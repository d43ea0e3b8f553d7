"""Token entropy: the Shannon entropy of the model's next-token distribution at each position.

Generation records it for every generated token; `sequence_entropies` recomputes it (teacher-forced)
for references and imported texts. Watermarks disturb medical text most where the model is unsure,
so these values drive SWEET's gating and the Why-factuality-degrades analysis.
"""
from __future__ import annotations

from typing import Sequence

import torch

# Bins of the paper's entropy-shift analysis (nats).
LOW, HIGH = 1.5, 4.0


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats of softmax(logits) along the last axis; -inf logits contribute 0."""
    logits = logits.float()
    log_probs = torch.log_softmax(logits, dim=-1)
    probs = log_probs.exp()
    return -(probs * torch.nan_to_num(log_probs, neginf=0.0)).sum(-1)


def sequence_entropies(lm, token_ids: Sequence[int], context_ids: Sequence[int] = ()) -> list[float]:
    """Entropy of the distribution each token was drawn from, given everything before it.

    A token with nothing before it (the first of a pasted text) gets -inf: no distribution is known.
    """
    context = list(context_ids)
    ids = torch.tensor([context + list(token_ids)], device=lm.device)
    if ids.shape[1] == 0:
        return []
    with torch.inference_mode():
        logits = lm.model(ids).logits[0]
    entropy = token_entropy(logits).cpu().tolist()  # entropy[i] is for the token at i + 1
    return ([float("-inf")] + entropy[:-1])[len(context):]
