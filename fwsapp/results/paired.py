"""Two watermark methods compared text by text: paired differences with intervals, a permutation test and the minimum
detectable difference.

Comparing two runs' means hides how much of a difference is noise. Here the two methods answer the same prompts
under the same seed: two runs pair when they differ only in their method and its parameters (the same model, task,
dataset, prompts, new tokens, sampling and seed, and the same value of every parameter both methods have, such as
γ and the key), and their texts pair by prompt. Each difference is the candidate's watermarked texts against the
baseline's, at two settings:

- **equal δ**: both at the same value of their strength parameter (`MethodInfo.strength_param`), where it is the
  same parameter, for each value both ran on every seed they share;
- **equal strength**: each method at the value, of those run on every seed, whose TPR after T tokens at the FPR
  (`fwsapp.detection.strength`, averaged over its runs) is nearest the target. Each setting's TPRs are shown, so a
  reader sees how equal the strengths came out.

The measures, per text: disease mentions the reference does not support, those it supports, and mentions it does not
name (the entity analysis, one recognizer), the share of mentions unsupported (a ratio of sums), FWS (Auto) at the given
weights, and
for each attack run on both sides with the same parameters and seed, the share of the clean text's mentions the
attacked text keeps.

Texts from one prompt under several seeds are not independent, so the prompt is the unit of resampling: the
interval is a bootstrap over prompts (BCa, scipy), the p-value a permutation test that swaps the two methods within
each prompt, and the minimum detectable difference the one a two-sided test at 5 % finds with 80 % power given the
bootstrap's standard error: (z₀.₉₇₅ + z₀.₈) · SE = 2.80 · SE. The interval and the detectable difference need 10
prompts that carry the measure (`fwsapp.sample_size`; for a share, 10 with a mention on each side); the permutation
p-value, exact over every swap when the prompts are few, is given at any number.
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fwsapp import percent
from fwsapp.results.fws import DEFAULT_ALPHA, DEFAULT_BETA, check_weights, fws, metric_aspects
from fwsapp.quality.scoring import read_values
from fwsapp.sample_size import enough, not_enough
from fwsapp.watermark import methods

EQUAL_DELTA, EQUAL_STRENGTH = "equal δ", "equal strength"
ALL_TASKS = "all tasks"
# Measures whose value is a share of the mentions (a ratio of sums), not a mean per text.
UNSUPPORTED_SHARE = "unsupported share of mentions"
PER_TEXT = ("unsupported mentions per text", "supported mentions per text", "introduced mentions per text", "FWS (Auto)")
SURVIVAL = "entity survival"
CONFIDENCE, POWER = 0.95, 0.80
RESAMPLES = 9999
# Everything but the method decides which texts a run holds; batch size only groups the work, and the seed is what
# pairs two runs within a group.
NOT_PAIRED = ("method", "params", "batch_size", "seed")
SUM_COLUMNS = ["candidate_sum", "candidate_count", "baseline_sum", "baseline_count"]


@dataclass(frozen=True)
class Setting:
    """One comparison: the candidate's and the baseline's runs of a task that pair seed by seed, at one setting."""

    task: str
    setting: str
    candidate_value: float
    baseline_value: float
    candidate_tpr: float | None
    baseline_tpr: float | None
    pairs: tuple[tuple[str, str], ...]  # (candidate run, baseline run), one per seed

    def described(self, strength: str, baseline_strength: str) -> str:
        def side(value, tpr, name):
            return f"{name} {value:g}" + ("" if tpr is None else f" (TPR {tpr:.2f})")

        return (f"{side(self.candidate_value, self.candidate_tpr, strength)} against "
                f"{side(self.baseline_value, self.baseline_tpr, baseline_strength)}")


def comparable_methods(names) -> list[str]:
    """Of `names` (the stored runs' methods, say), the watermarks a paired comparison can set: those with a strength
    parameter, in the registry's order."""
    present = {methods.canonical_name(name) for name in names if name in methods.METHODS}
    return [entry.name for entry in methods.METHODS
            if entry.name in present and entry.strength_param and not entry.post_hoc]


def check_methods(candidate: str, baseline: str) -> tuple[methods.MethodInfo, methods.MethodInfo]:
    """Both methods' entries: registered watermarks with a strength parameter, and not the same one."""
    entries = []
    for name in (candidate, baseline):
        info = methods.info(name)  # an unknown name: the registry's own message
        if info.post_hoc or info.strength_param is None:
            raise ValueError(f"{info.name} has no strength parameter to set (it is post-hoc or has no δ): compare "
                             "watermarks that have one, such as " + ", ".join(
                                 entry.name for entry in methods.METHODS
                                 if entry.strength_param and not entry.post_hoc) + ".")
        entries.append(info)
    if entries[0].name == entries[1].name:
        raise ValueError(f"Compare {entries[0].name} with another method: both sides name it.")
    return entries[0], entries[1]


def text_params(first: methods.MethodInfo, second: methods.MethodInfo) -> set[str]:
    """The parameters both methods have that two paired runs must set alike (γ, the context width, the key): not a
    strength, which the settings vary, nor a detection threshold, which decides verdicts and not the texts."""
    return (set(first.params) & set(second.params)) - {first.strength_param, second.strength_param,
                                                         first.threshold_param, second.threshold_param}


def _pairing_key(run: dict, shared_params: set[str]) -> str:
    config = {key: value for key, value in run["config"].items() if key not in NOT_PAIRED}
    config.pop("dataset", None)  # the same file in another folder holds the same prompts: its digest decides
    shared = {key: value for key, value in run["params"].items() if key in shared_params}
    return json.dumps({**config, "shared": shared}, sort_keys=True, default=str)


def settings(store, candidate: str, baseline: str, target_tpr: float = 0.9, fpr: float = 0.01,
             tokens: int = 64) -> list[Setting]:
    """Every comparison the stored runs allow, per task: equal δ at each value both methods ran on the same seeds,
    and equal strength (when each method has a value run on every seed the two share)."""
    from fwsapp.detection.strength import check_target, sweep_tprs

    check_target(target_tpr, fpr, tokens)
    first, second = check_methods(candidate, baseline)
    shared_params = text_params(first, second)
    runs = store.runs()
    runs = runs[runs.method.isin([first.name, second.name]) & (runs.status == "done") & ~runs.imported]
    rows = []
    for run_id in runs.run_id:
        run = store.run(run_id)
        info = first if run["method"] == first.name else second
        if info.strength_param not in run["params"]:
            continue
        rows.append({"run_id": run_id, "side": "candidate" if info is first else "baseline", "task": run["task"],
                     "seed": run["seed"], "value": float(run["params"][info.strength_param]),
                     "key": _pairing_key(run, shared_params)})
    found = pd.DataFrame(rows, columns=["run_id", "side", "task", "seed", "value", "key"])
    if found.empty:
        return []
    tprs = sweep_tprs(store, fpr, tokens, list(found.run_id)).set_index("run_id").tpr
    found = found.assign(tpr=found.run_id.map(tprs))
    comparisons = []
    for _, group in found.groupby("key"):  # the key holds the task
        task = group.task.iloc[0]
        candidates, baselines = group[group.side == "candidate"], group[group.side == "baseline"]
        seeds = sorted(set(candidates.seed) & set(baselines.seed))
        if not seeds:
            continue
        everywhere = [_on_every_seed(side, seeds) for side in (candidates, baselines)]
        if first.strength_param == second.strength_param:
            for value in sorted(set(everywhere[0].value) & set(everywhere[1].value)):
                comparisons.append(_setting(task, EQUAL_DELTA, candidates, baselines, value, value))
        if all(not side.empty for side in everywhere):
            values = [_nearest(side, target_tpr) for side in everywhere]
            if None not in values:
                comparisons.append(_setting(task, EQUAL_STRENGTH, candidates, baselines, *values))
    return [comparison for comparison in comparisons if comparison.pairs]


def _on_every_seed(side: pd.DataFrame, seeds: list[int]) -> pd.DataFrame:
    """The side's runs at the values run on every one of the seeds."""
    counts = side[side.seed.isin(seeds)].groupby("value").seed.nunique()
    return side[side.value.isin(counts[counts == len(seeds)].index) & side.seed.isin(seeds)]


def _nearest(side: pd.DataFrame, target_tpr: float) -> float | None:
    means = side.dropna(subset=["tpr"]).groupby("value").tpr.mean()
    return None if means.empty else float((means - target_tpr).abs().idxmin())


def _setting(task: str, setting: str, candidates: pd.DataFrame, baselines: pd.DataFrame, candidate_value: float,
             baseline_value: float) -> Setting:
    chosen = [side[side.value == value] for side, value in ((candidates, candidate_value), (baselines, baseline_value))]
    by_seed = [dict(zip(side.seed, side.run_id)) for side in chosen]
    pairs = tuple((by_seed[0][seed], by_seed[1][seed]) for seed in sorted(set(by_seed[0]) & set(by_seed[1])))
    tprs = [side.tpr.mean() if side.tpr.notna().any() else None for side in chosen]
    return Setting(task, setting, candidate_value, baseline_value, *(None if tpr is None else float(tpr) for tpr in tprs),
                   pairs)


def text_measures(store, run_ids: list[str], recognizer: str | None = None, alpha: float = DEFAULT_ALPHA,
                  beta: float = DEFAULT_BETA, mapping: dict[str, str] | None = None) -> pd.DataFrame:
    """Long table (run_id, sample_idx, measure, value, count) of the runs' watermarked texts: per-text measures carry
    count 1; a share carries its numerator as value and its denominator as count (the mentions), so sums pool. FWS
    (Auto) reads the metrics by `mapping` (`fws.metric_aspects`; default: the registry's)."""
    from fwsapp.entities.introduced import one_recognizer, with_mesh_headings
    from fwsapp.entities.recognizers import recognizer_label
    from fwsapp.quality.registry import stored_columns

    frames = []
    entities, analyses = one_recognizer(store.entities(run_ids), store.entity_analyses(run_ids),
                                        recognizer_label(recognizer) if recognizer else recognizer_label())
    if not analyses.empty:
        mentions = with_mesh_headings(entities)
        mentions = mentions[mentions.text_kind == "watermarked"]
        counts = mentions.groupby(["run_id", "sample_idx"]).agg(
            mentions=("entity", "size"), introduced=("introduced", "sum"), unsupported=("hallucinated", "sum"))
        texts = analyses[["run_id", "sample_idx"]].drop_duplicates().set_index(["run_id", "sample_idx"])
        texts = texts.join(counts).fillna(0).reset_index()
        frames += [texts.assign(measure="unsupported mentions per text", value=texts.unsupported, count=1),
                   # Fewer unsupported names per text is a gain only if the supported ones stay.
                   texts.assign(measure="supported mentions per text", value=texts.mentions - texts.unsupported,
                                count=1),
                   texts.assign(measure="introduced mentions per text", value=texts.introduced, count=1),
                   texts.assign(measure=UNSUPPORTED_SHARE, value=texts.unsupported, count=texts.mentions)]
    runs = store.runs()
    metrics = read_values(store, run_ids)
    # The registered columns that count a clinical failure mode (the clinical facts), per text.
    failures = {column.name: column.label for _, column in stored_columns() if column.failure_mode}
    counted = metrics[(metrics.text_kind == "watermarked") & metrics.metric.isin(failures) & metrics.value.notna()]
    frames.append(counted.assign(measure=counted.metric.map(failures), count=1))
    aspects = metric_aspects(metrics, dict(zip(runs.run_id, runs.task)), mapping)
    aspects = aspects[aspects.kind == "watermarked"]
    if not aspects.empty:
        frames.append(aspects.assign(measure="FWS (Auto)", count=1,
                                     value=fws(aspects.coherence, aspects.relevance, aspects.factual_accuracy,
                                               alpha, beta)))
    # One attack set per run, attack and parameters (the lowest seed's, where a run was attacked with several).
    attacks = store.attack_sets(run_ids).sort_values("seed").drop_duplicates(["run_id", "attack", "params"])
    if not attacks.empty:
        from fwsapp.robustness.attacks import ATTACKS

        attacked = store.attacked_texts(list(attacks.attack_set_id)).dropna(subset=["mentions_clean"])
        attacked = attacked.merge(attacks[["attack_set_id", "attack", "params"]], on="attack_set_id")
        labels = {(attack, params): f"{SURVIVAL}, " + (ATTACKS[attack].label(json.loads(params)) if attack in ATTACKS
                                                       else f"{attack} {params}")
                  for attack, params in set(zip(attacked.attack, attacked.params))}
        frames.append(attacked.assign(measure=[labels[key] for key in zip(attacked.attack, attacked.params)],
                                      value=attacked.mentions_kept, count=attacked.mentions_clean))
    columns = ["run_id", "sample_idx", "measure", "value", "count"]
    found = [frame[columns] for frame in frames if not frame.empty]
    return pd.concat(found, ignore_index=True).astype({"value": float, "count": float}) if found else \
        pd.DataFrame(columns=columns)


def prompt_sums(store, candidate: str, baseline: str, target_tpr: float = 0.9, fpr: float = 0.01, tokens: int = 64,
                recognizer: str | None = None, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA,
                mapping: dict[str, str] | None = None) -> pd.DataFrame:
    """Per comparison (task and setting), measure and prompt: the sums and counts of each side's paired texts over the
    seeds. Texts pair only where both sides have the measure. All the analysis needs, and what a record keeps."""
    first, second = check_methods(candidate, baseline)
    found = settings(store, first.name, second.name, target_tpr, fpr, tokens)
    columns = ["task", "setting", "compared", "candidate_value", "baseline_value", "seeds", "measure", "prompt", "texts",
               *SUM_COLUMNS]
    if not found:
        return pd.DataFrame(columns=columns)
    run_ids = sorted({run_id for comparison in found for pair in comparison.pairs for run_id in pair})
    measured = text_measures(store, run_ids, recognizer, alpha, beta, mapping)
    frames = []
    for comparison in found:
        for candidate_run, baseline_run in comparison.pairs:
            sides = [measured[measured.run_id == run_id].drop(columns="run_id") for run_id in (candidate_run,
                                                                                               baseline_run)]
            both = sides[0].merge(sides[1], on=["sample_idx", "measure"], suffixes=("_candidate", "_baseline"))
            frames.append(both.assign(task=comparison.task, setting=comparison.setting, seeds=len(comparison.pairs),
                                      compared=comparison.described(first.strength_param, second.strength_param),
                                      candidate_value=comparison.candidate_value,
                                      baseline_value=comparison.baseline_value))
    paired = pd.concat(frames, ignore_index=True)
    if paired.empty:
        return pd.DataFrame(columns=columns)
    sums = paired.groupby(["task", "setting", "compared", "candidate_value", "baseline_value", "seeds", "measure",
                           "sample_idx"], as_index=False).agg(
        texts=("value_candidate", "size"), candidate_sum=("value_candidate", "sum"),
        candidate_count=("count_candidate", "sum"), baseline_sum=("value_baseline", "sum"),
        baseline_count=("count_baseline", "sum"))
    return sums.rename(columns={"sample_idx": "prompt"})[columns]


def _ratio_difference(candidate_sum, candidate_count, baseline_sum, baseline_count, axis=-1):
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.sum(candidate_sum, axis=axis) / np.sum(candidate_count, axis=axis)
                - np.sum(baseline_sum, axis=axis) / np.sum(baseline_count, axis=axis))


def paired_difference(sums: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """One measure's difference (candidate − baseline) over the prompts of `sums` (rows of `prompt_sums`): each side's
    pooled value, the difference, the permutation p-value, and, from `n` prompts up (the small-sample rule), its
    bootstrap interval over prompts and the minimum detectable difference. `n` counts the prompts that carry the
    measure: all of them for a mean per text; for a share, those with a mention, on the side with fewer (a share of
    four prompts of which one names a disease rests on that one prompt)."""
    from scipy import stats

    columns = [sums[column].to_numpy(float) for column in SUM_COLUMNS]
    with np.errstate(invalid="ignore", divide="ignore"):  # no mention on a side: its share is NaN, shown as such
        candidate, baseline = columns[0].sum() / columns[1].sum(), columns[2].sum() / columns[3].sum()
    found = {"prompts": len(sums), "texts": int(sums.texts.sum()), "candidate": candidate, "baseline": baseline,
             "difference": candidate - baseline, "n": int(min((columns[1] > 0).sum(), (columns[3] > 0).sum())),
             "low": np.nan, "high": np.nan, "p": np.nan, "detectable": np.nan}
    if len(sums) < 2 or not (columns[1].sum() and columns[3].sum()):
        return found
    rng = np.random.default_rng(seed)
    interval = None
    if enough("bootstrap", found["n"]):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a degenerate resample (all differences equal) gives NaN, reported as such
            interval = stats.bootstrap(columns, _ratio_difference, paired=True, vectorized=True, n_resamples=resamples,
                                       confidence_level=CONFIDENCE, method="BCa", random_state=rng)
    # Swapping the methods within a prompt swaps its sum and count together, so each side is a row of `sides`: the
    # candidate's (sum, count) of prompt i at row i, the baseline's at row n + i.
    sides = np.concatenate([np.stack(columns[:2], axis=-1), np.stack(columns[2:], axis=-1)])
    prompts = np.arange(len(sums))

    def statistic(first, second, axis=-1):
        return _ratio_difference(sides[first, 0], sides[first, 1], sides[second, 0], sides[second, 1], axis)

    test = stats.permutation_test((prompts, prompts + len(sums)), statistic, permutation_type="samples",
                                  vectorized=True, n_resamples=resamples, random_state=rng)
    found["p"] = float(test.pvalue)  # exact over every swap at a few prompts: valid at any n
    if interval is None:
        return found
    low, high = interval.confidence_interval
    spread = interval.bootstrap_distribution
    if np.isnan(low) or np.isnan(high):  # a resample without a mention on one side: the percentiles of the others
        tail = 100 * (1 - CONFIDENCE) / 2
        low, high = np.nanpercentile(spread, [tail, 100 - tail]) if np.isfinite(spread).any() else (np.nan, np.nan)
    critical = stats.norm.ppf(1 - (1 - CONFIDENCE) / 2) + stats.norm.ppf(POWER)
    found.update(low=float(low), high=float(high), detectable=float(critical * np.nanstd(spread, ddof=1)))
    return found


def difference_table(sums: pd.DataFrame, resamples: int = RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """One row per task (and all tasks pooled, their prompts kept apart), setting and measure. Equal δ pools each
    value over the tasks; equal strength pools each task's own setting."""
    columns = ["task", "setting", "compared", "seeds", "measure", "prompts", "texts", "candidate", "baseline",
               "difference", "n", "low", "high", "p", "detectable"]
    if sums.empty:
        return pd.DataFrame(columns=columns)
    equal = sums.setting == EQUAL_DELTA
    pooled = sums.assign(prompt=sums.task + ":" + sums.prompt.astype(str), task=ALL_TASKS,
                         compared=np.where(equal, "at " + sums.candidate_value.map("{:g}".format) + " on each task",
                                           "each task's setting, as above"))
    # A prompt is one unit however many comparisons of its task reach it.
    pooled = pooled.groupby(["task", "setting", "compared", "measure", "prompt"], as_index=False).agg(
        seeds=("seeds", "max"), **{column: (column, "sum") for column in ["texts", *SUM_COLUMNS]})
    rows = []
    for frame in (sums, pooled) if sums.task.nunique() > 1 else (sums,):
        for (task, setting, compared, measure), group in frame.groupby(["task", "setting", "compared", "measure"],
                                                                       sort=False):
            rows.append({"task": task, "setting": setting, "compared": compared, "seeds": int(group.seeds.max()),
                         "measure": measure, **paired_difference(group, resamples, seed)})
    table = pd.DataFrame(rows, columns=columns)
    measures = (*PER_TEXT[:3], UNSUPPORTED_SHARE, PER_TEXT[3])
    order = table.assign(pooled=table.task == ALL_TASKS,
                         rank=table.measure.map(lambda measure: measures.index(measure) if measure in measures
                                                else len(measures)))
    return table.loc[order.sort_values(["setting", "pooled", "task", "compared", "rank", "measure"]).index].reset_index(drop=True)


def comparison_table(store, candidate: str, baseline: str, target_tpr: float = 0.9, fpr: float = 0.01,
                     tokens: int = 64, recognizer: str | None = None, alpha: float = DEFAULT_ALPHA,
                     beta: float = DEFAULT_BETA, mapping: dict[str, str] | None = None,
                     resamples: int = RESAMPLES) -> pd.DataFrame:
    """`difference_table` of the stored runs: what the CLI and the FWS page show."""
    check_weights(alpha, beta)
    return difference_table(prompt_sums(store, candidate, baseline, target_tpr, fpr, tokens, recognizer, alpha, beta,
                                        mapping), resamples)


def unpaired_reason(store, candidate: str, baseline: str, target_tpr: float = 0.9, fpr: float = 0.01,
                    tokens: int = 64) -> str:
    """Why no text of the two methods pairs, naming what fails and what computes what is missing: runs of a side
    missing, the settings the closest two runs differ in, or the measures the pairing runs lack."""
    first, second = check_methods(candidate, baseline)
    stored = store.runs()
    runs = stored[(stored.status == "done") & ~stored.imported]
    sides = [[store.run(run_id) for run_id in runs[runs.method == info.name].run_id] for info in (first, second)]
    for info, side in zip((first, second), sides):
        if not side:
            imported = bool((stored.imported & (stored.method == info.name)).any())
            return (f"No finished generated run of {info.name}"
                    + (": its imported runs do not pair (they record no seed)" if imported else "")
                    + ". Generate one on the same prompts as the other method's.")
    found = settings(store, first.name, second.name, target_tpr, fpr, tokens)
    if found:
        paired = sorted({run_id for comparison in found for pair in comparison.pairs for run_id in pair})
        shown = " ".join(f"--run {run_id}" for run_id in paired)
        return (f"Runs {', '.join(paired)} pair, but their watermarked texts have no measure yet: compute the quality "
                f"metrics (`python -m fwsapp score {shown}`, or Compute on the Quality page) and the disease mentions "
                f"(`python -m fwsapp analyze {shown}`, or Analyze on the Entities page).")
    shared = text_params(first, second)

    def differences(one: dict, other: dict) -> list[str]:
        keys = [(one["config"], other["config"], key) for key in set(one["config"]) | set(other["config"])
                if key not in NOT_PAIRED and key != "dataset"]
        differ = [key for mine, theirs, key in keys if mine.get(key) != theirs.get(key)]
        differ += [f"{key} (shared parameter)" for key in shared if one["params"].get(key) != other["params"].get(key)]
        return sorted(differ) + (["seed"] if one["seed"] != other["seed"] else [])

    one, other, differ = min(((one, other, differences(one, other)) for one in sides[0] for other in sides[1]),
                             key=lambda found: len(found[2]))
    values = [run["params"].get(info.strength_param) for run, info in ((one, first), (other, second))]
    if None in values:
        return "The runs record no strength parameter: generate them with it set (δ, say)."
    if differ:
        return (f"No runs of {first.name} and {second.name} pair: they need the same model, task, dataset, prompts, "
                f"new tokens, sampling and seed, and the parameters both methods have set alike. The closest two, "
                f"{one['run_id']} and {other['run_id']}, differ in {', '.join(differ)}.")
    # The two runs pair, so neither setting found a value on both sides: say what each lacks.
    if first.strength_param != second.strength_param:
        no_delta = (f"equal δ needs one strength parameter, and {first.name}'s is {first.strength_param}, "
                    f"{second.name}'s {second.strength_param}")
    else:
        no_delta = (f"equal δ needs one {first.strength_param} on every seed both ran, and these ran at "
                    f"{float(values[0]):g} and {float(values[1]):g}")
    from fwsapp.detection.strength import reached_tokens, sweep_tprs, tpr_advice

    tprs = sweep_tprs(store, fpr, tokens, [one["run_id"], other["run_id"]]).set_index("run_id")
    lacking = [f"{run['run_id']}: {tprs.basis[run['run_id']]}" if run["run_id"] in tprs.index else
               f"{run['run_id']} has no scores by length (`python -m fwsapp detect --run {run['run_id']} --by-length`)"
               for run in (one, other) if run["run_id"] not in tprs.index or pd.isna(tprs.tpr[run["run_id"]])]
    return (f"Runs {one['run_id']} ({first.name}) and {other['run_id']} ({second.name}) pair, but neither setting "
            f"compares them: {no_delta}; equal strength needs each one's TPR after {tokens} tokens at "
            f"{percent(fpr)} FPR ({'; '.join(lacking)}). "
            f"{tpr_advice(reached_tokens(store, [one['run_id'], other['run_id']]), tokens)}").strip()


def no_equal_strength(store, candidate: str, baseline: str, tokens: int) -> str:
    """Why a table has equal δ rows only, and what gives it the other setting (read from the two methods' runs)."""
    from fwsapp.detection.strength import reached_tokens, tpr_advice

    names = {methods.info(name).name for name in (candidate, baseline)}
    runs = store.runs()
    reached = reached_tokens(store, runs.run_id[runs.method.isin(names)].tolist())
    return (f"No equal-strength comparison: no run has a TPR after {tokens} tokens on every seed of both methods. "
            f"{tpr_advice(reached, tokens)}").strip()


def is_share(measure: str) -> bool:
    """Whether a measure is a share of mentions, so that two methods' values differ by at most 1."""
    return measure == UNSUPPORTED_SHARE or measure.startswith(SURVIVAL)


def written(table: pd.DataFrame) -> pd.DataFrame:
    """The table as read: each value to three significant digits, the interval as one cell ("not enough data (n = …)"
    below the small-sample rule), p in words where tiny, and a share's detectable difference above 1 (too few prompts:
    no difference two shares can have) said so."""
    def number(value) -> str:
        return "–" if pd.isna(value) else f"{value:.3g}"

    def detectable(value, measure: str) -> str:
        return f"none ({number(value)} > 1)" if is_share(measure) and value > 1 else number(value)

    return pd.DataFrame({  # what a reader looks for first: the measure, the difference and its interval
        "task": table.task, "setting": table.setting, "measure": table.measure,
        "difference": table.difference.map(number),
        "95% interval": [f"{number(low)} to {number(high)}" if enough("bootstrap", n) else not_enough(n)
                         for low, high, n in zip(table.low, table.high, table.n)],
        "p (permutation)": table.p.map(lambda p: "–" if pd.isna(p) else f"{p:.2g}"),
        "detectable (80% power)": [detectable(value, measure) for value, measure in zip(table.detectable, table.measure)],
        "candidate": table.candidate.map(number), "baseline": table.baseline.map(number),
        "compared": table.compared, "seeds": table.seeds, "prompts": table.prompts, "texts": table.texts})
