"""Issue 60, item 3: how much of a run's output carries the watermark, and the runs that carry none."""
from __future__ import annotations

import html
import json

import numpy as np
import pytest
import pandas as pd

from fwsapp.detection.coverage import run_coverage
from fwsapp.watermark import methods
from fwsapp.watermark.factory import create
from fwsapp.watermark.methods import WATERMARKED, GeneratedAnswer
from fwsapp.watermark.vllm_contexts import GREEDY

VOCABULARY = 1000


def repetitive(seed: int = 0) -> list[int]:
    rng = np.random.default_rng(seed)
    return rng.integers(0, VOCABULARY, 30).tolist() + rng.integers(0, VOCABULARY, 6).tolist() * 4


def test_vllm_gumbel_leaves_exactly_the_tokens_its_detector_does_not_score():
    tokens = repetitive()
    for deduplicate in ("single_turn", "none"):
        params = methods.info("vLLM-Gumbel").checked_params({"deduplicate_contexts": deduplicate})
        reasons = methods.info("vLLM-Gumbel").token_coverage(params, GeneratedAnswer(tokens),
                                                             {"do_sample": True, "temperature": 0.7})
        flags = create("vLLM-Gumbel", VOCABULARY, params).detect(tokens).token_flags
        assert [reason == WATERMARKED for reason in reasons] == [flag >= 0 for flag in flags]
        assert ("repeated context" in reasons) == (deduplicate == "single_turn")
    params = methods.info("vLLM-Gumbel").checked_params({"deduplicate_contexts": "all"})
    reasons = methods.info("vLLM-Gumbel").token_coverage(params, GeneratedAnswer(tokens), {"temperature": 1.0})
    assert reasons[:4] == ["context reaches into the prompt"] * 4 and reasons[4] == WATERMARKED
    greedy = {"temperature": 0}
    assert methods.info("vLLM-Gumbel").token_coverage(params, GeneratedAnswer(tokens), greedy) == [GREEDY] * len(tokens)
    kgw = methods.info("KGW")
    assert set(kgw.token_coverage(kgw.checked_params({}), GeneratedAnswer(tokens), greedy)) == {
        WATERMARKED}  # a bias decides even a greedy choice
    entity = methods.info("EntityKGW")  # a gate that needs the lexicon's tokens: its detector's count is the coverage
    assert entity.token_coverage(entity.checked_params({}), GeneratedAnswer(tokens, scored_tokens=40), {}) == \
        [WATERMARKED] * 40 + [methods.GATED] * (len(tokens) - 40)


def run(method: str, sampling: dict, imported: bool = False) -> dict:
    return {"run_id": "r", "method": method, "params": {}, "imported": imported,
            "config": json.dumps({"sampling": sampling, "server": {"base_url": "http://x"}})}


def generations(marked: list[list[int]], plain: list[list[int]]) -> pd.DataFrame:
    return pd.DataFrame({"sample_idx": range(len(marked)), "watermarked_ids": marked, "unwatermarked_ids": plain})


def test_a_greedy_served_run_and_one_whose_answers_did_not_change_are_flagged():
    texts = [repetitive(seed) for seed in range(4)]
    greedy = run_coverage(run("vLLM-Gumbel", {"temperature": 0}), generations(texts, [t[::-1] for t in texts]))
    assert greedy["share"] == 0 and greedy["flags"] == ["no token watermarked (greedy decoding)"]
    same = run_coverage(run("vLLM-Gumbel", {"temperature": 0.7}), generations(texts, texts))
    assert same["flags"] == ["4 of 4 watermarked answers are the same as without the watermark"]
    assert 0.5 < same["share"] < 1 and same["not_watermarked"]["repeated context"] == same["tokens"] - same["watermarked"]
    sampled = run_coverage(run("KGW", {"temperature": 0.7}), generations(texts, [t[::-1] for t in texts]))
    assert sampled["share"] == 1 and sampled["flags"] == [] and sampled["tokens"] == sum(map(len, texts))
    assert run_coverage(run("KGW", {}, imported=True), generations(texts, texts)) is None


def test_the_detect_page_warns_of_a_served_run_that_carries_no_mark_and_tabulates_its_coverage(app_db):
    """A served vLLM-Gumbel run at temperature 0: the engine sampled every answer plainly, so each watermarked answer
    is its opted-out twin."""
    from streamlit.testing.v1 import AppTest

    from fwsapp.store import Store
    from tests.conftest import PROJECT

    texts = [repetitive(seed) for seed in range(12)]
    store = Store(app_db)
    store.ensure_run("served-greedy", {"sampling": {"temperature": 0.0}, "server": {"base_url": "http://x"}},
                     model="smollm2-135m-instruct", task="qa", method="vLLM-Gumbel", params={}, seed=1, n=12)
    store.write_batch("served-greedy", [
        {"sample_idx": index, "prompt": f"q{index}", "reference": "r", "watermarked_text": "t", "unwatermarked_text": "t",
         "watermarked_ids": ids, "unwatermarked_ids": ids} for index, ids in enumerate(texts)], [
        {"sample_idx": index, "text_kind": kind, "detector": "vLLM-Gumbel", "score": 0.3 + index / 100, "p": 0.3,
         "num_tokens_scored": 40} for index in range(12) for kind in ("watermarked", "unwatermarked")])
    store.close()
    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    assert not app.exception
    shown = [html.unescape(warning.value).replace("\u2060", "") for warning in app.warning]  # as the page reads
    warnings = [text for text in shown if "carries no watermark as asked" in text]
    assert len(warnings) == 1 and "no token watermarked (greedy decoding)" in warnings[0]
    assert "12 of 12 watermarked answers are the same" in warnings[0]
    coverage = next(frame.value for frame in app.dataframe if "watermarked share" in frame.value.columns)
    assert coverage.loc[0, "watermarked share"] == 0 and coverage.loc[0, "tokens"] == sum(map(len, texts))


@pytest.mark.model
def test_sweets_gate_leaves_the_low_entropy_tokens_its_detector_does_not_score(lm, tmp_path):
    """A SWEET run of the embedded model: the replay of its entropy gate on the entropies stored at generation marks
    as watermarked the tokens the detector scores, reading the entropies again by teacher forcing."""
    from fwsapp.detection.coverage import coverage_frame, stored_coverage
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.store import Store
    from fwsapp.watermark.entropy_gate import LOW_ENTROPY

    store = Store(tmp_path / "sweet.duckdb")
    run_id = run_generation(RunConfig(task="qa", method="SWEET", n=4, max_new_tokens=32, batch_size=4, seed=3), store, lm)
    found = stored_coverage(store, run_id)
    assert found["tokens"] == 4 * 32 and 0 < found["watermarked"] < found["tokens"]
    assert set(found["not_watermarked"]) == {LOW_ENTROPY}
    # The count reads as a count: "… at or below the threshold 11" read as if 11 were the threshold.
    left = found["tokens"] - found["watermarked"]
    assert coverage_frame(store, [run_id]).loc[0, "not watermarked"] == f"{LOW_ENTROPY}: {left} token{'s' * (left > 1)}"
    scores = store.detections([run_id])
    scored = int(scores[scores.text_kind == "watermarked"].num_tokens_scored.sum())
    assert abs(found["watermarked"] - scored) <= 2  # float32 entropies at the threshold may fall either side
    with pytest.raises(ValueError, match="entropies stored"):
        methods.info("SWEET").token_coverage(methods.info("SWEET").checked_params({}), GeneratedAnswer([1, 2]), {})
