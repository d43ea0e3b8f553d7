"""Coverage: how much of a run's output carries the watermark.

A detector can only find what the watermark put there. vLLM's documentation warns that greedy decoding, beam search
and repeated contexts are left unwatermarked without a word: a served run at temperature 0 carries no mark at all, and
a templated answer carries it only where its contexts are new. Per text, each generated token is WATERMARKED or has
the reason its method's processor left it alone (`MethodInfo.token_coverage`, replaying the processor's rule on the
stored tokens, their entropies and the run's decoding settings: vLLM's context rules, SWEET's entropy gate; or, for a
gate that needs the model or the lexicon's tokens, the tokens its own detection scored, which are exactly those); per
run, the share of tokens watermarked and the reasons for the rest.

A run is flagged when it cannot carry the mark as asked: decoding that leaves every token unwatermarked, or a served
run whose watermarked answers are the very answers it gave with the watermark opted out (the engine did not apply it).
"""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pandas as pd

from fwsapp import counted
from fwsapp.watermark import methods
from fwsapp.watermark.methods import WATERMARKED, GeneratedAnswer

# A run is flagged when at least this share of its answers are the same with and without the watermark.
IDENTICAL_SHARE_FLAGGED = 0.5


def _ids(value) -> list[int]:
    if isinstance(value, str):
        value = json.loads(value)
    if value is None or np.ndim(value) == 0:  # no answer: None, NaN or pd.NA
        return []
    return [int(token) for token in value]


def run_coverage(run: dict, generations: pd.DataFrame, scored: dict[int, int] | None = None) -> dict | None:
    """A generated run's coverage (`generations`: its token ids and entropies, `Store.generation_ids`; `scored`: the
    tokens its own detection scored per watermarked answer, for a method whose coverage is its detector's): tokens,
    those watermarked, their share, the reasons for the rest (counts), how many answers are the same with the
    watermark opted out, and the flags; None for an imported run or a post-hoc method (no decoding to replay)."""
    info = methods.info(run["method"])
    if run.get("imported") or info.post_hoc:
        return None
    config = json.loads(run["config"]) if isinstance(run["config"], str) else run["config"]
    sampling = config.get("sampling", {})
    params = info.checked_params(run["params"] if isinstance(run["params"], dict) else json.loads(run["params"]))
    reasons: Counter = Counter()
    identical = answered = 0
    for row in generations.itertuples():
        marked, plain = _ids(row.watermarked_ids), _ids(row.unwatermarked_ids)
        if not marked:
            continue
        answered += 1
        identical += marked == plain
        entropies = getattr(row, "watermarked_entropy", None)
        answer = GeneratedAnswer(marked, None if entropies is None or np.ndim(entropies) == 0 else list(entropies),
                                 (scored or {}).get(int(row.sample_idx)))
        reasons.update(info.token_coverage(params, answer, sampling))
    tokens = sum(reasons.values())
    if not tokens:
        return None
    watermarked = reasons.pop(WATERMARKED, 0)
    flags = []
    if watermarked == 0:
        flags.append(f"no token watermarked ({', '.join(reasons)})")
    if identical and identical >= IDENTICAL_SHARE_FLAGGED * answered:
        flags.append(f"{identical} of {answered} watermarked answers are the same as without the watermark")
    return {"tokens": tokens, "watermarked": watermarked, "share": watermarked / tokens, "not_watermarked": dict(reasons),
            "identical_answers": identical, "answers": answered, "flags": flags}


def reasons_label(reasons: dict[str, int]) -> str:
    """Why tokens were left unwatermarked, each reason with its count ("repeated context: 12 tokens"), or "–". Written
    "reason count", SWEET's read "next-token entropy at or below the threshold 11", as if 11 were the threshold."""
    return "; ".join(f"{reason}: {counted(count, 'token', 'tokens')}" for reason, count in reasons.items()) or "–"


def stored_coverage(store, run_id: str) -> dict | None:
    """`run_coverage` of a stored run: its answers, and the tokens its own detection scored in each."""
    run = store.run(run_id)
    if run.get("imported"):
        return None
    scores = store.detections([run_id])
    own = scores[(scores.detector == run["method"]) & (scores.text_kind == "watermarked")].dropna(
        subset=["num_tokens_scored"])
    return run_coverage(run, store.generation_ids(run_id), dict(zip(own.sample_idx.astype(int),
                                                                    own.num_tokens_scored.astype(int))))


def coverage_frame(store, run_ids: list[str] | None = None) -> pd.DataFrame:
    """Per generated run: method, task, share of tokens watermarked, the reasons for the rest, and its flags."""
    runs = store.runs()
    rows = []
    for run_id in runs.run_id if run_ids is None else run_ids:
        run = store.run(run_id)
        found = stored_coverage(store, run_id)
        if found is None:
            continue
        rows.append({"run": run_id, "method": run["method"], "task": run["task"], "tokens": found["tokens"],
                     "watermarked share": found["share"],
                     "not watermarked": reasons_label(found["not_watermarked"]),
                     "same without the watermark": f"{found['identical_answers']} of {found['answers']}",
                     "flags": "; ".join(found["flags"])})
    return pd.DataFrame(rows)
