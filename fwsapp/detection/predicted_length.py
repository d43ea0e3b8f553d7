"""How long must an answer be: tokens to detect predicted from the model's entropy, against those measured.

Teacher forcing reads each watermarked answer under the run's model and gives, per token, what the method's closed
form needs (`MethodInfo.expected_evidence`, fwsapp.watermark.expected_evidence): the spike entropy for a green list,
the chosen token's probability for Gumbel sampling. Summed, they make the statistic the detector is expected to reach
after each token, in the scale of the measured length curves, so predicted and measured tokens to detect are read at
the same threshold (`length.tokens_to_detect`). Where the two disagree, the answer's entropy alone does not explain its
detectability: a bound that is loose (the green-list one is a lower bound), repeats the detector skips, or a text the
model found less predictable than it wrote it.

The EU Code of Practice on marking AI-generated content asks providers to mark text of over 200 tokens; an answer
shorter than that may still be detectable, and the share that is, per task, is the figure that says what marking
short clinical answers buys.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np
import pandas as pd
from scipy import stats

from fwsapp.detection.length import DEFAULT_FPR, length_threshold, run_curves, tokens_quantile, tokens_to_detect
from fwsapp.sample_size import shown
from fwsapp.watermark import methods
from fwsapp.watermark.expected_evidence import SPIKE_ENTROPY

CODE_OF_PRACTICE_TOKENS = 200  # the Code of Practice's line: free text over this many tokens is to be marked
NOT_PREDICTED = "not predicted yet"
CHUNK = 16  # answers per transaction: a killed job keeps what it predicted


def run_prediction_problem(run: dict) -> str | None:
    """`prediction_problem` of a stored run (`Store.run`): its method and its decoding settings."""
    return prediction_problem(run["method"], run["config"].get("sampling", {}))


def prediction_problem(method: str, sampling: dict) -> str | None:
    """Why a run's tokens to detect cannot be predicted here, or None."""
    from fwsapp.watermark.vllm_contexts import is_greedy

    info = methods.info(method)
    if info.expected_evidence is None:
        return (f"{info.name} has no closed form of its expected statistic here; "
                f"{', '.join(entry.name for entry in methods.METHODS if entry.expected_evidence)} have one.")
    if is_greedy(sampling):
        return "it was decoded greedily: the watermark moved no choice, and no length is enough."
    return None


def unpredicted_runs(store, run_ids: list[str]) -> list[str]:
    """The runs among `run_ids` that can be predicted and have no predictions yet."""
    runs = [store.run(run_id) for run_id in run_ids]
    return [run["run_id"] for run in runs if store.length_predictions(run["run_id"]).empty
            and run_prediction_problem(run) is None
            and store.count("generations", run["run_id"])]


def teacher_statistic(info: methods.MethodInfo, params: dict, temperature: float):
    """The teacher-forcing statistic a method's closed form needs, at the run's temperature."""
    from fwsapp.models.teacher_forcing import chosen_probability, spike_entropy

    expected = info.expected_evidence
    if expected.statistic == SPIKE_ENTROPY:
        return spike_entropy(expected.modulus(params), temperature)
    return chosen_probability(temperature)


def predicted_curves(lm, method: str, params: dict, pairs: list[tuple[list[int], list[int]]],
                     temperature: float = 1.0) -> list[np.ndarray]:
    """The expected statistic after each token of each (context ids, answer ids) pair, in the length curves' scale."""
    from fwsapp.models.teacher_forcing import teacher_force

    info = methods.info(method)
    params = info.checked_params(params)
    statistic = teacher_statistic(info, params, temperature)
    found = teacher_force(lm, pairs, (statistic,))
    return [info.expected_evidence.curve(params, np.nan_to_num(values[statistic.name], nan=1.0)) for values in found]


def predict_run(store, run_id: str, lm, progress: Callable[[int, int], None] | None = None,
                cancel: threading.Event | None = None) -> int:
    """Predict the curve of each watermarked answer of a run not yet predicted under `lm`; returns how many were.
    Answers are read after their prompts, as they were generated."""
    run = store.run(run_id)
    if problem := run_prediction_problem(run):
        raise ValueError(f"Run {run_id}: {problem}")
    sampling = run["config"].get("sampling", {})
    done = store.predicted_samples(run_id, lm.name)
    rows = [row for row in store.generations(run_id).itertuples()
            if row.sample_idx not in done and isinstance(row.watermarked_text, str)]
    temperature = float(sampling.get("temperature", 1.0))
    if progress:
        progress(0, len(rows))
    for start in range(0, len(rows), CHUNK):
        if cancel is not None and cancel.is_set():
            break
        chunk = rows[start:start + CHUNK]
        pairs = [(lm.tokenizer(row.prompt)["input_ids"] if isinstance(row.prompt, str) else [],
                  list(row.watermarked_ids) if hasattr(row.watermarked_ids, "__len__") and len(row.watermarked_ids)
                  else lm.tokenizer(row.watermarked_text, add_special_tokens=False)["input_ids"]) for row in chunk]
        curves = predicted_curves(lm, run["method"], run["params"], pairs, temperature)
        store.write_length_predictions(run_id, lm.name, [
            {"sample_idx": int(row.sample_idx), "tokens": len(answer), "predicted_statistics": curve.tolist()}
            for row, (_, answer), curve in zip(chunk, pairs, curves)])
        if progress:
            progress(start + len(chunk), len(rows))
    return len(rows)


def predicted_against_measured(store, run_id: str, fpr: float = DEFAULT_FPR) -> dict | None:
    """A run's tokens to detect per watermarked answer, measured (from its scores by length) and predicted (where
    `predict_run` has read it), and their summary; None where it has neither."""
    run = store.run(run_id)
    threshold = length_threshold(run["method"], run["params"], fpr)
    curves = run_curves(store, run_id)
    measured = pd.DataFrame({"sample_idx": list(curves.positive_samples) if curves else [],
                             "tokens": [len(curve) for curve in curves.positives] if curves else [],
                             "measured": [tokens_to_detect(curve, threshold) for curve in curves.positives]
                             if curves else []}, dtype=float)
    predicted = store.length_predictions(run_id)
    model = None
    if not predicted.empty:
        model = run["model"] if (predicted.model == run["model"]).any() else predicted.model.iloc[0]
        predicted = predicted[predicted.model == model]
    predicted = pd.DataFrame({"sample_idx": predicted.sample_idx.astype(float),
                              "predicted_tokens": predicted.tokens.astype(float),
                              "predicted": [tokens_to_detect(curve, threshold)
                                            for curve in predicted.predicted_statistics]})
    if measured.empty and predicted.empty:
        return None
    frame = measured.merge(predicted, on="sample_idx", how="outer")
    frame["tokens"] = frame.tokens.fillna(frame.predicted_tokens)  # the scored length where it was measured
    frame = frame.drop(columns="predicted_tokens").astype({"sample_idx": int, "tokens": int})
    finite = frame[np.isfinite(frame.predicted) & np.isfinite(frame.measured)]
    short = frame[frame.tokens < CODE_OF_PRACTICE_TOKENS]
    # Per short answer predicted (measured): whether it is detected by its end.
    predicted_detected = short.predicted.dropna() <= short.tokens[short.predicted.notna()]
    measured_detected = np.isfinite(short.measured.dropna())
    return {
        "run_id": run_id, "method": run["method"], "task": run["task"], "model": model or run["model"],
        "threshold": threshold.label, "answers": len(frame), "predicted_answers": int(frame.predicted.notna().sum()),
        "predicted_median": tokens_quantile(frame.predicted, 0.5), "measured_median": tokens_quantile(frame.measured, 0.5),
        "spearman": float(stats.spearmanr(finite.predicted, finite.measured).statistic) if len(finite) >= 3 else None,
        "spearman_pairs": len(finite), "short_answers": len(short),
        "short_predicted_detectable": _share(predicted_detected), "short_predicted": len(predicted_detected),
        "short_measured_detectable": _share(measured_detected), "short_measured": len(measured_detected),
        "per_answer": frame,
    }


def _share(flags) -> float | None:
    flags = np.asarray(flags, dtype=bool)
    return float(flags.mean()) if flags.size else None


def prediction_table(store, run_ids: list[str], fpr: float = DEFAULT_FPR) -> pd.DataFrame:
    """Per run with scores by length or predictions: method, task, tokens to detect predicted and measured (medians), their rank
    correlation over answers, and the share of answers under CODE_OF_PRACTICE_TOKENS detectable, each way; the
    correlation and the shares under the small-sample rule (four answers read "detectable 0.75" beside the length
    table's "not enough data (n = 4)" for the same answers' TPR at their full length)."""
    rows = [found for run_id in run_ids if (found := predicted_against_measured(store, run_id, fpr)) is not None]
    under = f"under {CODE_OF_PRACTICE_TOKENS} tokens"

    def predicted(row: dict, value):
        """A figure of the predicted side, or that the run is not predicted yet (it read "None" and "not enough data
        (n = 0)" for a run whose answers wait for `--predict`)."""
        return value if row["predicted_answers"] else NOT_PREDICTED

    return pd.DataFrame([{
        "run": row["run_id"], "method": row["method"], "task": row["task"], "answers": row["answers"],
        "predicted median": predicted(row, row["predicted_median"]), "measured median": row["measured_median"],
        "Spearman ρ": predicted(row, shown(row["spearman"], "spearman", row["spearman_pairs"])),
        f"answers {under}": row["short_answers"],
        "detectable (predicted)": predicted(row, shown(row["short_predicted_detectable"], "rate", row["short_predicted"])),
        "detectable (measured)": shown(row["short_measured_detectable"], "rate", row["short_measured"])}
        for row in rows])
