"""Per-sample judge scores (both orders averaged when judged twice) and the report's judge block."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fwsapp.fws import DEFAULT_ALPHA, DEFAULT_BETA, fws_from_likert
from fwsapp.judge.parser import ASPECTS


def per_sample_scores(judgments: pd.DataFrame) -> pd.DataFrame:
    """One row per sample: mean of its parsed verdicts, columns `{aspect}_{kind}` on the 1-5 scale."""
    ok = judgments[judgments.status == "ok"]
    if ok.empty:
        return pd.DataFrame(columns=["run_id", "sample_idx", "orders"])
    frame = ok[["run_id", "sample_idx"]].reset_index(drop=True)
    for kind in ("watermarked", "unwatermarked"):
        scores = np.stack(ok[f"scores_{kind}"].map(np.asarray).to_list())
        for position, aspect in enumerate(ASPECTS):
            frame[f"{aspect}_{kind}"] = scores[:, position]
    grouped = frame.groupby(["run_id", "sample_idx"], as_index=False)
    return grouped.mean().merge(grouped.size().rename(columns={"size": "orders"}), on=["run_id", "sample_idx"])


def judge_block(judgments: pd.DataFrame, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> dict | None:
    """The report's judge block for one run; None when the run has no verdicts."""
    if judgments.empty:
        return None
    samples = per_sample_scores(judgments)
    judged = set(samples.sample_idx) if not samples.empty else set()
    failed = set(judgments.sample_idx) - judged
    block = {"n_judged": len(judged), "n_failed": len(failed), "position_consistency": position_consistency(judgments)}
    if samples.empty:
        return {**block, **{aspect: None for aspect in ASPECTS}, "drop_pct": None, "fws": None}
    for aspect in ASPECTS:
        block[aspect] = {kind: float(samples[f"{aspect}_{kind}"].mean()) for kind in ("watermarked", "unwatermarked")}
    block["drop_pct"] = {
        aspect: drop_pct(block[aspect]["unwatermarked"], block[aspect]["watermarked"]) for aspect in ASPECTS
    }
    block["fws"] = {
        kind: float(fws_from_likert(samples[[f"{aspect}_{kind}" for aspect in ASPECTS]].to_numpy(), alpha, beta).mean())
        for kind in ("watermarked", "unwatermarked")
    }
    return block


def _winner(row) -> str:
    watermarked, unwatermarked = sum(row.scores_watermarked), sum(row.scores_unwatermarked)
    return "tie" if watermarked == unwatermarked else ("watermarked" if watermarked > unwatermarked else "unwatermarked")


def position_consistency(judgments: pd.DataFrame) -> float | None:
    """Share of samples judged in both orders whose winner is the same both times (as FastChat's llm_judge)."""
    ok = judgments[judgments.status == "ok"]
    both = ok.groupby(["run_id", "sample_idx", "judge_model"]).filter(lambda group: group.watermarked_first.nunique() == 2)
    if both.empty:
        return None
    agreements = [
        group.apply(_winner, axis=1).nunique() == 1 for _, group in both.groupby(["run_id", "sample_idx", "judge_model"])
    ]
    return float(sum(agreements) / len(agreements))


def drop_pct(unwatermarked: float, watermarked: float) -> float | None:
    """(unwatermarked − watermarked) / unwatermarked × 100."""
    return None if not unwatermarked else (unwatermarked - watermarked) / unwatermarked * 100


def aspect_means(judgments: pd.DataFrame) -> pd.DataFrame:
    """Long table for the paper's Figure 2: mean score per method × task × aspect × text kind, with drop %."""
    samples = per_sample_scores(judgments)
    if samples.empty:
        return pd.DataFrame(columns=["method", "task", "aspect", "kind", "mean", "drop_pct"])
    runs = judgments.drop_duplicates("run_id").set_index("run_id")[["method", "task", "model"]]
    samples = samples.join(runs, on="run_id")
    rows = []
    for (method, task), group in samples.groupby(["method", "task"]):
        for aspect in ASPECTS:
            means = {kind: group[f"{aspect}_{kind}"].mean() for kind in ("watermarked", "unwatermarked")}
            for kind, mean in means.items():
                rows.append({"method": method, "task": task, "aspect": aspect, "kind": kind, "mean": mean,
                             "drop_pct": drop_pct(means["unwatermarked"], means["watermarked"])})
    return pd.DataFrame(rows)
