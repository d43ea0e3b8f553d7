"""Issue 47, item 3: a seeded method's detection with each repeated (context, token) pair scored once, for every method
the registry says a context seeds (one case per method), and the detection option that keeps it beside the run."""
from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom

from fwsapp.detection.deduplication import deduplicated, deduplication_problem, repeated_pairs
from fwsapp.models import EMBEDDED_MODEL
from fwsapp.watermark.factory import create
from fwsapp.watermark.methods import METHODS

CASES = [pytest.param(entry.name, marks=pytest.mark.model) if entry.detector_needs_model({}) else entry.name
         for entry in METHODS]


@pytest.fixture(scope="module")
def tokenizer():
    from fwsapp.models.tokenizers import load_tokenizer

    return load_tokenizer(EMBEDDED_MODEL)


def test_a_pair_repeats_only_where_the_same_context_led_to_the_same_token():
    assert repeated_pairs([], [1, 2, 1, 2, 1, 3], 1).tolist() == [False, False, False, True, True, False]
    assert repeated_pairs([9], [1, 2, 1, 2, 1, 2], 2).tolist() == [False] * 4 + [True] * 2  # (9, 1, 2) is not (2, 1, 2)
    assert repeated_pairs([], [5, 5, 5], 0).tolist() == [False, True, True]  # Unigram: the token alone


@pytest.mark.parametrize("method", CASES)
def test_repeats_after_the_first_add_nothing_to_a_deduplicated_score(method, tokenizer, request):
    """Every method: one a context seeds scores each pair once; any other says why it cannot."""
    info = METHODS[method]
    if info.seeding_context is None or info.evidence is None:
        assert deduplication_problem(method).startswith(info.name)
        return
    assert deduplication_problem(method) is None
    lm = request.getfixturevalue("lm") if info.detector_needs_model({}) else None
    watermark = create(method, tokenizer.vocab_size, {}, lm=lm, tokenizer=tokenizer)
    rng = np.random.default_rng(7)
    distinct = rng.choice(np.arange(300, 9000), 60, replace=False).tolist()
    alone = watermark.detect(distinct)
    assert deduplicated(watermark, alone, distinct) is alone  # nothing repeats: nothing changes
    pattern = rng.choice(np.arange(300, 9000), 12, replace=False).tolist()
    twice, five_times = pattern * 2, pattern * 5
    plain = [watermark.detect(text) for text in (twice, five_times)]
    once = [deduplicated(watermark, found, text) for found, text in zip(plain, (twice, five_times))]
    # Scored as it is, every repeat counts again (SynthID masks repeated contexts itself, as its paper does).
    assert plain[1].num_tokens_scored > plain[0].num_tokens_scored or method == "SynthID"
    assert once[1].num_tokens_scored == once[0].num_tokens_scored <= plain[0].num_tokens_scored
    # A detector that reads the model's entropies gets them in float32 from passes over texts of different lengths, which
    # two threads split differently: equal to about 1e-7 (EWD differed by 2.4e-7 on two threads, by nothing on one).
    assert once[1].score == pytest.approx(once[0].score, rel=1e-9 if lm is None else 1e-6, abs=1e-12)


def test_kgw_deduplicated_is_the_z_of_the_first_occurrence_of_each_pair(tokenizer):
    """lm-watermarking's ignore_repeated_ngrams: the z-test over the text's distinct (previous token, token) pairs."""
    watermark = create("KGW", tokenizer.vocab_size, {"gamma": 0.25})
    text = ([400, 401, 402, 403, 404] * 8) + [500, 501, 502]
    found = watermark.detect(text)
    seen, green, scored = set(), 0, 0
    for position, flag in enumerate(found.token_flags):
        pair = tuple(text[max(0, position - 1):position + 1])
        if pair not in seen and flag >= 0:
            green, scored = green + flag, scored + 1
        seen.add(pair)
    expected = (green - 0.25 * scored) / np.sqrt(scored * 0.25 * 0.75)
    once = deduplicated(watermark, found, text)
    assert once.num_tokens_scored == scored and once.score == pytest.approx(expected)
    # Its p-value as the detector writes one: the exact binomial tail of the count, not the normal tail of the z.
    assert once.p == pytest.approx(binom.sf(green - 1, scored, 0.25), rel=1e-12)


@pytest.mark.parametrize("method", CASES)
def test_a_methods_p_value_taken_from_its_evidence_is_its_detectors(method, tokenizer, request):
    """What a deduplicated detection's p-value is taken from: the evidence form's p over a whole text equals the p the
    method's detector writes, on watermarked and on plain text."""
    info = METHODS[method]
    if info.evidence is None:
        return
    lm = request.getfixturevalue("lm") if info.detector_needs_model({}) else None
    watermark = create(method, tokenizer.vocab_size, {}, lm=lm, tokenizer=tokenizer)
    full = {**info.defaults, **watermark.params}
    rng = np.random.default_rng(3)
    texts = [rng.choice(np.arange(300, 9000), length).tolist() for length in (12, 60, 250)]
    for found in watermark.detect_many([(text, []) for text in texts]):
        if found.p is None or not found.token_flags:
            continue
        assert info.evidence.p_value(info.evidence.arrays(found, full), full) == pytest.approx(found.p, rel=1e-9)


def test_a_deduplicated_detection_set_is_kept_beside_the_plain_one_and_the_calibration_says_which(tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.detection.redetect import set_summaries
    from fwsapp.results.report import calibration_frame, redetection_comparison
    from fwsapp.store import Store

    template = "Take one tablet by mouth twice daily with food. " * 12
    rows = [{"prompt": f"Discharge note {i}:", "watermarked_text": template + f"Patient {i} is stable.",
             "unwatermarked_text": template + f"Follow up in {i + 1} weeks.", "natural_text": "Ref."} for i in range(6)]
    db = tmp_path / "repetitive.duckdb"
    store = Store(db)
    run_id = import_logs(store, method="KGW", model="biomistral", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    store.close()
    for deduplicate in ([], ["--deduplicate"], ["--deduplicate"]):  # the third asks again: nothing changes
        assert main(["detect", "--run", run_id, "--db", str(db), *deduplicate]) == 0
    printed = capsys.readouterr().out
    assert "each (context, token) pair once)" in printed
    store = Store(db)
    sets = store.detection_sets([run_id])
    assert sorted(sets.deduplicate.tolist()) == [False, True]
    scores = store.redetections(list(sets.set_id)).merge(sets[["set_id", "deduplicate"]])
    plain, once = (scores[scores.deduplicate == flag].set_index(["sample_idx", "text_kind"]) for flag in (False, True))
    generated = once.index.get_level_values("text_kind") != "reference"
    assert (once.num_tokens_scored[generated] < plain.num_tokens_scored[generated] / 5).all()  # once, not 12 times
    table = calibration_frame(store.runs(), store.detections([run_id]), sets, store.redetections(list(sets.set_id)))
    store.close()
    assert set(table["repeated pairs"]) == {"each scored", "scored once"}
    # The Detect page's rows of these sets say how each read the texts: a windowed or normalised set of the same
    # detector looked like the plain one there, with other scores.
    for extra in (["--window", "16"], ["--normalize", "homoglyphs"]):
        assert main(["detect", "--run", run_id, "--db", str(db), *extra]) == 0
    store = Store(db)
    rows = redetection_comparison(set_summaries(store, [run_id]))
    store.close()
    assert sorted(zip(rows["texts read"], rows["repeated pairs"])) == [
        ("best 16-token window", "each scored"), ("whole", "each scored"), ("whole", "scored once"),
        ("whole, homoglyphs normalised", "each scored")]
    # Six texts a side: no TPR, at FPR 0 as at 1 % (a rate of sixths read as a finding)
    assert set(rows["TPR@FPR=0"]) == set(rows["TPR@FPR=0.01"]) == {"not enough data (n = 6)"}
    assert main(["detect", "--run", run_id, "--db", str(db), "--method", "EXP-edit", "--deduplicate"]) == 2
    assert "EXP-edit is not seeded by the tokens before each position" in capsys.readouterr().err


def test_a_method_that_deduplicates_itself_says_so_by_its_registered_parameter():
    from fwsapp.detection.deduplication import repeats_scored

    assert "its own deduplicate_contexts parameter" in deduplication_problem("vLLM-Gumbel")
    assert repeats_scored("vLLM-Gumbel", {"deduplicate_contexts": "none"}, False) == "its own deduplicate_contexts=none"
    assert repeats_scored("KGW", {}, False) == "each scored" and repeats_scored("KGW", {}, True) == "scored once"
