"""Perplexity of generated tokens under an oracle model, conditioned on the prompt.

PPL = exp(mean over the output's tokens of −log p(token | prompt, earlier output tokens)). The prompt
tokens condition but are not scored (teacher_forcing.py: batched, with padding masked out).
"""
from __future__ import annotations

import math

import numpy as np

from fwsapp.models import LoadedModel
from fwsapp.teacher_forcing import teacher_force


def encode_pair(lm: LoadedModel, prompt: str, text: str) -> tuple[list[int], list[int]]:
    """Token ids of the prompt (with the model's special tokens) and of the output after it."""
    prompt_ids = lm.tokenizer(prompt)["input_ids"]
    text_ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return prompt_ids, text_ids


def perplexity(lm: LoadedModel, pairs: list[tuple[list[int], list[int]]], batch_size: int = 8) -> list[float | None]:
    """PPL per (prompt_ids, output_ids) pair; None for an empty output."""
    return [math.exp(-float(stats.log_prob[np.isfinite(stats.log_prob)].mean())) if np.isfinite(stats.log_prob).any()
            else None for stats in teacher_force(lm, pairs, batch_size)]
