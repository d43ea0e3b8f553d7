"""Every method behind the shared interface: oracle equivalence with markllm 0.1.5 where it has the
method, the fast EXP-edit statistic against a plain reference, and DiPmark's unbiasedness."""
import math

import numpy as np
import pytest
import torch

from fwsapp.generate import RunConfig, run_generation
from fwsapp import methods
from fwsapp.methods import POST_HOC, WATERMARKS
from fwsapp.watermark import create
from fwsapp.watermark.dipmark import dip_reweight
from fwsapp.watermark.exp_edit import alignment_costs
from fwsapp.watermark.posthoc import DetectGPT, mask_spans, refill

TEXT = ("Gout is a form of inflammatory arthritis. Uric acid crystals collect in a joint, most often the big toe, "
        "causing sudden severe pain, swelling and redness that can last for days.")


@pytest.fixture(scope="module")
def text_ids(lm):
    return lm.tokenizer(TEXT, add_special_tokens=False)["input_ids"]


def markllm_config(module, config_class, lm):
    from markllm.utils.transformers_config import TransformersConfig

    return config_class(None, TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, device="cpu"))


def test_sweet_equals_markllm(lm, text_ids):
    sweet = pytest.importorskip("markllm.watermark.sweet.sweet")
    oracle = sweet.SWEETUtils(markllm_config(sweet, sweet.SWEETConfig, lm))
    ours = create("SWEET", lm.vocab_size, {"rng": "cpu"}, lm=lm)
    for previous in (0, 17, 1234, lm.vocab_size - 1):
        expected = sorted(oracle.get_greenlist_ids(torch.tensor([3, previous])).tolist())
        assert ours.green_lists.green_ids([3, previous]).tolist() == expected
    entropies = oracle.calculate_entropy(lm.model, torch.tensor(text_ids))
    expected_z, expected_flags, weights = oracle.score_sequence(torch.tensor(text_ids), entropies)
    detection = ours.detect(text_ids)
    assert detection.z == pytest.approx(expected_z, abs=1e-9)
    assert detection.num_tokens_scored == sum(weights[1:])
    assert [flag for flag, weight in zip(expected_flags, weights) if weight == 1] == [
        flag for flag in detection.token_flags if flag >= 0]


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
    fast = alignment_costs(xi[:, tokens], gamma)
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
    # Scored alone, as MarkLLM scores a text: the first token has no prefix, yet counts in N.
    alone = watermark.detect(tokens)
    assert alone.token_flags[0] == -1 and alone.num_tokens_scored == 30
    assert alone.score == pytest.approx((sum(alone.token_flags[1:]) - 0.5 * 30) / math.sqrt(30))


def test_dipmark_green_test_is_markllms_quantile_rule():
    key = create("DIP", 49152).key
    rng = np.random.default_rng(0)
    for _ in range(200):
        context, token = rng.integers(0, 49152, 5).tolist(), int(rng.integers(0, 49152))
        position = int(np.flatnonzero(key.permutation(context).numpy() == token)[0])
        for gamma in (0.25, 0.5, 0.9):
            assert key.is_green(context, token, gamma) == ((position + 1) / 49152 >= gamma)


@pytest.mark.parametrize("method", WATERMARKS)
def test_each_method_generates_and_detects_in_a_run(lm, store, method):
    config = RunConfig(task="qa", method=method, n=2, max_new_tokens=12, batch_size=2, seed=5,
                       params=methods.info(method).test_params)
    run_id = run_generation(config, store, lm)
    rows = store.generations(run_id)
    assert len(rows) == 2 and all(len(ids) == 12 for ids in rows.watermarked_ids)
    scores = store.detections([run_id])
    assert set(scores.text_kind) == {"watermarked", "unwatermarked"} and scores.score.notna().all()


def test_synthid_mean_score_is_a_half_on_unwatermarked_tokens(lm):
    watermark = create("SynthID", lm.vocab_size, lm=lm)
    rng = np.random.default_rng(3)
    detection = watermark.detect(rng.integers(0, lm.vocab_size, 200).tolist(), [1, 2, 3, 4])
    assert abs(detection.score - 0.5) < 0.05 and detection.num_tokens_scored > 150


@pytest.mark.parametrize("method", ["LogRank", "Fast-DetectGPT"])
def test_post_hoc_runs_score_model_text_against_the_reference(lm, store, method):
    from fwsapp.report import build_report

    assert method in POST_HOC
    run_id = run_generation(RunConfig(task="qa", method=method, n=2, max_new_tokens=12, batch_size=2), store, lm)
    rows = store.generations(run_id)
    assert rows.watermarked_text.isna().all() and rows.unwatermarked_text.notna().all()
    scores = store.detections([run_id])
    assert set(scores.text_kind) == {"unwatermarked", "reference"} and np.isfinite(scores.score).all()
    detection = next(run for run in build_report(store)["runs"] if run["run_id"] == run_id)["detection"]
    assert detection["auroc"] is not None


@pytest.mark.parametrize("method, params", [("SWEET", {"rng": "cpu"}), ("EntityKGW", {"rng": "cpu", "entropy_threshold": 1.0}),
                                            ("LogRank", {}), ("Fast-DetectGPT", {})])
def test_batched_detection_gives_each_texts_own_detection(lm, text_ids, method, params):
    # Texts of different lengths pad the batch; with and without a prompt as context.
    prompt = lm.tokenizer("Question: what is gout?")["input_ids"]
    texts = [(text_ids, prompt), (text_ids[:9], ()), (text_ids[5:30], prompt), (text_ids[:1], ()), ([], prompt)]
    watermark = create(method, lm.vocab_size, params, lm=lm)
    for batched, (tokens, context) in zip(watermark.detect_many(texts), texts, strict=True):
        alone = watermark.detect(tokens, context)
        assert batched.token_flags == alone.token_flags
        assert batched.num_tokens_scored == alone.num_tokens_scored
        assert batched.score == pytest.approx(alone.score, abs=1e-4, nan_ok=True)
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
