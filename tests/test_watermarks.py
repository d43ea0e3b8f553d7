"""Every method behind the shared interface: oracle equivalence with markllm 0.1.5 where it has the
method, the fast EXP-edit statistic against a plain reference, and DiPmark's unbiasedness."""
import dataclasses
import math

import numpy as np
import pytest
import torch

from fwsapp.generation.generate import run_generation
from fwsapp.generation.run_config import RunConfig
from fwsapp.watermark import methods
from fwsapp.watermark.methods import post_hoc_names, watermark_names
from fwsapp.watermark.factory import create, explain
from fwsapp.watermark.dipmark import dip_reweight
from fwsapp.watermark.edit_alignment import alignment_costs
from fwsapp.watermark.exp_edit import log_complement
from fwsapp.watermark.posthoc import DetectGPT, mask_spans, refill
from tests.paper_shapes import stand_in_filler

TEXT = ("Gout is a form of inflammatory arthritis. Uric acid crystals collect in a joint, most often the big toe, "
        "causing sudden severe pain, swelling and redness that can last for days.")


@pytest.fixture(scope="module")
def text_ids(lm):
    return lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]


def markllm_config(module, config_class, lm):
    from markllm.utils.transformers_config import TransformersConfig

    return config_class(None, TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, device="cpu"))


def assert_same_green_lists(oracle, ours, vocab_size: int) -> None:
    for previous in (0, 17, 1234, vocab_size - 1):
        expected = sorted(oracle.get_greenlist_ids(torch.tensor([3, previous])).tolist())
        assert ours.green_lists.green_ids([3, previous]).tolist() == expected


def test_sweet_equals_markllm(lm, text_ids):
    sweet = pytest.importorskip("markllm.watermark.sweet.sweet")
    oracle = sweet.SWEETUtils(markllm_config(sweet, sweet.SWEETConfig, lm))
    ours = create("SWEET", lm.vocab_size, {"rng": "cpu"}, lm=lm)
    assert_same_green_lists(oracle, ours, lm.vocab_size)
    entropies = oracle.calculate_entropy(lm.model, torch.tensor(text_ids))
    expected_z, expected_flags, weights = oracle.score_sequence(torch.tensor(text_ids), entropies)
    detection = ours.detect(text_ids)
    assert detection.z == pytest.approx(expected_z, abs=1e-9)
    assert detection.num_tokens_scored == sum(weights[1:])
    assert [flag for flag, weight in zip(expected_flags, weights) if weight == 1] == [
        flag for flag in detection.token_flags if flag >= 0]


def test_ewd_equals_markllm(lm, text_ids):
    ewd = pytest.importorskip("markllm.watermark.ewd.ewd")
    oracle = ewd.EWDUtils(markllm_config(ewd, ewd.EWDConfig, lm))
    ours = create("EWD", lm.vocab_size, {"rng": "cpu"}, lm=lm)
    assert_same_green_lists(oracle, ours, lm.vocab_size)
    spikes = oracle.calculate_entropy(lm.model, torch.tensor(text_ids))
    expected_z, expected_flags, expected_weights = oracle.score_sequence(torch.tensor(text_ids), spikes)
    detection = ours.detect(text_ids)
    assert detection.token_flags == expected_flags
    assert detection.token_weights[1:] == pytest.approx(expected_weights[1:], abs=1e-5)
    assert detection.z == pytest.approx(expected_z, abs=1e-4) and detection.num_tokens_scored == len(text_ids) - 1


def test_exp_equals_markllm(lm, text_ids):
    exp = pytest.importorskip("markllm.watermark.exp.exp")
    from markllm.utils.transformers_config import TransformersConfig

    oracle = exp.EXP(None, TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, device="cpu"))
    ours = create("EXP", lm.vocab_size)
    oracle.utils.seed_rng(torch.tensor(text_ids[:6]))
    assert torch.equal(torch.rand(lm.vocab_size, generator=oracle.utils.rng), ours.uniforms.draw(text_ids[:6]))
    detection = ours.detect(text_ids)
    assert detection.p == pytest.approx(oracle.detect_watermark(TEXT)["score"], rel=1e-6)
    assert detection.num_tokens_scored == len(text_ids) - 4 and detection.token_flags[:4] == [-1] * 4
    # Its own sampling: each chosen token is argmax r^(1/p), and a text so chosen is detected.
    processor, context, tokens = ours.logits_processor(), [5, 6, 7, 8], []
    generator = torch.Generator().manual_seed(1)
    for _ in range(30):
        logits = torch.randn(1, lm.vocab_size, generator=generator)
        forced = processor(torch.tensor([context + tokens]), logits)
        probs = torch.softmax(logits, -1)[0]
        expected = int(torch.argmax(ours.uniforms.draw(context + tokens) ** (1 / probs)))
        assert int(forced.argmax()) == expected and int(torch.isfinite(forced).sum()) == 1
        tokens.append(expected)
    assert ours.detect(tokens, context).p < 1e-4 < ours.detect(tokens[::-1], context).p


@pytest.fixture
def markllm_its_edit(monkeypatch):
    """MarkLLM's ITS-Edit module with its Cython alignment (built for Python 3.9) replaced by its transcription."""
    import sys
    import types

    def levenshtein(x, y, gamma=1.0):
        table = np.zeros((len(x) + 1, len(y) + 1), dtype=np.float32)
        table[:, 0], table[0, :] = np.arange(len(x) + 1) * gamma, np.arange(len(y) + 1) * gamma
        for i in range(1, len(x) + 1):
            for j in range(1, len(y) + 1):
                table[i, j] = min(table[i - 1, j] + gamma, table[i, j - 1] + gamma,
                                  table[i - 1, j - 1] + np.float32(abs(np.float32(x[i - 1]) - np.float32(y[j - 1]))))
        return float(table[-1, -1])

    name = "markllm.watermark.its_edit.cython_files.levenshtein"
    monkeypatch.setitem(sys.modules, name, types.SimpleNamespace(levenshtein=levenshtein))
    return pytest.importorskip("markllm.watermark.its_edit.its_edit")


def test_its_edit_equals_markllm(lm, markllm_its_edit, tmp_path):
    import json

    from markllm.utils.transformers_config import TransformersConfig

    settings = {"algorithm_name": "ITSEdit", "pseudo_length": 24, "sequence_length": 200, "n_runs": 6, "key": 42,
                "p_threshold": 0.1, "top_k": 0}
    (tmp_path / "its.json").write_text(json.dumps(settings))
    oracle = markllm_its_edit.ITSEdit(str(tmp_path / "its.json"), TransformersConfig(model=lm.model, tokenizer=lm.tokenizer,
                                                                                     device="cpu"))
    ours = create("ITS-Edit", lm.vocab_size, {"pseudo_length": 24, "n_runs": 6})
    torch.manual_seed(42)
    generator = torch.Generator().manual_seed(int(torch.randint(2**32, (200,))[0]))
    uniforms, permutation = oracle.utils.transform_key_func(generator, 24, lm.vocab_size)
    assert np.array_equal(ours.uniforms, uniforms[:, 0].numpy()) and np.array_equal(ours.permutation, permutation.numpy())
    text = "Gout is a form of arthritis."
    tokens = lm.tokenizer.encode(text)
    assert ours.detect(tokens).p == pytest.approx(oracle.detect_watermark(text)["score"], abs=1e-6)
    # Its own sampling, from shift 3: detected where random tokens are not.
    processor, marked = ours.logits_processor([3]), []
    generator = torch.Generator().manual_seed(2)
    for _ in range(24):
        marked.append(int(processor(torch.zeros(1, len(marked) + 1, dtype=torch.long),
                                    torch.randn(1, lm.vocab_size, generator=generator)).argmax()))
    random_tokens = np.random.default_rng(0).integers(0, lm.vocab_size, 24).tolist()
    assert ours.detect(marked).p == 0.0 and ours.detect(random_tokens).p > 0.1


def test_unbiased_reweighting_leaves_the_expected_distribution_the_models():
    """Hu et al.'s defining property: over keys, the watermarked next-token distribution is the model's."""
    from fwsapp.watermark.unbiased import GAMMA_REWEIGHT, Unbiased

    torch.manual_seed(0)
    vocab, keys = 12, 3000
    logits = torch.randn(vocab) * 2
    probs = torch.softmax(logits, -1)
    permutations = torch.stack([Unbiased(vocab, lm=object(), key=key).key.permutation([1, 2, 3, 4, 5])
                                for key in range(keys)])
    reweighted = torch.softmax(Unbiased.reweight(logits.expand(keys, -1), permutations), -1)
    standard_error = reweighted.std(0) / math.sqrt(keys)
    assert torch.all((reweighted.mean(0) - probs).abs() <= 4 * standard_error + 1e-6)
    assert (reweighted[0] - probs).abs().max() > 0.01 and GAMMA_REWEIGHT == 0.5


def test_unbiased_detects_its_own_tokens_with_the_model(lm, text_ids):
    watermark = create("Unbiased", lm.vocab_size, lm=lm)
    processor, context, tokens = watermark.logits_processor(), lm.tokenizer("Question: what is gout?")["input_ids"], []
    generator = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for _ in range(30):
            logits = lm.model(torch.tensor([context + tokens])).logits[:, -1, :lm.vocab_size]
            probs = torch.softmax(processor(torch.tensor([context + tokens]), logits), -1)
            tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
    marked, plain = watermark.detect(tokens, context), watermark.detect(text_ids, context)
    assert marked.p < watermark.params["p_threshold"] < plain.p
    assert marked.num_tokens_scored == 30 and len(marked.token_values) == 30


def test_morphmark_strength_rises_with_the_green_mass():
    """Wang et al.'s claim: no change below p₀, then a share of the red mass moved to green that rises with it."""
    from fwsapp.watermark.morphmark import morph, strength

    green = torch.tensor([True, True, False, False, False, False])
    moved_shares = []
    for green_mass in np.linspace(0.05, 0.95, 19):
        probs = torch.tensor([green_mass * 0.7, green_mass * 0.3, *([(1 - green_mass) / 4] * 4)])[None, :]
        share = strength(torch.tensor([green_mass]), "exp", 1.3, 0.15)
        morphed = morph(probs, green[None, :], share)
        assert float(morphed.sum()) == pytest.approx(1.0)
        assert float(morphed[0, 0] / morphed[0, 1]) == pytest.approx(7 / 3)  # within green, proportions are kept
        moved_shares.append(float((morphed[0, :2].sum() - green_mass) / (1 - green_mass)))
        if green_mass < 0.15:
            assert moved_shares[-1] == pytest.approx(0.0, abs=1e-7)
    assert all(later >= earlier - 1e-7 for earlier, later in zip(moved_shares, moved_shares[1:]))
    assert moved_shares[3] > 0 and moved_shares[-1] == pytest.approx(1.0)  # all red mass moves at the top


def test_unigram_equals_markllm(lm, text_ids):
    unigram = pytest.importorskip("markllm.watermark.unigram.unigram")
    oracle = unigram.UnigramUtils(markllm_config(unigram, unigram.UnigramConfig, lm))
    ours = create("unigram", lm.vocab_size)
    assert np.array_equal(ours.mask, oracle.mask)
    expected_z, expected_flags = oracle.score_sequence(torch.tensor(text_ids))
    detection = ours.detect(text_ids)
    assert detection.z == pytest.approx(expected_z) and detection.token_flags == expected_flags


def plain_levenshtein(tokens, xi, gamma):
    """MarkLLM's Cython recurrence, transcribed: the reference the fast version must equal."""
    n = len(tokens)
    m = len(xi)
    table = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        for j in range(m + 1):
            if i == 0:
                table[i][j] = j * gamma
            elif j == 0:
                table[i][j] = i * gamma
            else:
                cost = math.log(1 - xi[j - 1][tokens[i - 1]])
                table[i][j] = min(table[i - 1][j] + gamma, table[i][j - 1] + gamma, table[i - 1][j - 1] + cost)
    return table[n][m]


def plain_statistic(tokens, xi, gamma):
    n, k = len(xi), len(tokens)
    return min(plain_levenshtein(tokens, [xi[(j + offset) % n] for offset in range(k)], gamma) for j in range(n))


@pytest.mark.parametrize("gamma", [0.0, 0.4])
def test_fast_exp_edit_statistic_equals_the_plain_reference(gamma):
    rng = np.random.default_rng(1)
    xi = rng.random((13, 30), dtype=np.float32)
    tokens = rng.integers(0, 30, 9)
    fast = alignment_costs(log_complement(xi[:, tokens]), gamma)
    plain = [plain_levenshtein(tokens, [xi[(j + offset) % 13] for offset in range(9)], gamma) for j in range(13)]
    # The same recurrence: equal but for log1p's last bit against math.log (relative 1e-15).
    assert fast == pytest.approx(plain, rel=1e-15, abs=0)
    assert fast.min() == pytest.approx(plain_statistic(tokens, xi, gamma), rel=1e-15, abs=0)


def test_exp_edit_sampling_and_reproducible_p_values(lm):
    watermark = create("EXPEdit", lm.vocab_size, {"n_runs": 30, "pseudo_length": 64})
    processor = watermark.logits_processor([5])
    scores = torch.randn(1, lm.vocab_size)
    forced = processor(torch.zeros(1, 3, dtype=torch.long), scores)
    probs = torch.softmax(scores, -1)[0]
    expected = int(torch.argmax(torch.log(torch.from_numpy(watermark.xi[5])) / probs))
    assert int(forced.argmax()) == expected and torch.isinf(forced).sum() == lm.vocab_size - 1
    # Tokens chosen from ξ itself (shift 5) look watermarked; random tokens do not.
    rng = np.random.default_rng(0)
    marked = [int(np.argmax(np.log(watermark.xi[(5 + i) % 64]) / rng.dirichlet(np.ones(lm.vocab_size)))) for i in range(40)]
    random_tokens = rng.integers(0, lm.vocab_size, 40).tolist()
    first = watermark.detect(marked)
    assert first.p == pytest.approx(1 / 31) and first.score == first.p
    assert watermark.detect(marked).p == first.p  # the same text, the same p-value
    assert watermark.detect(random_tokens).p > 0.05
    assert watermark.score_direction == "lower" and watermark.is_watermarked(first)


def test_dipmark_reweighting_preserves_the_distribution_on_average():
    torch.manual_seed(0)
    vocab, keys = 12, 4000
    logits = torch.randn(vocab) * 2
    probs = torch.softmax(logits, -1)
    permutations = torch.stack([torch.randperm(vocab) for _ in range(keys)])
    reweighted = torch.softmax(dip_reweight(logits.expand(keys, -1), permutations, alpha=0.45), -1)
    assert torch.allclose(reweighted.sum(-1), torch.ones(keys), atol=1e-5)
    # Unbiased: averaged over keys the watermarked distribution is the model's. Tolerance: 4 standard errors.
    standard_error = reweighted.std(0) / math.sqrt(keys)
    assert torch.all((reweighted.mean(0) - probs).abs() <= 4 * standard_error + 1e-6)
    # …while any single key does change it.
    assert (reweighted[0] - probs).abs().max() > 0.01


def test_dipmark_detects_its_own_tokens(lm):
    watermark = create("DIP", lm.vocab_size)
    context = [1, 2, 3, 4, 5]
    tokens, prefix = [], list(context)
    for _ in range(30):  # always the last token of the permutation: maximally green
        token = int(watermark.key.permutation(prefix)[-1])
        tokens.append(token)
        prefix.append(token)
    detection = watermark.detect(tokens, context)
    assert detection.num_tokens_scored == 30 and detection.score == pytest.approx(15 / math.sqrt(30))
    # Scored alone, as MarkLLM scores a text: the first token has no prefix, yet counts in N, as a red token.
    alone = watermark.detect(tokens)
    assert alone.token_flags[0] == 0 and alone.num_tokens_scored == 30
    assert alone.score == pytest.approx((sum(alone.token_flags[1:]) - 0.5 * 30) / math.sqrt(30))


def test_dipmark_green_test_is_markllms_quantile_rule():
    key = create("DIP", 49152).key
    rng = np.random.default_rng(0)
    for _ in range(200):
        context, token = rng.integers(0, 49152, 5).tolist(), int(rng.integers(0, 49152))
        position = int(np.flatnonzero(key.permutation(context).numpy() == token)[0])
        for gamma in (0.25, 0.5, 0.9):
            assert key.is_green(context, token, gamma) == ((position + 1) / 49152 >= gamma)


def check_method(method: str, lm, store) -> None:
    """What every watermark does, checked from its entry alone: it generates two answers in a run (of its entry's
    `science_tokens`, under its `science_params`) and each text gets a score; its watermarked answers out-score its
    unwatermarked ones in its declared direction (a detector whose score has the wrong sign fails here:
    `test_a_detector_whose_score_sign_is_inverted_fails_the_generic_check`); and detecting a text again gives the same
    detection, to the last digit."""
    info = methods.info(method)
    config = RunConfig(task="qa", method=method, n=2, max_new_tokens=info.science_tokens, batch_size=2, seed=5,
                       params={**info.test_params, **info.science_params})
    run_id = run_generation(config, store, lm)
    rows = store.generations(run_id)
    assert len(rows) == 2 and all(len(ids) == info.science_tokens for ids in rows.watermarked_ids)
    scores = store.detections([run_id])
    assert set(scores.text_kind) == {"watermarked", "unwatermarked"} and scores.score.notna().all()
    means = scores.groupby("text_kind").score.mean()
    sign = -1 if info.score_direction == "lower" else 1
    assert sign * means["watermarked"] > sign * means["unwatermarked"], (
        f"{method}'s watermarked answers do not out-score its unwatermarked ones ({info.score_direction} is "
        f"watermarked): {means.to_dict()}")
    run = store.run(run_id)
    twice = [explain(method, run["params"], lm, rows.watermarked_ids.iloc[0], fitted=store.run_fit(run_id))[0]
             for _ in range(2)]
    assert repr(twice[0]) == repr(twice[1]), f"{method}'s detector gave two detections of one text"


@pytest.mark.parametrize("method", watermark_names())
def test_each_method_generates_and_detects_in_a_run(lm, store, method):
    check_method(method, lm, store)


def test_a_detector_whose_score_sign_is_inverted_fails_the_generic_check(lm, store, monkeypatch):
    """The generic check is a check of the science: KGW with its z negated generates and scores as before, and fails."""
    from fwsapp.watermark.kgw import KGW

    honest = KGW.detect_many

    def inverted(self, texts):
        return [dataclasses.replace(found, score=-found.score, z=-found.z) for found in honest(self, texts)]

    monkeypatch.setattr(KGW, "detect_many", inverted)
    with pytest.raises(AssertionError, match="KGW's watermarked answers do not out-score its unwatermarked ones"):
        check_method("KGW", lm, store)


def test_synthid_mean_score_is_a_half_on_unwatermarked_tokens(lm):
    watermark = create("SynthID", lm.vocab_size, lm=lm)
    rng = np.random.default_rng(3)
    detection = watermark.detect(rng.integers(0, lm.vocab_size, 200).tolist(), [1, 2, 3, 4])
    assert abs(detection.score - 0.5) < 0.05 and detection.num_tokens_scored > 150


@pytest.mark.parametrize("method", ["LogRank", "Fast-DetectGPT"])
def test_post_hoc_runs_score_model_text_against_the_reference(lm, store, method):
    from fwsapp.results.report import build_report

    assert method in post_hoc_names()
    run_id = run_generation(RunConfig(task="qa", method=method, n=2, max_new_tokens=12, batch_size=2), store, lm)
    rows = store.generations(run_id)
    assert rows.watermarked_text.isna().all() and rows.unwatermarked_text.notna().all()
    scores = store.detections([run_id])
    assert set(scores.text_kind) == {"unwatermarked", "reference"} and np.isfinite(scores.score).all()
    detection = next(run for run in build_report(store)["runs"] if run["run_id"] == run_id)["detection"]
    assert detection["auroc"] is not None


@pytest.mark.parametrize("method", methods.METHODS.names())
def test_detection_of_a_text_does_not_depend_on_the_batch_it_is_in(lm, text_ids, method, monkeypatch):
    """Texts of different lengths pad a batch, with and without a prompt as context; each text's detection must be
    the one it gets alone (EWD's trial found padding moving near-uniform entropies)."""
    monkeypatch.setattr("fwsapp.watermark.posthoc.load_t5_filler", lambda: stand_in_filler)
    prompt = lm.tokenizer("Question: what is gout?")["input_ids"]
    texts = [(text_ids, prompt), (text_ids[:9], ()), (text_ids[5:30], prompt), (text_ids[:1], ()), ([], prompt)]
    watermark = create(method, lm.vocab_size, methods.info(method).test_params, lm=lm)
    for batched, (tokens, context) in zip(watermark.detect_many(texts), texts, strict=True):
        alone = watermark.detect(tokens, context)
        assert batched.token_flags == alone.token_flags
        assert batched.num_tokens_scored == alone.num_tokens_scored
        assert batched.score == pytest.approx(alone.score, abs=1e-4, nan_ok=True)
        assert batched.token_weights == pytest.approx(alone.token_weights, abs=1e-4)
    assert watermark.detect_many([]) == []


def test_detectgpt_needs_a_mask_filler_and_says_so(lm, monkeypatch):
    monkeypatch.delenv("FWSAPP_DETECTGPT_MASK_MODEL", raising=False)
    with pytest.raises(ValueError, match="needs a mask-filling model"):
        create("DetectGPT", lm.vocab_size, lm=lm)
    masked = mask_spans("one two three four five six seven eight nine ten", 2, 0.3, __import__("random").Random(0))
    assert "<extra_id_0>" in masked
    assert refill("a <extra_id_0> c <extra_id_1>", "<pad><extra_id_0> b<extra_id_1> d</s>") == "a b c d"
    detector = DetectGPT(lm.vocab_size, lm=lm, filler=lambda texts: [t.replace("<extra_id_0>", "x") for t in texts],
                         perturbations=4)
    assert math.isfinite(detector.detect(lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]).score)


def test_synthid_top_k_keeps_candidates_and_marks_its_own_text(lm):
    watermark = create("SynthID", lm.vocab_size, lm=lm)
    processor = watermark.logits_processor()
    scores = torch.randn(2, lm.vocab_size)
    out = processor(torch.randint(0, lm.vocab_size, (2, 6)), scores)
    kept = torch.isfinite(out)
    assert kept.sum(-1).tolist() == [40, 40]
    assert torch.equal(kept, torch.zeros_like(kept).scatter(1, scores.topk(40).indices, True))
    # Tokens chosen by the watermarked tournament score above one half under the unchanged detector.
    context, tokens = [1, 2, 3, 4], []
    processor = watermark.logits_processor()
    generator = torch.Generator().manual_seed(0)
    for _ in range(60):
        ids = torch.tensor([context + tokens])
        logits = torch.randn(1, lm.vocab_size, generator=generator)
        probs = torch.softmax(processor(ids, logits), -1)
        tokens.append(int(torch.multinomial(probs, 1, generator=generator)))
    assert watermark.detect(tokens, context).score > 0.55
