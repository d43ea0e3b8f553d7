"""Teacher forcing: a model reads a text it may not have written, and says how it would have predicted
each token. One forward pass per batch gives, for every token of the text:

- its log-probability given everything before it (perplexity, DetectGPT's likelihood, Fast-DetectGPT);
- its rank among the vocabulary (LogRank);
- the entropy of the distribution it was drawn from (the entropy analysis, SWEET's detector);
- that distribution's second moment of log p (Fast-DetectGPT's analytic variance).

The context (the prompt) conditions but is not scored. A token with nothing before it has no
distribution: its values are NaN (entropy −inf), unless a start token stands in as context.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch


@dataclass
class TokenStats:
    """Per scored token: log p(token), its rank (1 = most likely), entropy and E[(log p)²] (nats)."""

    log_prob: np.ndarray
    rank: np.ndarray
    entropy: np.ndarray
    log_prob_square: np.ndarray

    def __len__(self) -> int:
        return len(self.log_prob)


def token_entropy(logits: "torch.Tensor") -> "torch.Tensor":
    """Shannon entropy in nats of softmax(logits) along the last axis; -inf logits contribute 0."""
    import torch

    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return -(log_probs.exp() * torch.nan_to_num(log_probs, neginf=0.0)).sum(-1)


def teacher_force(lm, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int = 8,
                  start_token: int | None = None) -> list[TokenStats]:
    """TokenStats for each (context ids, text ids) pair, batched with right padding (masked out)."""
    import torch

    results = []
    pad = lm.tokenizer.pad_token_id or 0
    for begin in range(0, len(pairs), batch_size):
        batch = [(list(context) or ([start_token] if start_token is not None else []), list(text))
                 for context, text in pairs[begin:begin + batch_size]]
        sequences = [context + text for context, text in batch]
        width = max(len(sequence) for sequence in sequences)
        if width == 0:
            results.extend(_stats(np.empty((0, 4))) for _ in batch)
            continue
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            input_ids[row, :len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        # Equal lengths need no mask; leaving it out keeps single texts bit-identical to a plain forward.
        padded = any(len(sequence) < width for sequence in sequences)
        attention = (torch.arange(width)[None, :] < torch.tensor([len(s) for s in sequences])[:, None]).long()
        with torch.inference_mode():
            logits = lm.model(input_ids=input_ids.to(lm.device),
                              attention_mask=attention.to(lm.device) if padded else None).logits
            for row, (context, text) in enumerate(batch):
                results.append(_token_stats(logits[row], len(context), text))
    return results


def _token_stats(logits: "torch.Tensor", context_length: int, text: list[int]) -> TokenStats:
    """Stats of `text`'s tokens from one row of logits (position t predicts token t + 1)."""
    import torch

    first = max(context_length - 1, 0)
    rows = torch.log_softmax(logits[first:context_length + len(text) - 1].float(), dim=-1)
    scored = text[1:] if context_length == 0 else text  # no distribution for a first token with no context
    targets = torch.tensor(scored, dtype=torch.long, device=rows.device).clamp(max=rows.shape[1] - 1)
    chosen = rows.gather(1, targets[:, None])
    finite = torch.nan_to_num(rows, neginf=0.0)
    probs = rows.exp()
    values = torch.stack([
        chosen.squeeze(1), ((rows > chosen).sum(1) + 1).float(),
        -(probs * finite).sum(1), (probs * finite.square()).sum(1),
    ], dim=1).cpu().double().numpy()
    if context_length == 0 and text:
        values = np.vstack([[np.nan, np.nan, -np.inf, np.nan], values])
    return _stats(values)


def _stats(values: np.ndarray) -> TokenStats:
    return TokenStats(log_prob=values[:, 0], rank=values[:, 1], entropy=values[:, 2], log_prob_square=values[:, 3])
