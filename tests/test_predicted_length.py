"""Issue 60, item 5: how long an answer must be, predicted from the model's entropy, against the measured length."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from fwsapp.watermark.expected_evidence import green_list_curve, gumbel_curve, spike_modulus


def test_the_gumbel_expectation_is_the_mean_evidence_of_the_token_gumbel_sampling_chooses():
    """Aaronson's sampling, simulated: the chosen token's −log(1 − r) averages ψ(1 + 1/p) + γ_E of its probability."""
    rng = np.random.default_rng(0)
    probabilities = rng.dirichlet(np.full(40, 0.3))
    draws = rng.random((200_000, 40))
    chosen = np.argmax(np.log(draws) / probabilities, axis=1)  # argmax r^(1/p)
    evidence = -np.log1p(-draws[np.arange(len(draws)), chosen])
    expected = special.digamma(1 + 1 / probabilities[chosen]) + np.euler_gamma
    assert evidence.mean() == pytest.approx(expected.mean(), rel=0.01)
    assert special.digamma(2) + np.euler_gamma == pytest.approx(1.0)  # a certain token: the null's mean, no evidence
    # The curve: the p-value of the expected sum; certain tokens stay at the null's median-ish, uncertain ones fall.
    assert gumbel_curve({}, np.ones(50))[-1] > 0.4
    assert gumbel_curve({}, np.full(50, 0.05))[-1] < 1e-20


def test_the_green_list_bound_holds_and_is_exact_for_a_flat_distribution():
    """KGW's biased sampling, simulated over many green lists: the green share is at least the spike-entropy bound,
    and equals it where every token is equally likely."""
    rng = np.random.default_rng(1)
    gamma, delta, vocabulary = 0.25, 2.0, 400
    modulus = spike_modulus(gamma, delta)
    for probabilities, exact in ((np.full(vocabulary, 1 / vocabulary), True),
                                 (rng.dirichlet(np.full(vocabulary, 0.05)), False)):
        spike = float((probabilities / (1 + modulus * probabilities)).sum())
        bound = gamma * math.exp(delta) * spike / (1 + (math.exp(delta) - 1) * gamma)
        shares = []
        for _ in range(3000):
            green = rng.permutation(vocabulary) < gamma * vocabulary
            boosted = probabilities * np.where(green, math.exp(delta), 1.0)
            shares.append(boosted[green].sum() / boosted.sum())
        assert np.mean(shares) >= bound - 0.01
        if exact:
            assert np.mean(shares) == pytest.approx(bound, abs=0.01)
    # The expected z after T tokens grows as √T at a fixed green share, and is 0 with no choice (spike 1/(1 + ζ)).
    flat = green_list_curve({"gamma": gamma, "delta": delta}, np.ones(100))
    assert flat[99] / flat[24] == pytest.approx(2.0)
    certain = green_list_curve({"gamma": gamma, "delta": delta}, np.full(100, 1 / (1 + modulus)))
    assert np.allclose(certain, 0)


def test_predictions_need_a_closed_form_and_sampling():
    from fwsapp.detection.predicted_length import prediction_problem

    assert prediction_problem("KGW", {}) is None and prediction_problem("vLLM-Gumbel", {"temperature": 0.7}) is None
    assert "no closed form" in prediction_problem("SynthID", {})
    assert "greedily" in prediction_problem("KGW", {"do_sample": False})


@pytest.mark.model
def test_a_runs_answers_are_predicted_once_and_read_against_their_measured_lengths(qa_run, tmp_path, capsys):
    import shutil

    from fwsapp.cli import main
    from fwsapp.detection.predicted_length import predicted_against_measured
    from fwsapp.store import Store

    store, _, run_id = qa_run
    store.row("CHECKPOINT")
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(store.path, db)
    assert main(["detect", "--run", run_id, "--predict", "--db", db]) == 2
    assert "add --by-length" in capsys.readouterr().err
    assert main(["detect", "--run", run_id, "--by-length", "--predict", "--db", db]) == 0
    assert "Tokens to detect predicted from entropy" in capsys.readouterr().out
    copy = Store(db)
    found = predicted_against_measured(copy, run_id)
    answers = found["per_answer"]
    assert len(answers) == 4 and (answers.tokens == 64).all() and answers.measured.notna().all()
    # δ = 2 on a 135M model's sampled answers: the bound predicts every answer detectable within its 64 tokens.
    assert (answers.predicted <= answers.tokens).all() and found["short_predicted_detectable"] == 1.0
    revision = copy.revision()
    copy.close()
    assert main(["detect", "--run", run_id, "--by-length", "--predict", "--db", db]) == 0
    assert Store(db).revision() == revision  # predicted once


def test_a_few_answers_correlation_and_shares_say_there_are_too_few(monkeypatch):
    """Four answers read "Spearman ρ 0.50" and "detectable (measured) 0.75" beside the length table's "not enough data
    (n = 4)" for the same answers' TPR at their full length; the table holds both to the small-sample rule."""
    from fwsapp.detection import predicted_length

    def found(answers: int) -> dict:
        return {"run_id": f"r{answers}", "method": "KGW", "task": "qa", "answers": answers, "predicted_median": 22,
                "measured_median": 16, "spearman": 0.5, "spearman_pairs": answers, "short_answers": answers,
                "short_predicted_detectable": 0.75, "short_predicted": answers, "short_measured_detectable": 0.75,
                "short_measured": answers, "predicted_answers": answers}

    monkeypatch.setattr(predicted_length, "predicted_against_measured", lambda store, run_id, fpr: found(int(run_id)))
    table = predicted_length.prediction_table(None, ["4", "24"]).set_index("answers")
    assert table.loc[4, ["Spearman ρ", "detectable (predicted)", "detectable (measured)"]].tolist() == [
        "not enough data (n = 4)"] * 3
    assert table.loc[24, ["Spearman ρ", "detectable (predicted)", "detectable (measured)"]].tolist() == [0.5, 0.75, 0.75]


def test_a_run_not_yet_predicted_says_so_and_a_predicted_median_is_a_count(monkeypatch):
    """A run scored by length but not read for predictions showed "None" and "not enough data (n = 0)" beside a
    predicted run's median written 18.000 (the column's None made the counts floats)."""
    from fwsapp.detection import predicted_length
    from fwsapp.ui.widgets import uniform

    def found(run_id: str) -> dict:
        predicted = run_id == "read"
        return {"run_id": run_id, "method": "KGW", "task": "qa", "answers": 24, "predicted_median": 18 if predicted
                else None, "measured_median": 9, "spearman": 0.08 if predicted else None, "spearman_pairs": 24 * predicted,
                "short_answers": 24, "short_predicted_detectable": 1.0 if predicted else None,
                "short_predicted": 24 * predicted, "short_measured_detectable": 1.0, "short_measured": 24,
                "predicted_answers": 24 * predicted}

    monkeypatch.setattr(predicted_length, "predicted_against_measured", lambda store, run_id, fpr: found(run_id))
    table = uniform(predicted_length.prediction_table(None, ["waiting", "read"])).set_index("run")
    assert table.loc["waiting", ["predicted median", "Spearman ρ", "detectable (predicted)"]].tolist() == [
        "not predicted yet"] * 3
    assert table.loc["read", "predicted median"] == "18" and table.loc["waiting", "detectable (measured)"] == 1.0
