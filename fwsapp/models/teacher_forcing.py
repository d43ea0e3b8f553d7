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
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    import torch

# Why 2048: attention over a padded batch materialises heads × window² scores per row; 2048 keeps that near
# 150 MB for a 135M model, and the paper's texts (≤ 600 tokens with their prompts) never reach it.
MAX_WINDOW = 2048
BATCH_TOKENS = 8192
HEAD_VALUES = 1 << 24  # logits computed at once (positions × vocabulary): 64 MB in fp32


@dataclass(frozen=True)
class Statistic:
    """A per-token statistic: `compute(log_probs, chosen)` maps the log-softmax rows (positions × vocabulary) and
    the log-probability of each position's actual token (positions × 1) to one value per position."""

    name: str
    compute: Callable[["torch.Tensor", "torch.Tensor"], "torch.Tensor"]
    # The value of a token with nothing before it (no distribution to read).
    before_first: float = np.nan


def _log_prob_square(rows, chosen):
    import torch

    return (rows.exp() * torch.nan_to_num(rows, neginf=0.0).square()).sum(1)


STATISTICS: dict[str, Statistic] = {statistic.name: statistic for statistic in (
    Statistic("log_prob", lambda rows, chosen: chosen.squeeze(1)),
    Statistic("rank", lambda rows, chosen: ((rows > chosen).sum(1) + 1).float()),
    Statistic("entropy", lambda rows, chosen: entropy_of(rows), before_first=-np.inf),
    Statistic("log_prob_square", _log_prob_square),
)}


def tempered(rows: "torch.Tensor", temperature: float) -> "torch.Tensor":
    """Log-softmax rows of the distribution sampled at `temperature` (the rows themselves at 1)."""
    import torch

    return rows if temperature == 1 else torch.log_softmax(rows / temperature, dim=1)


def spike_entropy(modulus: float, temperature: float = 1.0) -> Statistic:
    """Spike entropy Σ_v p_v / (1 + z p_v) (Kirchenbauer et al. 2023, EWD): near 1 for a flat distribution, near
    1/(1 + z) for a spike. Its modulus z comes from the watermark's γ and δ; p is sampled at `temperature`."""
    def compute(rows, chosen):
        probabilities = tempered(rows, temperature).exp()
        return (probabilities / (1 + modulus * probabilities)).sum(1)

    return Statistic(f"spike_entropy({modulus:.12g}, T={temperature:g})", compute)


def chosen_probability(temperature: float = 1.0) -> Statistic:
    """The probability of the token actually there, in the distribution sampled at `temperature`."""
    import torch

    def compute(rows, chosen):
        if temperature == 1:
            return chosen.squeeze(1).exp()
        return (chosen.squeeze(1) / temperature - torch.logsumexp(rows / temperature, dim=1)).exp()

    return Statistic(f"chosen_probability(T={temperature:g})", compute)


class TokenStats:
    """The asked-for statistics of a text's scored tokens, by name: `stats["entropy"]` is one value per token."""

    def __init__(self, values: dict[str, np.ndarray]):
        self.values = values

    def __getitem__(self, name: str) -> np.ndarray:
        return self.values[name]

    def __len__(self) -> int:
        return len(next(iter(self.values.values())))


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


def entropy_of(log_probs: "torch.Tensor") -> "torch.Tensor":
    """Shannon entropy in nats of a log-probability distribution along the last axis; -inf entries contribute 0."""
    import torch

    return -(log_probs.exp() * torch.nan_to_num(log_probs, neginf=0.0)).sum(-1)


def token_entropy(logits: "torch.Tensor") -> "torch.Tensor":
    """Shannon entropy in nats of softmax(logits) along the last axis."""
    import torch

    return entropy_of(torch.log_softmax(logits.float(), dim=-1))


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


def teacher_force(lm, pairs: Sequence[tuple[Sequence[int], Sequence[int]]], statistics: Sequence[str | Statistic],
                  batch_size: int = 8, start_token: int | None = None) -> list[TokenStats]:
    """TokenStats for each (context ids, text ids) pair: the named STATISTICS (or Statistic objects). Windows are
    batched by length with right padding (masked out), at most `batch_size` rows and BATCH_TOKENS tokens a pass."""
    wanted = [STATISTICS[item] if isinstance(item, str) else item for item in statistics]
    if str(getattr(lm, "device", "cpu")).startswith("cpu"):
        from fwsapp.models.threads import adapt

        adapt()
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
        scored.update(zip(batch, _score_batch(lm, batch, sequences, wanted)))
    results = []
    for index, gap in enumerate(leading_gap):
        parts = [scored[window] for window in pieces if window.pair == index]
        values = np.vstack([np.empty((0, len(wanted)))] + parts)
        if gap:
            values = np.vstack([[statistic.before_first for statistic in wanted], values])
        results.append(TokenStats({statistic.name: values[:, column] for column, statistic in enumerate(wanted)}))
    return results


def next_token_log_probs(lm, context: Sequence[int], text: Sequence[int]) -> "torch.Tensor":
    """The whole next-token distribution (log-softmax rows, tokens × vocabulary) before each token of `text`, for
    detectors that need more than per-token statistics (Unbiased's likelihood ratios). One forward pass, so the
    text and its context must fit the model's window; a first token with nothing before it gets a row of NaN."""
    import torch

    sequence = list(context) + list(text)
    if len(sequence) > context_window(lm):
        raise ValueError(f"{len(sequence)} tokens do not fit the model's window of {context_window(lm)} in one pass.")
    with torch.inference_mode():
        logits = lm.model(input_ids=torch.tensor([sequence], device=lm.device)).logits[0].float()
    rows = torch.log_softmax(logits[max(len(context) - 1, 0):len(sequence) - 1], dim=-1).cpu()
    if not context and text:
        rows = torch.cat([torch.full((1, rows.shape[1]), float("nan")), rows])
    return rows


def _batches(ordered: list[Window], batch_size: int) -> list[list[Window]]:
    """Consecutive windows (sorted by width) grouped within the row and padded-token budgets."""
    batches, current = [], []
    for window in ordered:
        if current and (len(current) == batch_size or (len(current) + 1) * window.width > BATCH_TOKENS):
            batches.append(current)
            current = []
        current.append(window)
    return batches + ([current] if current else [])


def _score_batch(lm, batch: list[Window], sequences: list[list[int]], wanted: list[Statistic]) -> list[np.ndarray]:
    """Per window, the (scored tokens × statistics) values."""
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
            values = _values(torch.cat([logits[row, positions.to(lm.device)] for row, positions in enumerate(rows)]), targets,
                             wanted)
        else:
            hidden = lm.model.base_model(input_ids=input_ids.to(lm.device), attention_mask=attention).last_hidden_state
            states = torch.cat([hidden[row, positions.to(lm.device)] for row, positions in enumerate(rows)])
            step = max(1, HEAD_VALUES // head.out_features)
            values = np.vstack([np.empty((0, len(wanted)))] + [
                _values(head(states[begin:begin + step]), targets[begin:begin + step], wanted)
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


def _values(logits: "torch.Tensor", targets: "torch.Tensor", wanted: list[Statistic]) -> np.ndarray:
    """(positions × statistics) values of the target tokens under rows of logits."""
    import torch

    rows = torch.log_softmax(logits.float(), dim=-1)
    chosen = rows.gather(1, targets.to(rows.device).clamp(max=rows.shape[1] - 1)[:, None])
    return torch.stack([statistic.compute(rows, chosen) for statistic in wanted], dim=1).cpu().double().numpy()
