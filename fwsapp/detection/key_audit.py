"""False positives under the deployer's key: human text detected under many keys.

A watermark's nominal false-positive rate holds over keys on average; a deployer runs one key, on its own traffic.
vLLM's documentation asks operators to measure the rate on representative unwatermarked text under the deployed key,
and warns that repetitive text (templates, lists, notes) inflates it unless repeated contexts are scored once. The audit
detects a corpus of human text (a run's references, or the hospital's own notes) under the deployed key and K − 1 keys
drawn from a seeded generator, with and without deduplication, and reports per key:
- the empirical FPR at p < 1 %, 0.1 % and 0.01 %, each with its exact (Clopper–Pearson) 95 % interval;
- a Kolmogorov–Smirnov test of the p-values against the uniform distribution they follow without a watermark, the
  p-values of a count (green tokens, SynthID's g-values) randomized at their ties, as a discrete statistic's p-values
  are uniform only so (`Evidence.randomized_p_value`);
- the worst key, and the Bonferroni threshold that holds each level over every configuration audited.

The p-value is the one the detection service answers with (`verdicts.nominal_p_value`): the detector's own (a green
count's exact binomial tail under 200 tokens, not the normal tail of its z; SynthID's the normal tail of its z), or the
normal tail of a z that is standard normal without the watermark. A method with neither has no false-positive rate to
audit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from fwsapp import p_text
from fwsapp.detection.calibration import achieved_fpr
from fwsapp.detection.deduplication import deduplicated, deduplication_problem
from fwsapp.detection.verdicts import nominal_p_value
from fwsapp.secret_keys import fingerprint
from fwsapp.watermark import methods

AUDIT_LEVELS = (0.01, 0.001, 0.0001)
WORST_BY = f"false_{AUDIT_LEVELS[0]:g}"  # the worst key: the most false positives at the first level
MAX_AUDIT_KEYS = 1000


def secret_param(info: methods.MethodInfo) -> str:
    names = info.secret_params
    if len(names) != 1:
        raise ValueError(f"{info.name} has {len(names)} keys: the audit varies one.")
    return names[0]


def audit_problem(method: str) -> str | None:
    """Why a method's keys cannot be audited, or None."""
    info = methods.info(method)
    if info.post_hoc:
        return f"{info.name} is a post-hoc detector with no key to audit."
    if not info.standard_score and info.evidence is None:
        return f"{info.name}'s score has no nominal p-value (neither a z nor a sum of per-token evidence) to audit."
    return None


def audit_keys_drawn(info: methods.MethodInfo, deployed: int, count: int, seed: int) -> list[int]:
    """The deployed key, then `count` − 1 others drawn within the key's range from a generator seeded with `seed`."""
    if not 1 <= count <= MAX_AUDIT_KEYS:
        raise ValueError(f"--audit-keys must be between 1 and {MAX_AUDIT_KEYS}, not {count}.")
    spec = info.param_specs[secret_param(info)]
    low, high = int(spec.low if spec.low is not None else 0), int(min(spec.high if spec.high is not None else 2**63,
                                                                       2**63 - 1))
    drawn = np.random.default_rng(seed).integers(low, high, size=count, endpoint=True).tolist()
    return [deployed, *[int(key) for key in drawn if key != deployed][:count - 1]]


def p_values(watermark, texts: Sequence[tuple[Sequence[int], Sequence[int]]], deduplicate: bool,
             rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each text's p-value under `watermark` (every repeated (context, token) pair scored once with `deduplicate`),
    and the p-values the test of uniformity reads: randomized at their ties where the statistic is a count."""
    info, params = watermark.info, watermark.params
    full = {**info.defaults, **params}
    found, uniform = [], []
    for (token_ids, context_ids), detection in zip(texts, watermark.detect_many(texts)):
        if deduplicate:
            detection = deduplicated(watermark, detection, token_ids, context_ids)
        if detection.num_tokens_scored == 0:
            continue
        found.append(nominal_p_value(info, detection))
        randomized = (info.evidence.randomized_p_value(info.evidence.arrays(detection, full), full, rng)
                      if info.evidence is not None and detection.token_flags else None)
        uniform.append(found[-1] if randomized is None else randomized)
    return np.asarray(found, dtype=float), np.asarray(uniform, dtype=float)


@dataclass(frozen=True)
class KeyAudit:
    method: str
    texts: int
    table: pd.DataFrame  # one row per key and deduplication setting
    bonferroni: dict[float, float]  # level -> per-configuration threshold over every configuration audited
    tokenizer: str | None = None  # the name of the tokenizer the texts were detected with
    # The smallest p-value the detector answers (EXP-edit's permutation test: 1 / (1 + n_runs)): no text, watermarked
    # or not, is called at a level at or below it, so a false-positive rate of 0 there says nothing.
    smallest_p: float = 0.0

    def written(self) -> pd.DataFrame:
        """The table as a reader sees it: per key and setting, each FPR with its exact 95 % interval, and the KS p."""
        shown = self.table[["key", "deduplication", "texts"]].copy()
        for level in AUDIT_LEVELS:
            shown[f"FPR@{level:g}"] = [written_rate(row, level, self.smallest_p)
                                       for row in self.table.to_dict("records")]
        shown["KS p"] = self.table.ks_p.map(lambda value: "–" if value is None else p_text(value))
        return shown

    @property
    def worst(self) -> pd.DataFrame:
        """Per deduplication setting, the row of the key with the most false positives at 1 % (the first of a tie)."""
        return self.table.loc[self.table.groupby("deduplication", sort=False)[WORST_BY].idxmax()].reset_index(drop=True)

    def summary(self) -> list[str]:
        """The worst key per setting and the Bonferroni thresholds, one sentence each. Keys as bad as the worst are
        named with it: the first of them alone read "Worst key: deployed" where every key called no text watermarked."""
        lines = []
        for row in self.worst.to_dict("records"):
            setting = self.table[self.table.deduplication == row["deduplication"]]
            tied = list(setting.key[setting[WORST_BY] == row[WORST_BY]])
            keys = (tied[0] if len(tied) == 1 else f"none worse than another (all {len(tied)} keys)"
                    if len(tied) == len(setting) else f"{', '.join(tied)} alike")
            lines.append(f"Worst key ({row['deduplication']}): {keys}, "
                         f"{written_rate(row, AUDIT_LEVELS[0], self.smallest_p)} at p < 1 %")
        lines.append(f"Bonferroni over the {len(self.table)} configurations audited: call a text watermarked at "
                     + ", ".join(f"p < {threshold:.3g} for {level:g}" for level, threshold in self.bonferroni.items()))
        if unreachable := [f"p < {threshold:.3g}" for threshold in [*AUDIT_LEVELS, *self.bonferroni.values()]
                           if threshold <= self.smallest_p]:
            lines.append(f"{self.method}'s detector answers no p-value below {p_text(self.smallest_p)}, so no text is "
                         f"called watermarked at {', '.join(dict.fromkeys(unreachable))}: those rates measure nothing "
                         "(a permutation test reaches them with more null keys).")
        return lines


def written_rate(row: dict, level: float, smallest_p: float) -> str:
    """An audited FPR and its exact interval, – where no text was scored, or why a level cannot be reached."""
    rate, interval = row[f"fpr_{level:g}"], row[f"fpr_{level:g}_interval"]
    if rate is None:
        return "–"
    if level <= smallest_p:
        return f"unreachable (p ≥ {p_text(smallest_p)})"
    return f"{rate:.2%} [{interval[0]:.2%}, {interval[1]:.2%}]"


def deduplication_settings(info: methods.MethodInfo, params: dict) -> list[tuple[str, dict, bool]]:
    """(label, parameters, generic deduplication) for each setting audited: without, then with where the method can."""
    if info.deduplication_param:
        choices = info.param_specs[info.deduplication_param].choices
        default = {**info.defaults, **params}[info.deduplication_param]
        return [(f"{info.deduplication_param}={choices[0]}", {**params, info.deduplication_param: choices[0]}, False),
                *([(f"{info.deduplication_param}={default}", params, False)] if default != choices[0] else [])]
    settings = [("each repeat scored", params, False)]
    if deduplication_problem(info.name) is None:
        settings.append(("each (context, token) pair once", params, True))
    return settings


def audit(method: str, params: dict, texts: Sequence[tuple[Sequence[int], Sequence[int]]], vocab_size: int,
          keys: int, seed: int = 0, lm=None, tokenizer=None) -> KeyAudit:
    """Detect `texts` (human token ids, with their context ids) under the deployed key of `params` and keys − 1 drawn
    ones, with and without deduplication."""
    from fwsapp.watermark.factory import create

    problem = audit_problem(method)
    if problem:
        raise ValueError(problem)
    if not texts:
        raise ValueError("The corpus has no text to audit: give a run with references, or a file of texts.")
    info = methods.info(method)
    key_name = secret_param(info)
    deployed = info.with_keys(info.checked_params(params))[key_name]
    rows = []
    rng = np.random.default_rng(seed)  # the randomized p-values' draws: the same audit gives the same KS p
    smallest_p = 0.0
    for setting, setting_params, generic in deduplication_settings(info, params):
        for index, key in enumerate(audit_keys_drawn(info, deployed, keys, seed)):
            watermark = create(info.name, vocab_size, {**setting_params, key_name: key}, lm=lm, tokenizer=tokenizer)
            values, uniform = p_values(watermark, texts, generic, rng)
            smallest_p = max(smallest_p, watermark.smallest_p_value())
            row = {"key": f"deployed ({fingerprint(key)})" if index == 0 else f"drawn #{index} (seed {seed})",
                   "deduplication": setting, "texts": int(values.size)}
            for level in AUDIT_LEVELS:
                achieved = achieved_fpr(values, level, "lower", info.threshold_inclusive)
                row[f"fpr_{level:g}"] = achieved.rate if achieved else None
                row[f"fpr_{level:g}_interval"] = achieved.interval if achieved else None
                row[f"false_{level:g}"] = achieved.false if achieved else 0
            test = stats.kstest(uniform, "uniform") if uniform.size else None
            row["ks_statistic"] = float(test.statistic) if test else None
            row["ks_p"] = float(test.pvalue) if test else None
            rows.append(row)
    table = pd.DataFrame(rows)
    return KeyAudit(info.name, len(texts), table, {level: level / len(table) for level in AUDIT_LEVELS},
                    getattr(tokenizer, "name", None), smallest_p)
