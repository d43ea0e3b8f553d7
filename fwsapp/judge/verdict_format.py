"""Constrained decoding of the final verdict, for a local judge too small to follow the format by itself.

The reply is forced token by token into `[[A]]: [c, r, f]` / `[[B]]: [c, r, f]`: the fixed parts are the only
allowed tokens where they come, and each score slot allows only the tokens that read as 1 to 5, so the model's own
preference among those five decides each score. Every verdict then parses; what the scores are worth still
depends on the model (a 135M model's are a smoke test, not a judgment).
"""
from __future__ import annotations

import torch
from transformers import LogitsProcessor

SLOT = -1  # a score: one of the digit tokens
PIECES = ("[[A]]: [", SLOT, ", ", SLOT, ", ", SLOT, "]\n[[B]]: [", SLOT, ", ", SLOT, ", ", SLOT, "]")


def verdict_template(tokenizer) -> tuple[list[int], list[int]]:
    """(template: token ids with SLOT for each score, the ids of the tokens that read as 1 to 5)."""
    template = []
    for piece in PIECES:
        template.extend([SLOT] if piece == SLOT else tokenizer(piece, add_special_tokens=False)["input_ids"])
    pieces = tokenizer(" ".join("12345") + " " + "".join("12345"), add_special_tokens=False)["input_ids"]
    digits = sorted({index for index in pieces if tokenizer.decode([index]).strip() in set("12345")})
    if len(digits) < 5:
        raise ValueError("this tokenizer has no single token for each of the digits 1 to 5")
    return template, digits


class VerdictFormat(LogitsProcessor):
    """Allows, at new token t, only template[t] (or a digit where the template has a score)."""

    def __init__(self, template: list[int], digits: list[int], prompt_length: int):
        self.template, self.prompt_length = template, prompt_length
        self.digits = torch.tensor(digits)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_length
        allowed = self.digits if self.template[step] == SLOT else torch.tensor([self.template[step]])
        mask = torch.full_like(scores, float("-inf"))
        mask[:, allowed.to(scores.device)] = 0.0
        return scores + mask
