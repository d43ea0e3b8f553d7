"""The playground: a try is one unit of a one-sample run, detected once, and kept as that run."""
import pytest

from fwsapp.watermark.methods import watermark_names
from fwsapp.generation.playground import history_row, keep, try_prompt
from fwsapp.watermark.factory import explain


def test_a_try_shows_the_units_own_detections_and_is_kept_once(lm, store):
    trial = try_prompt(lm, "What lowers blood pressure?", "KGW", {"delta": 2.0}, 16, 7, reference="Less salt.")
    ids = trial.result.rows[0]["watermarked_ids"]
    again, tokens = explain("KGW", trial.config.params, lm, ids, lm.tokenizer(trial.prompt)["input_ids"])
    assert trial.detections["watermarked"].score == again.score
    assert trial.detections["watermarked"].token_flags == again.token_flags and trial.tokens["watermarked"] == tokens
    run_id = keep(store, trial)
    revision = store.revision()
    assert keep(store, trial) == run_id and store.revision() == revision  # keeping again writes nothing
    stored = store.generations(run_id)
    assert list(stored.reference) == ["Less salt."] and list(stored.watermarked_ids[0]) == ids
    assert store.detections([run_id]).set_index("text_kind").loc["watermarked", "score"] == pytest.approx(again.score)
    assert store.run(run_id)["status"] == "done"


def test_a_try_needs_a_prompt_and_a_watermark(lm):
    with pytest.raises(ValueError, match="The prompt is empty"):
        try_prompt(lm, "  ", "KGW", {}, 16, 7)
    with pytest.raises(ValueError, match="post-hoc detector"):
        try_prompt(lm, "Why?", "LogRank", {}, 16, 7)


@pytest.mark.parametrize("method", watermark_names())
def test_each_method_shows_its_own_score_threshold_and_token_view(lm, method):
    """Issue 37: EXP-edit's p-value and SynthID's mean g-value were None in the history (another method's column);
    each try now fills the same columns, names its score and the threshold it is held to, and draws its tokens."""
    from fwsapp.watermark.methods import info
    from fwsapp.generation.playground import history_row, try_prompt
    from fwsapp.ui.render import detection_tokens

    trial = try_prompt(lm, "What lowers blood pressure?", method, info(method).checked_params(info(method).test_params),
                       8, 7, reference="Less salt and more exercise.")
    row = history_row(trial)
    assert row["method"] == method and row["score watermarked"] is not None and row["score unwatermarked"] is not None
    assert row["score is"] == info(method).score_label
    assert row["threshold"] == info(method).verdict_rule(trial.config.params)
    found, tokens = trial.detections["watermarked"], trial.tokens["watermarked"]
    if found.token_flags:
        assert len(found.token_flags) == len(tokens)
        assert detection_tokens(tokens, found).count("<span") >= len(tokens)
    else:  # an alignment test (EXP-edit's, ITS-Edit's) gives one p-value for the whole text, no token its own
        assert info(method).score_label == "p"


def test_the_demos_figures_and_one_unwatermarked_answer_for_every_method(lm):
    from fwsapp.detection.length import statistic
    from fwsapp.generation.playground import answer_figures, compare_methods
    from scipy.stats import norm

    trials = compare_methods(lm, "What lowers blood pressure?", ["KGW", "SynthID"], 16, 7,
                             reference="Less salt and more exercise.")
    assert [trial.config.method for trial in trials] == ["KGW", "SynthID"]
    kgw = answer_figures(trials[0])["watermarked"]
    flags = [flag for flag in trials[0].detections["watermarked"].token_flags if flag != -1]
    assert kgw["green"] == sum(flags) and kgw["green share"] == pytest.approx(sum(flags) / len(flags))
    assert 0 <= kgw["p"] <= 1 and 0 <= kgw["ROUGE-L to unwatermarked"] <= 1 and kgw["ROUGE-L to reference"] is not None
    assert answer_figures(trials[0])["unwatermarked"]["ROUGE-L to unwatermarked"] is None  # not 1.00 against itself
    # Issue 58, item 6: SynthID draws no green list, so its answer counts no green tokens.
    synthid = answer_figures(trials[1])["watermarked"]
    assert synthid["green"] is None
    # Its score is a mean g; the line gives the p its g-values imply beside it (it gave none), as the service does.
    detection = trials[1].detections["watermarked"]
    implied = norm.sf(statistic("SynthID", trials[1].config.params, detection))
    assert synthid["p"] == pytest.approx(implied)
    # One model and seed: the unwatermarked answer is the same under every method.
    assert len({trial.text("unwatermarked") for trial in trials}) == 1
    with pytest.raises(ValueError, match="Pick at least one watermark"):
        compare_methods(lm, "Why?", [], 16, 7)


def test_changing_delta_or_comparing_methods_generates_the_unwatermarked_answer_once(lm, monkeypatch):
    """k methods (or k settings of one) need k + 1 generations, not 2k: the unwatermarked answer of a prompt, model,
    length and seed is generated once and met by every try; the history names each try's settings and prompt."""
    from fwsapp.generation import generate
    from fwsapp.generation.playground import PLAIN_ANSWERS, compare_methods, history_row, try_prompt

    PLAIN_ANSWERS.clear()
    calls = []
    real = generate.generate_batch
    monkeypatch.setattr(generate, "generate_batch", lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    first = try_prompt(lm, "Is gout painful?", "KGW", {"delta": 2.0}, 12, 5)
    second = try_prompt(lm, "Is gout painful?", "KGW", {"delta": 1.0}, 12, 5)
    assert len(calls) == 3 and first.text("unwatermarked") == second.text("unwatermarked")
    steps = []
    compare_methods(lm, "Is gout painful?", ["SWEET", "Unigram"], 12, 5, on_step=steps.append)
    assert len(calls) == 5  # one watermarked answer per method, no second unwatermarked one
    # Its progress counts the 2 answers it generates, not 4, and estimates the time left from the pace so far.
    assert {(step.method, step.kind, step.generation, step.generations) for step in steps} == {
        ("SWEET", "watermarked", 1, 2), ("Unigram", "watermarked", 2, 2)}
    assert steps[0].seconds_left > 0 and steps[-1].seconds_left == 0
    PLAIN_ANSWERS.clear()
    steps.clear()
    compare_methods(lm, "Is gout painful?", ["KGW"], 12, 5, on_step=steps.append)
    assert [(step.kind, step.generation, step.generations) for step in steps][::12] == [
        ("unwatermarked", 1, 2), ("watermarked", 2, 2)]  # k + 1 answers when the unwatermarked one is not known yet
    row = history_row(second)
    assert row["settings"] == "delta=1" and row["prompt"] == "Is gout painful?"


def test_an_answer_short_of_its_threshold_says_about_how_many_tokens_it_would_need():
    from fwsapp.generation.playground import tokens_needed
    from fwsapp.watermark import methods
    from fwsapp.watermark.base import Detection

    kgw = methods.info("KGW")
    assert tokens_needed(kgw, {}, Detection(3.54, 40, z=3.54)) == round(40 * (4 / 3.54) ** 2)  # 51: z grows as √T
    assert tokens_needed(kgw, {}, Detection(4.5, 40, z=4.5)) is None  # detected already
    assert tokens_needed(kgw, {}, Detection(-1.0, 40, z=-1.0)) is None  # no evidence to extrapolate
    assert tokens_needed(methods.info("EXP-edit"), {}, Detection(0.3, 40, p=0.3)) is None  # a p-value, not a z


def _figures(**changed) -> dict:
    """One answer's figures as `answer_figures` gives them: a KGW answer of 32 tokens short of z > 4."""
    return {"score": 3.54, "score label": "z", "threshold": "z > 4", "detected": False, "scored": 32, "unit": "token",
            "strength": "delta", "resolution": None, "green": 26, "green share": 0.8125, "p": 2.7e-4,
            "ROUGE-L to unwatermarked": 0.15, "ROUGE-L to reference": None, "needed": 41, **changed}


def test_an_answers_line_counts_the_methods_own_unit_and_names_its_own_strength():
    """SemStamp's line read "green 1 of 1 (100%) … would need about 3 scored tokens, not 1: raise the new tokens, or
    δ": it scores sentences, and has no δ; ITS-Edit's p of 0 (no null key as small) read "p = < 1e-300"."""
    from fwsapp.ui.render import answer_line

    kgw = answer_line(_figures())
    assert kgw.startswith("z = 3.540 · no watermark detected (threshold: z > 4) · green 26 of 32 tokens (81.2%)")
    assert kgw.endswith("would need about 41 scored tokens, not 32: raise the new tokens, or a stronger delta")
    semstamp = answer_line(_figures(score=1.73, threshold="z > 3", scored=1, unit="sentence", strength=None, green=1,
                                    **{"green share": 1.0, "needed": 3}))
    assert "green 1 of 1 sentence (100.0%)" in semstamp
    assert semstamp.endswith("would need about 3 scored sentences, not 1: raise the new tokens")
    its_edit = answer_line(_figures(score=0.0, **{"score label": "p"}, threshold="p < 0.1", detected=True,
                                    resolution=0.002, green=None, needed=None))
    assert its_edit.startswith("p < 0.002 · watermark detected (threshold: p < 0.1) · 32 tokens scored")


def test_a_tries_p_of_zero_from_null_keys_reads_below_their_step(lm):
    """ITS-Edit's p is MarkLLM's share of null keys at least as extreme, k / n_runs: 0 of 20 is p < 0.05 in the
    figures and the history, not an underflow."""
    from fwsapp.generation.playground import answer_figures
    from fwsapp.ui.render import tries_table

    trial = try_prompt(lm, "What lowers blood pressure?", "ITS-Edit", {"n_runs": 20, "pseudo_length": 32}, 24, 7)
    figures = answer_figures(trial)
    assert figures["watermarked"]["resolution"] == pytest.approx(0.05) and figures["watermarked"]["unit"] == "token"
    row = history_row(trial)
    written = tries_table([{**row, "score watermarked": 0.0, "p watermarked": 0.0}])
    assert "p resolution" not in written and written.loc[0, "score watermarked"] == "< 0.05"
    kgw = tries_table([history_row(try_prompt(lm, "What lowers blood pressure?", "KGW", {}, 8, 7))])
    assert kgw.loc[0, "score watermarked"].count(".") == 1  # a z to three decimals, untouched
