"""The headless report: one JSON object per run, and the paper's tables built from it.

Parts not computed for a run are null: a generated run has no judge block until it is judged.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from fwsapp.detection.coverage import stored_coverage
from fwsapp.detection import roc
from fwsapp.watermark import methods
from fwsapp.results.fws import ASPECTS, DEFAULT_ALPHA, DEFAULT_BETA, check_weights, fws, fws_from_likert, metric_aspects, run_means
from fwsapp.entities.introduced import analysed_entities
from fwsapp.results.entity_table import entity_summary
from fwsapp.entities.entropy import bin_shares, token_values
from fwsapp.detection.length import DEFAULT_FPR as LENGTH_FPR, detected_by, length_summary, run_curves
from fwsapp.judge.summary import counted_judges, counted_judgments, judge_block, judges_label, smoke_test_judges
from fwsapp.watermark.methods import detection_kinds
from fwsapp.quality.scoring import GENERATED_KINDS, other_settings, quality_block, read_values
from fwsapp.detection.redetect import set_summaries
from fwsapp.robustness.attack_sets import summaries as robustness_summaries
from fwsapp.results.run_names import run_label, run_settings, settings, text_source
from fwsapp.sample_size import shown
from fwsapp.store import Store


def run_detection(scores: pd.DataFrame, direction: str, method: str) -> dict | None:
    """Detection summary for one run's scores: watermarked texts are positives and unwatermarked ones
    negatives; for post-hoc detectors, model text against the human reference."""
    if scores.empty:
        return None
    positives, negatives = _sides(scores, method)
    return roc.summary(positives, negatives, direction,
                       kinds=(detection_kinds(method)[0], roc.negative_kind(set(scores.text_kind), method)))


def with_lengths(block: dict | None, store: Store, run_id: str, fpr: float = LENGTH_FPR) -> dict | None:
    """A run's detection block with its tokens to detect and TPR after T tokens at `fpr`, where its scores at every
    length are stored (`detect --by-length` stores them for runs not generated here)."""
    curves = run_curves(store, run_id)
    if block is None or curves is None:
        return block
    summary = length_summary(curves.method, curves.params, curves.positives, curves.negatives, fpr)
    return {**block, "tokens_to_detect": summary["tokens_to_detect"], "tpr_at_length": summary["tpr_at_length"],
            "length_threshold": summary["threshold"], "length_source": curves.source}


def collect(store: Store, include_smoke_tests: bool = False, judge: str | None = None) -> dict:
    """Everything in the report that does not depend on the FWS weights, one entry per run: detection,
    quality with each kind's mean Auto-FWS aspects, the judge block, entities, detection sets and attacks.
    A smoke-test judge's verdicts (the embedded model's) count only where `include_smoke_tests`, and one judge's
    verdicts count: `judge`, else the default (`counted_judgments`); `judge_choices` lists the judges it may be.
    The app caches this per database revision; `weigh` adds FWS for any α and β."""
    runs = store.runs()
    scores, metrics = store.detections(), read_values(store)
    all_judgments = store.judgments()
    judgments = counted_judgments(all_judgments, include_smoke_tests, judge)
    left_out = [] if include_smoke_tests else [model for model in smoke_test_judges(all_judgments) if model != judge]
    entity_rows, analyses = analysed_entities(store)
    entropy_values = token_values(store)
    redetections = set_summaries(store)
    robustness = {}
    for row in robustness_summaries(store):
        robustness.setdefault(row["run_id"], []).append({key: value for key, value in row.items() if key != "run_id"})
    auto = run_means(metric_aspects(metrics, dict(zip(runs.run_id, runs.task))), runs)
    names = run_settings(runs)
    entries = []
    for run in runs.sort_values(["task", "model", "method", "created"]).itertuples():
        run_scores = scores[(scores.run_id == run.run_id) & (scores.detector == run.method)]
        run_metrics = metrics[metrics.run_id == run.run_id]
        quality = quality_block(run_metrics) if not run_metrics.empty else None
        if quality is not None:
            quality["other_settings"] = other_settings(store.run(run.run_id), quality["configs"])
            own = auto[auto.run_id == run.run_id].set_index("kind")
            quality["auto_aspects"] = {kind: {aspect: float(own.at[kind, aspect]) for aspect in ASPECTS}
                                       for kind in GENERATED_KINDS if kind in own.index} or None
        entries.append({
            "run_id": run.run_id,
            "method": run.method,
            "settings": names[run.run_id],
            "model": run.model,
            "task": run.task,
            "n": int(max(run.samples_done, run.n if run.imported else 0)), "n_planned": int(run.n),
            "imported": bool(run.imported), "source": text_source(run._asdict()),
            "status": run.status,
            "detection": with_lengths(run_detection(run_scores, run.score_direction, run.method), store, run.run_id),
            "quality": quality,
            "judge": judge_block(judgments[judgments.run_id == run.run_id]),
            "entities": entities_block(run.run_id, entity_rows, analyses, runs, entropy_values),
            "redetections": redetections.get(run.run_id, []),
            "robustness": robustness.get(run.run_id, []),
            "calibration": _calibration(run, run_scores, names[run.run_id]),
            "coverage": stored_coverage(store, run.run_id),
        })
    return {"runs": entries, "judges": judges_label(judgments), "smoke_tests_left_out": left_out,
            "judge_model": judgments.judge_model.iloc[0] if not judgments.empty else None,
            "judge_choices": counted_judges(all_judgments, include_smoke_tests),
            "database": str(store.path)}


def _calibration(run, scores: pd.DataFrame, settings_label: str) -> list[dict]:
    """A run's calibration rows (`fwsapp.detection.calibration`) on its own negatives; none without scores."""
    from fwsapp.detection.calibration import run_calibration

    if scores.empty:
        return []
    negative = roc.negative_kind(set(scores.text_kind), run.method)
    params = json.loads(run.params) if isinstance(run.params, str) else (run.params or {})
    return run_calibration(run.method, params, scores[scores.text_kind == negative], settings_label)


def weigh(parts: dict, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA) -> dict:
    """The report at α and β: `collect`'s parts with each run's mean FWS, judged (`judge.fws`) and from
    the metrics (`quality.fws_auto`). FWS is linear in its aspects, so the mean FWS is the FWS of the means."""
    entries = []
    for entry in parts["runs"]:
        entry = dict(entry)
        if entry["quality"] is not None:
            aspects = entry["quality"].get("auto_aspects")
            entry["quality"] = {**entry["quality"], "fws_auto": None if not aspects else {
                kind: float(fws(values["coherence"], values["relevance"], values["factual_accuracy"], alpha, beta))
                for kind, values in aspects.items()}}
        judged = entry["judge"]
        if judged is not None:
            entry["judge"] = {**judged, "fws": None if judged["coherence"] is None else {
                kind: float(fws_from_likert([judged[aspect][kind] for aspect in ASPECTS], alpha, beta)[0])
                for kind in GENERATED_KINDS}}
        entries.append(entry)
    return {**{key: value for key, value in parts.items() if key != "runs"}, "alpha": alpha, "beta": beta,
            "runs": entries}


def build_report(store: Store, alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA,
                 include_smoke_tests: bool = False, judge: str | None = None) -> dict:
    check_weights(alpha, beta)
    return weigh(collect(store, include_smoke_tests, judge), alpha, beta)


def entities_block(run_id: str, entity_rows: pd.DataFrame, analyses: pd.DataFrame, runs: pd.DataFrame,
                   entropy_values: pd.DataFrame) -> dict | None:
    """The report's entities block: introduced entities per text, hallucination rate (%), and the share of
    tokens (%) in each entropy bin per text kind."""
    summary = entity_summary(entity_rows, analyses, runs[runs.run_id == run_id])
    own_entropy = entropy_values[entropy_values.run_id == run_id]
    if summary.empty and own_entropy.empty:
        return None
    row = summary.iloc[0] if not summary.empty else {}
    kinds = ("watermarked", "unwatermarked")
    return {
        "recognizer": row.get("recognizer") if len(row) else None,
        "introduced_per_text": {kind: _number(row, f"introduced per text ({kind})") for kind in kinds},
        "hallucination_rate": {kind: _number(row, f"unsupported by the reference % ({kind})") for kind in kinds},
        "mentions": {kind: int(row[f"disease mentions ({kind})"]) if len(row) else 0 for kind in kinds},
        # Whose next-token distributions the entropies are of (one per run, `token_values`): the run's own model, or
        # for an import a stand-in.
        "entropy_model": own_entropy.entropy_model.iloc[0] if len(own_entropy) else None,
        "entropy_bins": {
            kind: bin_shares(own_entropy.loc[own_entropy.text_kind == kind, "entropy"])
            for kind in ("reference", "unwatermarked", "watermarked")
        },
    }


def _number(row, key: str):
    value = row.get(key) if hasattr(row, "get") else None
    return None if value is None or pd.isna(value) else float(value)


DETECTABILITY = {"auroc": "AUROC", "tpr@0": "TPR at FPR 0%", "tpr@0.01": "TPR at FPR 1%", "tpr@0.05": "TPR at FPR 5%"}


def detection_frame(store: Store) -> pd.DataFrame:
    """Detectability per run: AUROC and TPR at each FPR level, in the run's score direction."""
    rows = []
    for run, _, positives, negatives in _scored_runs(store.runs(), store.detections()):
        summary = roc.summary(positives, negatives, run.score_direction)
        rows.append({"run_id": run.run_id, "auroc": summary["auroc"],
                     **{f"tpr@{level}": value for level, value in summary["tpr_at_fpr"].items()}})
    return pd.DataFrame(rows, columns=["run_id", *DETECTABILITY])


def _sides(scores: pd.DataFrame, method: str) -> tuple[pd.Series, pd.Series]:
    positive = detection_kinds(method)[0]
    negative = roc.negative_kind(set(scores.text_kind), method)
    return (scores.loc[scores.text_kind == positive, "score"].dropna(),
            scores.loc[scores.text_kind == negative, "score"].dropna())


def _scored_runs(runs: pd.DataFrame, scores: pd.DataFrame):
    """Each run with detection scores on both sides: (run, its own scores, positives, negatives)."""
    for run in runs.itertuples():
        own = scores[(scores.run_id == run.run_id) & (scores.detector == run.method)]
        positives, negatives = _sides(own, run.method)
        if not positives.empty and not negatives.empty:
            yield run, own, positives, negatives


def detection_comparison(runs: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """The Detect page's method comparison: one row per run, in each run's own score direction. A run is named by its
    method, settings (its strength always) and size before any number, so two runs never read alike; beside AUROC, the
    share of watermarked texts past the method's own threshold, which AUROC (a ranking) does not say."""
    rows = []
    for run, own, positives, negatives in _scored_runs(runs, scores):
        summary = roc.summary(positives, negatives, run.score_direction)
        label = methods.score_label(run.method)
        statistic = f"median {label}" if run.score_direction == "lower" else f"mean {label}"
        centre = positives.median() if run.score_direction == "lower" else positives.mean()
        params = json.loads(run.params) if isinstance(run.params, str) else (run.params or {})
        info = methods.info(run.method)
        detected = int(sum(info.is_watermarked(score, params) for score in positives))
        tokens = _mean_or_nan(own.num_tokens_scored)
        # Who the run is first, then the answer (AUROC, the share past the threshold, TPR), where a 1,400 px page
        # shows it.
        rows.append({
            "method": run.method, "settings": settings(run.method, run.params, run.imported), "task": run.task,
            "n positives": len(positives), "AUROC": summary["auroc"],
            "detected at its threshold": f"{detected / len(positives):.2f} ({detected} of {len(positives)}; "
                                          f"{info.verdict_rule(params)})",
            "positives' typical score": float(centre), "statistic": statistic,
            "negatives": roc.negative_kind(set(own.text_kind), run.method),
            **{f"TPR@FPR={key}": roc.tpr_label(summary, key) for key in summary["tpr_at_fpr"]},
            "AUROC 95% CI": roc.interval_label(summary), "model": run.model, "run": run.run_id,
            # Imported scores carry no token counts: said so, not left empty.
            "tokens scored": tokens if not np.isnan(tokens) else "not recorded (imported scores)",
            "n negatives": len(negatives),
            # Empty answers (a server's, say): stored, left out of every rate above, and counted here.
            "not scorable": int(own.score.isna().sum()),
        })
    return pd.DataFrame(rows)


def calibration_frame(runs: pd.DataFrame, scores: pd.DataFrame, sets: pd.DataFrame | None = None,
                      set_scores: pd.DataFrame | None = None) -> pd.DataFrame:
    """The Detect page's calibration table: per run (and length bucket), the theoretical threshold's nominal and
    achieved FPR on the run's negatives, and the empirical thresholds that hold 1 % and 5 % (`calibration`). Beside a
    run's own scores come its detection sets (`sets`, their scores in `set_scores`) of its own texts with its method
    that scored each repeated (context, token) pair once, and, for a run without scores of its own (imported), the
    others too. Each row says how repeated pairs were scored."""
    from fwsapp.detection.calibration import run_calibration
    from fwsapp.detection.deduplication import repeats_scored

    scored = {run.run_id: own for run, own, _, _ in _scored_runs(runs, scores)}
    rows = []
    for run in runs.itertuples():
        params = json.loads(run.params) if isinstance(run.params, str) else (run.params or {})
        found = [(params, scored[run.run_id], False)] if run.run_id in scored else []
        if sets is not None and set_scores is not None:
            own_texts = sets[(sets.run_id == run.run_id) & (sets.method == run.method) & sets.attack_set_id.isna()
                             & sets.normalize.isna() & sets.window_tokens.isna()]
            found += [(json.loads(entry.params), set_scores[set_scores.set_id == entry.set_id], bool(entry.deduplicate))
                      for entry in own_texts.itertuples() if entry.deduplicate or run.run_id not in scored]
        for used, texts, deduplicate in found:
            negative = roc.negative_kind(set(texts.text_kind), run.method)
            setting = {"repeated pairs": repeats_scored(run.method, used, deduplicate)}  # beside the run it qualifies
            rows += [{"run": row.pop("run"), **setting, **row} for row in
                     run_calibration(run.method, used, texts[texts.text_kind == negative], run_label(run._asdict()))]
    return pd.DataFrame(rows)


def roc_frame(runs: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """ROC curve points per run, for an overlay: columns run, label, fpr, tpr."""
    frames = []
    for run, _, positives, negatives in _scored_runs(runs, scores):
        fpr, tpr = roc.roc_points(positives, negatives, run.score_direction)
        frames.append(pd.DataFrame({"run": run.run_id, "label": run_label(run._asdict()), "fpr": fpr, "tpr": tpr}))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "label", "fpr", "tpr"])


def _mean_or_nan(values: pd.Series) -> float:
    numbers = values.to_numpy(dtype=float, na_value=np.nan)
    return float(numbers[~np.isnan(numbers)].mean()) if (~np.isnan(numbers)).any() else float("nan")


def redetection_comparison(summaries: dict[str, list[dict]]) -> pd.DataFrame:
    """The Detect page's rows for detection sets: one per set, beside the runs' own scores."""
    rows = []
    for run_id, sets in summaries.items():
        for entry in sets:
            agreement = entry["agreement"] or {}
            params = entry["params"]
            generator = params.get("rng", "–") + (f", {params['cuda_blocks']} blocks" if params.get("cuda_blocks") else "")
            # What tells the sets apart first (tokenizer, generator, agreement), so it stays in view.
            rows.append({
                "run": f"{run_id} · {entry['set_id']}", "method": entry["method"], "tokenizer": entry["tokenizer"],
                "green lists": generator, "repeated pairs": "scored once" if entry["deduplicate"] else "each scored",
                # A windowed or normalised set of the same detector reads other scores: said beside them.
                "texts read": (f"best {entry['window_tokens']}-token window" if entry.get("window_tokens") else "whole")
                + (f", {entry['normalize']} normalised" if entry.get("normalize") else ""),
                # A generated run has no imported score to compare with: said, not a blank cell that reads None.
                "max |Δ| vs imported": agreement["max_abs_diff"] if agreement.get("n") else "no imported score",
                "AUROC": entry["auroc"],
                **{f"TPR@FPR={key}": roc.tpr_label(entry, key) for key in entry["tpr_at_fpr"] or {}},
                "texts scored": entry["texts_scored"], "negatives": entry["negatives"],
                "params": methods.info(entry["method"]).changed_params(params),
            })
    return pd.DataFrame(rows)


def rates_shown(rates: pd.DataFrame) -> pd.DataFrame:
    """`length_frames`' rates as a table: a rate from too few texts says so, as `detect --by-length` prints it (the
    page's cells read "None")."""
    return rates.drop(columns="tokens").assign(
        TPR=[shown(value, "rate", n) for value, n in zip(rates.TPR, rates.texts)],
        FPR=[shown(value, "rate", n) for value, n in zip(rates.FPR, rates.negatives)])


def length_frames(store: Store, runs: pd.DataFrame, fpr: float) -> dict:
    """The Detect page's Length tab for `runs`: a summary row per run (threshold, tokens to detect), TPR and FPR after
    each T (long), the share of its watermarked texts detected by T tokens (long: `detected_by`, the never detected
    keeping it below 1), and the labels of runs without scores by length."""
    summaries, rates, tokens, missing = [], [], [], []
    for run in runs.itertuples():
        label = run_label(run._asdict())
        curves = run_curves(store, run.run_id)
        if curves is None:
            if not methods.info(run.method).post_hoc:
                missing.append(run.run_id)
            continue
        summary = length_summary(curves.method, curves.params, curves.positives, curves.negatives, fpr)
        found = summary["tokens_to_detect"]
        summaries.append({"run": label, "verdict at": summary["threshold"], "watermarked texts": found["n"],
                          "median tokens to detect": found["median"],
                          "IQR": f"{found['iqr'][0]}–{found['iqr'][1]}" if found["n"] else None,
                          "never detected": found["never_detected"],
                          "scores from": "generation" if curves.source == "generation" else curves.source})
        for size, row in summary["tpr_at_length"].items():
            rates.append({"run": label, "T": size, "tokens": None if size == "full" else int(size), "TPR": row["tpr"],
                          "texts": row["n"], "FPR": row["fpr"], "negatives": row["negatives"]})
        tokens += [{"run": label, "T": length, "share detected": count / found["n"], "detected": f"{count} of {found['n']}"}
                   for length, count in detected_by(found["values"], max(map(len, curves.positives), default=0))]
    return {"summary": pd.DataFrame(summaries), "rates": pd.DataFrame(rates, columns=["run", "T", "tokens", "TPR", "texts",
                                                                                      "FPR", "negatives"]),
            "detected_by": pd.DataFrame(tokens, columns=["run", "T", "share detected", "detected"]), "missing": missing}

