"""Per-sample judge scores (both orders averaged when judged twice), their means and drops, and the
report's judge block. Nothing here depends on the FWS weights: fws.py applies α and β to these means."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fwsapp import share_text
from fwsapp.quality.registry import ASPECTS
from fwsapp.models import EMBEDDED_MODEL

KINDS = ("watermarked", "unwatermarked")
# Judges whose verdicts test the plumbing, not the texts: the embedded 135M model forced into the verdict format.
SMOKE_TEST_JUDGES = frozenset({EMBEDDED_MODEL})
# A judge that scores A and B alike on at least this share of pairs is not telling them apart.
SAME_SCORES_SHARE = 0.9


def is_smoke_test(judge_model: str) -> bool:
    return judge_model in SMOKE_TEST_JUDGES


def judge_name(judge_model: str) -> str:
    """A judge as every figure names it: its model, and '(smoke test)' where it is one."""
    return f"{judge_model} (smoke test)" if is_smoke_test(judge_model) else judge_model


def smoke_test_judges(judgments: pd.DataFrame) -> list[str]:
    """The smoke-test judges among these verdicts' judges, by name."""
    return sorted(model for model in set(judgments.judge_model) if is_smoke_test(model)) if not judgments.empty else []


def counted_judges(judgments: pd.DataFrame, include_smoke_tests: bool = False) -> list[str]:
    """The judges whose verdicts a figure may count, the default first: a real judge before a smoke test (counted only
    when asked for), then the judge with the most parsed verdicts, then by name."""
    if judgments.empty:
        return []
    parsed = judgments.judge_model[judgments.status == "ok"].value_counts()
    return sorted((model for model in set(judgments.judge_model) if include_smoke_tests or not is_smoke_test(model)),
                  key=lambda model: (is_smoke_test(model), -int(parsed.get(model, 0)), model))


def counted_judgments(judgments: pd.DataFrame, include_smoke_tests: bool = False, judge: str | None = None) -> pd.DataFrame:
    """The verdicts that FWS, rankings and the report count: one judge's, `judge` or else the default
    (`counted_judges`' first); a smoke-test judge's only when asked for or named. Judges' scales differ, so no figure
    pools two: the mean of a strict judge's and a lenient one's scores, over whichever samples each judged, is
    neither's. A run that only another judge judged has no judge figure under this one."""
    if judge is None:
        judges = counted_judges(judgments, include_smoke_tests)
        if not judges:
            return judgments.iloc[0:0]
        judge = judges[0]
    elif judgments.empty or judge not in set(judgments.judge_model):
        named = counted_judges(judgments, include_smoke_tests=True)
        raise ValueError(f"No verdicts by the judge {judge!r}; "
                         + (f"the judges are {', '.join(named)}." if named else "nothing here is judged yet."))
    return judgments[judgments.judge_model == judge]


def judges_label(judgments: pd.DataFrame) -> str:
    """'gpt-4o', or several joined: the judges a figure's verdicts come from ('no verdicts yet' when none); a judge
    whose every answer failed to parse, or that was never reached, gave none."""
    models = sorted(set(judgments.judge_model[judgments.status == "ok"])) if not judgments.empty else []
    return ", ".join(map(judge_name, models)) or "no verdicts yet"


def same_scores(judgments: pd.DataFrame) -> pd.DataFrame:
    """Per judge: parsed verdicts, and the share giving A and B identical scores on all three aspects. A share of
    `SAME_SCORES_SHARE` or more means the judge does not tell the texts apart."""
    ok = judgments[judgments.status == "ok"] if not judgments.empty else judgments
    if ok.empty:
        return pd.DataFrame(columns=["judge_model", "verdicts", "same_share"])
    same = [list(a) == list(b) for a, b in zip(ok.scores_watermarked, ok.scores_unwatermarked)]
    return (ok.assign(same=same).groupby("judge_model", as_index=False)
            .agg(verdicts=("same", "size"), same_share=("same", "mean")))


def indiscriminate_judges(judgments: pd.DataFrame) -> list[str]:
    """Sentences for the judges that gave A and B the same scores on (nearly) every pair, for the page to show."""
    table = same_scores(judgments)
    return [f"{judge_name(row.judge_model)} gave both texts the same scores on {share_text(row.same_share)} of its "
            f"{row.verdicts} verdicts: it does not tell them apart, so its drops and FWS say nothing about the watermark."
            for row in table.itertuples() if row.same_share >= SAME_SCORES_SHARE]


def per_sample_scores(judgments: pd.DataFrame, by: tuple[str, ...] = ("run_id", "sample_idx")) -> pd.DataFrame:
    """One row per sample (or per `by`, e.g. sample and judge model): mean of its parsed verdicts, columns
    `{aspect}_{kind}` on the 1-5 scale."""
    by = list(by)
    ok = judgments[judgments.status == "ok"]
    if ok.empty:
        return pd.DataFrame(columns=[*by, "orders"])
    frame = ok[by].reset_index(drop=True)
    for kind in KINDS:
        scores = np.stack(ok[f"scores_{kind}"].map(np.asarray).to_list())
        for position, aspect in enumerate(ASPECTS):
            frame[f"{aspect}_{kind}"] = scores[:, position]
    grouped = frame.groupby(by, as_index=False)
    return grouped.mean().merge(grouped.size().rename(columns={"size": "orders"}), on=by)


def drop_pct(unwatermarked, watermarked):
    """(unwatermarked − watermarked) / unwatermarked × 100; None (NaN for arrays) where unwatermarked is 0."""
    if np.ndim(unwatermarked) == 0:
        return None if not unwatermarked else float((unwatermarked - watermarked) / unwatermarked * 100)
    unwatermarked = pd.Series(unwatermarked, dtype=float)
    return (unwatermarked - watermarked) / unwatermarked.where(unwatermarked != 0) * 100


def mean_scores(samples: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean of each `{aspect}_{kind}` column per group, with `{aspect}_drop` (drop %) and the sample count."""
    columns = [f"{aspect}_{kind}" for aspect in ASPECTS for kind in KINDS]
    grouped = samples.groupby(by, as_index=False)
    means = grouped[columns].mean().merge(grouped.size().rename(columns={"size": "samples"}), on=by)
    for aspect in ASPECTS:
        means[f"{aspect}_drop"] = drop_pct(means[f"{aspect}_unwatermarked"], means[f"{aspect}_watermarked"]).to_numpy()
    return means


def judge_block(judgments: pd.DataFrame) -> dict | None:
    """The report's judge block for one run (weights not applied); None when the run has no verdicts."""
    if judgments.empty:
        return None
    samples = per_sample_scores(judgments)
    judged = set(samples.sample_idx) if not samples.empty else set()
    # Failed: a verdict came back and did not parse. Unreachable: none came back (asked again on the next run).
    failed = set(judgments.sample_idx[judgments.status == "failed"]) - judged
    unreachable = set(judgments.sample_idx[judgments.status == "unreachable"]) - judged - failed
    block = {"n_judged": len(judged), "n_failed": len(failed), "n_unreachable": len(unreachable),
             "judge_models": sorted(set(judgments.judge_model)),
             "position_consistency": position_consistency(judgments)}
    if samples.empty:
        return {**block, **{aspect: None for aspect in ASPECTS}, "drop_pct": None}
    means = mean_scores(samples.assign(all=0), ["all"]).iloc[0]
    for aspect in ASPECTS:
        block[aspect] = {kind: float(means[f"{aspect}_{kind}"]) for kind in KINDS}
    block["drop_pct"] = {aspect: _number(means[f"{aspect}_drop"]) for aspect in ASPECTS}
    return block


def _number(value) -> float | None:
    return None if pd.isna(value) else float(value)


def position_consistency(judgments: pd.DataFrame) -> float | None:
    """Share of samples judged in both orders whose winner is the same both times (as FastChat's llm_judge)."""
    ok = judgments[judgments.status == "ok"]
    if ok.empty:
        return None
    keys = ["run_id", "sample_idx", "judge_model"]
    margin = np.stack(ok.scores_watermarked.map(np.asarray).to_list()).sum(1) - np.stack(
        ok.scores_unwatermarked.map(np.asarray).to_list()).sum(1)
    winners = ok[keys + ["watermarked_first"]].assign(winner=np.sign(margin))
    per_sample = winners.groupby(keys).agg(orders=("watermarked_first", "nunique"), winners=("winner", "nunique"))
    both = per_sample[per_sample.orders == 2]
    return None if both.empty else float((both.winners == 1).mean())


def aspect_means(judgments: pd.DataFrame, settings: pd.Series) -> pd.DataFrame:
    """Long table for the paper's Figure 2: mean score per run (model, method, settings), task, judge, aspect and text
    kind, with drop %. `settings` is `run_names.run_settings`, indexed by run id.

    Different runs and different judges are never pooled: `label` names the model, method and settings, and
    the judge where the verdicts come from more than one."""
    samples = per_sample_scores(judgments, by=("run_id", "sample_idx", "judge_model"))
    if samples.empty:
        return pd.DataFrame(columns=["label", "model", "method", "settings", "task", "judge_model", "aspect", "kind",
                                     "mean", "drop_pct"])
    by = ["model", "method", "settings", "task", "judge_model"]
    runs = judgments.drop_duplicates("run_id").set_index("run_id")[["model", "method", "task"]]
    runs = runs.assign(settings=runs.index.map(settings))
    means = mean_scores(samples.join(runs, on="run_id"), by)
    several_judges = means.judge_model.nunique() > 1
    rows = [{"label": f"{row.model} · {row.method} · {row.settings}" + (
                f" · judge {judge_name(row.judge_model)}" if several_judges or is_smoke_test(row.judge_model) else ""),
             **{column: getattr(row, column) for column in by}, "aspect": aspect, "kind": kind,
             "mean": getattr(row, f"{aspect}_{kind}"), "drop_pct": getattr(row, f"{aspect}_drop")}
            for row in means.itertuples() for aspect in ASPECTS for kind in KINDS]
    return pd.DataFrame(rows)

