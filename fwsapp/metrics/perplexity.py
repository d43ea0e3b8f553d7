"""Perplexity of generated tokens under an oracle model, conditioned on the prompt.

PPL = exp(mean over the output's tokens of −log p(token | prompt, earlier output tokens)). The prompt
tokens condition but are not scored. Batched with right padding; padding is masked out of the mean.
"""
from __future__ import annotations

import math

import torch

from fwsapp.models import LoadedModel


def encode_pair(lm: LoadedModel, prompt: str, text: str) -> tuple[list[int], list[int]]:
    """Token ids of the prompt (with the model's special tokens) and of the output after it."""
    prompt_ids = lm.tokenizer(prompt)["input_ids"]
    text_ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return prompt_ids, text_ids


def perplexity(lm: LoadedModel, pairs: list[tuple[list[int], list[int]]], batch_size: int = 8) -> list[float | None]:
    """PPL per (prompt_ids, output_ids) pair; None for an empty output."""
    results: list[float | None] = []
    pad = lm.tokenizer.pad_token_id or 0
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start:start + batch_size]
        sequences = [prompt + output for prompt, output in batch]
        width = max(len(sequence) for sequence in sequences)
        input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
        attention = torch.zeros((len(batch), width), dtype=torch.long)
        scored = torch.zeros((len(batch), width), dtype=torch.bool)
        for row, ((prompt, output), sequence) in enumerate(zip(batch, sequences)):
            input_ids[row, : len(sequence)] = torch.tensor(sequence)
            attention[row, : len(sequence)] = 1
            scored[row, len(prompt): len(sequence)] = True  # output tokens only
        with torch.inference_mode():
            logits = lm.model(input_ids=input_ids.to(lm.device), attention_mask=attention.to(lm.device)).logits.float()
        # Position t predicts token t + 1.
        log_probs = torch.log_softmax(logits[:, :-1], dim=-1).cpu()
        targets = input_ids[:, 1:]
        token_nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        mask = scored[:, 1:]
        for row in range(len(batch)):
            count = int(mask[row].sum())
            results.append(math.exp(float(token_nll[row][mask[row]].mean())) if count else None)
    return results
