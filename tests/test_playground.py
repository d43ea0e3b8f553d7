"""The playground: a try is one unit of a one-sample run, detected once, and kept as that run."""
import pytest

from fwsapp.playground import keep, try_prompt
from fwsapp.watermark import explain


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
