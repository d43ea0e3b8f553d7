"""Perplexity of generated tokens under an oracle model, conditioned on the prompt.

PPL = exp(mean over the output's tokens of −log p(token | prompt, earlier output tokens)). The prompt
tokens condition but are not scored (teacher_forcing.py: batched, with padding masked out).
"""
from __future__ import annotations

import math

import numpy as np

from fwsapp.quality.base import Metric, metric_row
from fwsapp.models import LoadedModel
from fwsapp.store import generated_here
from fwsapp.models.teacher_forcing import teacher_force


def encode_pair(lm: LoadedModel, prompt: str, text: str) -> tuple[list[int], list[int]]:
    """Token ids of the prompt (with the model's special tokens) and of the output after it."""
    prompt_ids = lm.tokenizer(prompt)["input_ids"]
    text_ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
    return prompt_ids, text_ids


def perplexity(lm: LoadedModel, pairs: list[tuple[list[int], list[int]]], batch_size: int = 8) -> list[float | None]:
    """PPL per (prompt_ids, output_ids) pair; None for an empty output."""
    log_probs = [stats["log_prob"] for stats in teacher_force(lm, pairs, ("log_prob",), batch_size)]
    return [math.exp(-float(values[np.isfinite(values)].mean())) if np.isfinite(values).any() else None
            for values in log_probs]


PPL_CHUNK = 8  # samples per perplexity pass between progress reports and writes


def perplexity_oracle(run: dict, oracle: str | None) -> str | None:
    """The model whose perplexity a run gets: the one named, else the run's own generator. An imported run, and a run
    generated through a serving engine, have none loaded here, so they get perplexity only when an oracle is named."""
    return oracle or (run["model"] if generated_here(run) else None)


class Perplexity(Metric):
    def config(self, run: dict, resources) -> str | None:
        oracle = perplexity_oracle(run, resources.oracle)
        return None if oracle is None else f"oracle={oracle}"

    def prepare(self, run: dict, resources) -> None:
        resources.model_loader(perplexity_oracle(run, resources.oracle))

    def rows(self, todo, run: dict, resources, config: str):
        """The run's own generator reads its stored token ids; another oracle reads the texts tokenised its way."""
        oracle = perplexity_oracle(run, resources.oracle)
        lm = resources.model_loader(oracle)
        own_tokens = oracle == run["model"] and not run["imported"]
        for start in range(0, len(todo), PPL_CHUNK):
            chunk, rows = todo.iloc[start:start + PPL_CHUNK], []
            for kind in self.entry.kinds:
                pairs = [
                    (lm.tokenizer(row.prompt)["input_ids"], list(getattr(row, f"{kind}_ids")))
                    if own_tokens else encode_pair(lm, row.prompt, getattr(row, f"{kind}_text"))
                    for row in chunk.itertuples()
                ]
                rows += [metric_row(row.sample_idx, kind, self.entry.name, config, value)
                         for row, value in zip(chunk.itertuples(), perplexity(lm, pairs))]
            yield rows, start + len(chunk)
