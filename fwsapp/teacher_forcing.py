"""Teacher forcing: a model reads a text it may not have written, and says how it would have predicted
each token. For every token of the text it gives:

- its log-probability given everything before it (perplexity, DetectGPT's likelihood, Fast-DetectGPT);
- its rank among the vocabulary (LogRank);
- the entropy of the distribution it was drawn from (the entropy analysis, SWEET's detector);
- that distribution's second moment of log p (Fast-DetectGPT's analytic variance).

The context (the prompt) conditions but is not scored. A token with nothing before it has no
distribution: its values are NaN (entropy −inf), unless a start token stands in as context.

Memory stays bounded for any text length:
- a sequence longer than the window (the model's context, at most MAX_WINDOW tokens) is read in overlapping
  windows, as Hugging Face's perplexity guide does: every token after the first window is predicted from at least
  half a window of what precedes it;
- a forward pass holds at most BATCH_TOKENS padded tokens (windows of similar length are batched together);
- the output layer runs on the scored positions only, a slice at a time, so full-vocabulary tensors are never
  held for a whole batch.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

# Why 2048: attention over a padded batch materialises heads × window² scores per row; 2048 keeps that near
# 150 MB for a 135M model, and the paper's texts (≤ 600 tokens with their prompts) never reach it.
MAX_WINDOW = 2048
BATCH_TOKENS = 8192
HEAD_VALUES = 1 << 24  # logits computed at once (positions × vocabulary): 64 MB in fp32


@dataclass
class TokenStats:
    """Per scored token: log p(token), its rank (1 = most likely), entropy and E[(log p)²] (nats)."""

    log_prob: np.ndarray
    rank: np.ndarray
    entropy: np.ndarray
    log_prob_square: np.ndarray

    def __len__(self) -> int:
        return len(self.log_prob)


@dataclass(frozen=True)
class Window:
    """Tokens [start, end) of sequence `pair`, fed in one forward pass, scoring tokens [scored_from, end)."""

    pair: int
    start: int
    end: int
    scored_from: int

    @property
    def width(self) -> int:
        return self.end - self.start


def token_entropy(logits: "torch.Tensor") -> "torch.Tensor":
    """Shannon entropy in nats of softmax(logits) along the last axis; -inf logits contribute 0."""
    import torch

    log_probs = torch.log_softmax(logits.float(), dim=-1)
    return -(log_probs.exp() * torch.nan_to_num(log_probs, neginf=0.0)).sum(-1)


def context_window(lm) -> int:
    """Tokens one forward pass reads at most: the model's context, capped at MAX_WINDOW."""
    context = getattr(lm.model.config, "max_position_embeddings", None) or MAX_WINDOW
    return min(int(context), MAX_WINDOW)


def windows(pair: int, length: int, first: int, size: int) -> list[Window]:
    """Windows over a sequence of `length` tokens that score its tokens from `first` on, each at most `size`
    tokens wide; after the first, each scores the tokens after its first half."""
    stride = max(size // 2, 1)
    found, done = [], first
    while done < length:
        end = min(length, max(done + stride, size))
        found.append(Window(pair, max(0, end - size), end, done))
        done = end
    return found


def teacher_force(lm, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], batch_size: int = 8,
                  start_token: int | None = None) -> list[TokenStats]:
    """TokenStats for each (context ids, text ids) pair. Windows are batched by length with right padding
    (masked out), at most `batch_size` rows and BATCH_TOKENS tokens a pass."""
    sequences, leading_gap = [], []
    for context, text in pairs:
        context = list(context) or ([start_token] if start_token is not None else [])
        sequences.append(context + list(text))
        leading_gap.append(not context and len(text) > 0)  # a first token with nothing before it
    size = context_window(lm)
    pieces = [window for index, sequence in enumerate(sequences)
              for window in windows(index, len(sequence), len(sequence) - len(pairs[index][1]) or 1, size)]
    scored: dict[Window, np.ndarray] = {}
    for batch in _batches(sorted(pieces, key=lambda window: window.width), batch_size):
        scored.update(zip(batch, _score_batch(lm, batch, sequences)))
    results = []
    for index, gap in enumerate(leading_gap):
        parts = [scored[window] for window in pieces if window.pair == index]
        values = np.vstack([np.empty((0, 4))] + parts)
        if gap:
            values = np.vstack([[np.nan, np.nan, -np.inf, np.nan], values])
        results.append(_stats(values))
    return results


def _batches(ordered: list[Window], batch_size: int) -> list[list[Window]]:
    """Consecutive windows (sorted by width) grouped within the row and padded-token budgets."""
    batches, current = [], []
    for window in ordered:
        if current and (len(current) == batch_size or (len(current) + 1) * window.width > BATCH_TOKENS):
            batches.append(current)
            current = []
        current.append(window)
    return batches + ([current] if current else [])


def _score_batch(lm, batch: list[Window], sequences: list[list[int]]) -> list[np.ndarray]:
    """Per window, the (scored tokens × 4) values: log p, rank, entropy, E[(log p)²]."""
    import torch

    width = max(window.width for window in batch)
    input_ids = torch.full((len(batch), width), lm.tokenizer.pad_token_id or 0, dtype=torch.long)
    for row, window in enumerate(batch):
        input_ids[row, :window.width] = torch.tensor(sequences[window.pair][window.start:window.end])
    # Equal lengths need no mask; leaving it out keeps single texts bit-identical to a plain forward.
    widths = torch.tensor([window.width for window in batch])
    padded = bool((widths < width).any())
    attention = (torch.arange(width)[None, :] < widths[:, None]).long().to(lm.device) if padded else None
    # Position t predicts token t + 1: the scored tokens [scored_from, end) come from rows [scored_from - 1, end - 1).
    rows = [torch.arange(window.scored_from - 1 - window.start, window.end - 1 - window.start) for window in batch]
    targets = torch.tensor([token for window in batch for token in sequences[window.pair][window.scored_from:window.end]],
                           dtype=torch.long)
    with torch.inference_mode():
        head = _output_head(lm)
        if head is None:  # a model whose logits are more than a linear map of its last hidden state
            logits = lm.model(input_ids=input_ids.to(lm.device), attention_mask=attention).logits
            values = _values(torch.cat([logits[row, positions.to(lm.device)] for row, positions in enumerate(rows)]), targets)
        else:
            hidden = lm.model.base_model(input_ids=input_ids.to(lm.device), attention_mask=attention).last_hidden_state
            states = torch.cat([hidden[row, positions.to(lm.device)] for row, positions in enumerate(rows)])
            step = max(1, HEAD_VALUES // head.out_features)
            values = np.vstack([np.empty((0, 4))] + [_values(head(states[begin:begin + step]), targets[begin:begin + step])
                                                     for begin in range(0, len(states), step)])
    return np.split(values, np.cumsum([len(positions) for positions in rows])[:-1])


_separable: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _output_head(lm):
    """The model's output layer when logits are exactly that layer applied to the base model's last hidden state
    (Llama, Mistral, BioGPT, SmolLM2; not models that soft-cap or scale logits), checked once per model."""
    import torch

    model = lm.model
    if model not in _separable:
        head = model.get_output_embeddings()
        usable = isinstance(head, torch.nn.Linear) and model.base_model is not model
        if usable:
            probe = torch.tensor([[lm.tokenizer.eos_token_id or 0] * 4], device=lm.device)
            usable = torch.equal(model(input_ids=probe).logits, head(model.base_model(input_ids=probe).last_hidden_state))
        _separable[model] = head if usable else None
    return _separable[model]


def _values(logits: "torch.Tensor", targets: "torch.Tensor") -> np.ndarray:
    """(positions × 4) values of the target tokens under rows of logits."""
    import torch

    rows = torch.log_softmax(logits.float(), dim=-1)
    chosen = rows.gather(1, targets.to(rows.device).clamp(max=rows.shape[1] - 1)[:, None])
    finite = torch.nan_to_num(rows, neginf=0.0)
    probs = rows.exp()
    return torch.stack([
        chosen.squeeze(1), ((rows > chosen).sum(1) + 1).float(),
        -(probs * finite).sum(1), (probs * finite.square()).sum(1),
    ], dim=1).cpu().double().numpy()


def _stats(values: np.ndarray) -> TokenStats:
    return TokenStats(log_prob=values[:, 0], rank=values[:, 1], entropy=values[:, 2], log_prob_square=values[:, 3])
