"""Token entropy: the Shannon entropy of the model's next-token distribution at each position.

Generation records it for every generated token; `compute_entropies` recomputes it (teacher-forced)
for references and imported texts. Watermarks disturb medical text most where the model is unsure,
so these values drive SWEET's gating and the Why-factuality-degrades analysis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from fwsapp.models.teacher_forcing import teacher_force
from fwsapp.store import generated_here

# Bins of the paper's entropy-shift analysis (nats).
LOW, HIGH = 1.5, 4.0
BINS = {"low": (float("-inf"), LOW), "mid": (LOW, HIGH), "high": (HIGH, float("inf"))}


def token_spans(tokenizer, token_ids: Sequence[int]) -> list[tuple[int, int]]:
    """Character span of each generated token in the decoded text, by decoding incrementally (exact for
    the stored ids, unlike re-tokenising the text)."""
    spans, previous = [], 0
    for end in range(1, len(token_ids) + 1):
        length = len(tokenizer.decode(list(token_ids[:end]), skip_special_tokens=True))
        spans.append((previous, length))
        previous = length
    return spans


def teacher_forced(lm, items: list[tuple[str, str]], batch_size: int = 8) -> list[dict]:
    """Token ids, character spans and entropies of texts the model did not write, each after its prompt
    ((prompt, text) pairs), teacher-forced in batches."""
    encoded = [lm.tokenizer(text, add_special_tokens=False, return_offsets_mapping=True) for _, text in items]
    contexts = [lm.tokenizer(prompt)["input_ids"] if prompt else [] for prompt, _ in items]
    stats = teacher_force(lm, [(context, code["input_ids"]) for context, code in zip(contexts, encoded)], ("entropy",),
                          batch_size)
    return [{"token_ids": code["input_ids"], "token_spans": [list(span) for span in code["offset_mapping"]],
             "entropy": [value if value != float("-inf") else None for value in found["entropy"].tolist()]}
            for code, found in zip(encoded, stats)]


def missing_texts(store, run_id: str, model_name: str) -> list[tuple[int, str, str, str]]:
    """(sample, kind, prompt, text) whose entropies are not stored: references always; generated texts too when the run
    was not generated here (imported, or answered by a serving engine: no entropies were recorded while generating
    them)."""
    run = store.run(run_id)
    have = store.entropy_keys(run_id, model_name)
    kinds = ("reference",) if generated_here(run) else ("reference", "unwatermarked", "watermarked")
    todo = []
    for row in store.generations(run_id).itertuples():
        for kind in kinds:
            text = row.reference if kind == "reference" else getattr(row, f"{kind}_text")
            if isinstance(text, str) and text and (row.sample_idx, kind) not in have:
                todo.append((int(row.sample_idx), kind, row.prompt, text))
    return todo


def compute_entropies(store, run_id: str, lm, progress=None) -> int:
    """Store teacher-forced entropies for a run's references (and imported texts); returns how many texts
    gained them. A reference another run over the same prompt already has under this model is copied."""
    reused = store.reuse_reference_entropies(run_id, lm.name)
    todo = missing_texts(store, run_id, lm.name)
    for start in range(0, len(todo), 16):  # written as we go: a killed job keeps what it finished
        chunk = todo[start:start + 16]
        found = teacher_forced(lm, [(prompt, text) for _, _, prompt, text in chunk])
        store.write_rows("entropies", run_id, [{"sample_idx": sample_idx, "text_kind": kind, "model": lm.name, **values}
                                              for (sample_idx, kind, _, _), values in zip(chunk, found)])
        if progress:
            progress(start + len(chunk), len(todo))
    return reused + len(todo)


def token_values(store, run_ids: list[str] | None = None):
    """Long table of per-token entropies: run_id, sample_idx, text_kind, entropy_model, entropy; each run's texts
    under one model, so two models' entropies are never pooled: an imported run analysed again under another entropy
    model keeps the one that holds most of its tokens. Chosen per run, not per text kind: the watermarked texts'
    densities are read against the unwatermarked ones, and each kind's own most-tokens model could differ (another
    stand-in's interrupted analysis, another tokenizer's lengths)."""
    values = store.token_entropies(run_ids)
    counts = values.groupby(["run_id", "entropy_model"], as_index=False).size()
    kept = counts.sort_values(["size", "entropy_model"], ascending=[False, True], kind="stable").drop_duplicates(
        "run_id")
    return values.merge(kept[["run_id", "entropy_model"]], on=["run_id", "entropy_model"])


def read_entropy_model(store, run_id: str) -> str | None:
    """The model a run's texts are read under where none is named (`token_values`'s choice), or None."""
    values = token_values(store, [run_id])
    return values.entropy_model.iloc[0] if len(values) else None


def bin_shares(values) -> dict[str, float]:
    """Percent of tokens in the low (< 1.5), mid (1.5-4) and high (> 4) entropy bins."""
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return {name: None for name in BINS}
    return {name: float(np.mean((values >= low) & (values < high)) * 100) for name, (low, high) in BINS.items()}


