"""How clinicians agree with the judge, the metrics and one another (the paper's Tables 5 and 6): Pearson r of the
mean human rating against each source, the preset weightings' sensitivity, Friedman with Nemenyi across aspects, and
Krippendorff's alpha, each under the small-sample rule (`fwsapp.sample_size`)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fwsapp import p_text
from fwsapp.quality.registry import ASPECT_LABELS, column_label
from fwsapp.results.fws import ASPECTS, PRESETS, fws
from fwsapp.sample_size import enough, not_enough, shown

UNIT = ["run_id", "sample_idx", "kind"]
AUTO_SOURCE = "Auto-FWS mapping"  # the metrics Auto-FWS maps to the aspects, as one source


def human_means(rated: pd.DataFrame) -> pd.DataFrame:
    """Mean human rating per text (run, sample, kind), aspects scaled to [0, 1]."""
    if rated.empty:
        return pd.DataFrame(columns=UNIT + list(ASPECTS) + ["raters"])
    means = rated.groupby(UNIT, as_index=False)[list(ASPECTS)].mean()
    means[list(ASPECTS)] = means[list(ASPECTS)] / 5.0
    return means.merge(rated.groupby(UNIT, as_index=False).size().rename(columns={"size": "raters"}), on=UNIT)


def _pearson(x, y) -> tuple[float | None, float | None, int]:
    from scipy.stats import pearsonr

    pairs = pd.DataFrame({"x": x, "y": y}).dropna()
    if not enough("pearson", len(pairs)) or pairs.x.nunique() < 2 or pairs.y.nunique() < 2:
        return None, None, len(pairs)
    result = pearsonr(pairs.x, pairs.y)
    return float(result.statistic), float(result.pvalue), len(pairs)


def correlation_table(humans: pd.DataFrame, judge: pd.DataFrame, auto: pd.DataFrame, metrics: pd.DataFrame,
                      alpha: float, beta: float, judge_label: str = "judge") -> pd.DataFrame:
    """Pearson r (with p and n) of the mean human rating against the judge (named `judge_label`: its model, not
    'GPT' of another) and each automatic metric, per aspect and for FWS (the paper's Table 6). Long format: aspect,
    source, r, p, n."""
    h = humans.assign(fws=fws(humans.coherence, humans.relevance, humans.factual_accuracy, alpha, beta))
    j = judge.assign(fws=fws(judge.coherence, judge.relevance, judge.factual_accuracy, alpha, beta))
    a = auto.assign(fws=fws(auto.coherence, auto.relevance, auto.factual_accuracy, alpha, beta))
    raw = metrics.rename(columns={"text_kind": "kind"}).pivot_table(index=UNIT, columns="metric", values="value").reset_index()
    rows = []
    for aspect in (*ASPECTS, "fws"):
        sources = {judge_label: j[UNIT + [aspect]], AUTO_SOURCE: a[UNIT + [aspect]]}
        for metric in [column for column in raw.columns if column not in UNIT]:
            sources[metric] = raw[UNIT + [metric]].rename(columns={metric: aspect})
        for source, values in sources.items():
            joined = h[UNIT + [aspect]].merge(values, on=UNIT, suffixes=("_human", "_source"))
            r, p, n = _pearson(joined[f"{aspect}_human"], joined[f"{aspect}_source"])
            rows.append({"aspect": aspect, "source": source, "r": r, "p": p, "n": n})
    return pd.DataFrame(rows)


def named(correlations: pd.DataFrame) -> pd.DataFrame:
    """`correlation_table` as tables name its aspects and sources ("Factual accuracy", "ROUGE-L"; the judge and the
    Auto-FWS mapping as they came), in its order: the judge, the mapping, then each metric."""
    return correlations.assign(aspect=correlations.aspect.map(ASPECT_LABELS),
                               source=correlations.source.map(column_label)).rename(
        columns={"aspect": "Aspect", "source": "Source"})


def correlation_matrix(correlations: pd.DataFrame) -> pd.DataFrame:
    """r per aspect (rows, FWS last) and source (columns, `named`'s order) as shown: "not enough data (n = …)" below
    the minimum."""
    values = [shown(r, "pearson", n) for r, n in zip(correlations.r, correlations.n)]
    table = named(correlations.assign(r=values))
    # infer_objects: a source whose every r is a number is a column of numbers (pivoting a column of numbers and words
    # left them objects, which a table wrote 0.48 beside 0.443)
    return table.pivot(index="Aspect", columns="Source", values="r").reindex(
        index=table.Aspect.unique(), columns=table.Source.unique()).rename_axis(index="Aspect", columns=None).infer_objects()


def sensitivity_table(humans: pd.DataFrame, judge: pd.DataFrame, auto: pd.DataFrame,
                      judge_label: str = "judge") -> pd.DataFrame:
    """Each preset weighting's FWS-to-human Pearson r, for the judge (named `judge_label`, as `correlation_table`
    names it: the paper's GPTJ) and for the Auto-FWS mapping (the paper's Table 5)."""
    rows = []
    for name, (alpha, beta) in PRESETS.items():
        h = humans.assign(fws=fws(humans.coherence, humans.relevance, humans.factual_accuracy, alpha, beta))
        row = {"Weighting": name, "α": alpha, "β": beta}
        for label, source in ((judge_label, judge), (AUTO_SOURCE, auto)):
            s = source.assign(fws=fws(source.coherence, source.relevance, source.factual_accuracy, alpha, beta))
            joined = h[UNIT + ["fws"]].merge(s[UNIT + ["fws"]], on=UNIT, suffixes=("_human", "_source"))
            r, p, n = _pearson(joined.fws_human, joined.fws_source)
            # p in significant digits: rounded to four decimals, a strong correlation's p read 0.
            row[f"r {label}"], row[f"p {label}"], row[f"n {label}"] = shown(r, "pearson", n), (
                not_enough(n) if not enough("pearson", n) else "–" if p is None else p_text(p)), n
        rows.append(row)
    return pd.DataFrame(rows)


def friedman_nemenyi(rated: pd.DataFrame) -> tuple[float | None, float | None, pd.DataFrame | None]:
    """Friedman test across the three aspects' human ratings (blocks: each rating of each text), and the
    Nemenyi post-hoc p-values between aspects (scikit-posthocs)."""
    import scikit_posthocs as posthocs
    from scipy.stats import friedmanchisquare

    data = rated[list(ASPECTS)].dropna().to_numpy(dtype=float)
    if not enough("friedman", len(data)):
        return None, None, None
    statistic, p_value = friedmanchisquare(*data.T)
    nemenyi = posthocs.posthoc_nemenyi_friedman(data)
    nemenyi.index = nemenyi.columns = [ASPECT_LABELS[aspect] for aspect in ASPECTS]
    return float(statistic), float(p_value), nemenyi


def doubly_rated(rated: pd.DataFrame) -> int:
    """Texts rated by two raters or more: the n of Krippendorff's alpha."""
    return int((rated.groupby(UNIT).rater.nunique() >= 2).sum()) if not rated.empty else 0


def krippendorff_alpha(rated: pd.DataFrame) -> dict[str, float | None]:
    """Inter-rater agreement per aspect: Krippendorff's alpha, ordinal, over texts rated by 2+ raters (None below
    sample_size's minimum of such texts)."""
    import krippendorff

    result = {}
    for aspect in ASPECTS:
        matrix = rated.pivot_table(index="rater", columns=UNIT, values=aspect)
        matrix = matrix.loc[:, matrix.notna().sum() >= 2]
        values = matrix.to_numpy(dtype=float)
        if matrix.shape[0] < 2 or not enough("krippendorff", matrix.shape[1]) or len(np.unique(values[~np.isnan(values)])) < 2:
            result[aspect] = None
            continue
        result[aspect] = float(krippendorff.alpha(reliability_data=values, level_of_measurement="ordinal"))
    return result
