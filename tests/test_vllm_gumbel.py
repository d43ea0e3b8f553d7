"""vLLM's Gumbel watermarks (issue 47), held against vLLM 0.33.0's own `vllm/v1/watermarking` (tests/vllm_oracle.py):
the Philox uniforms bit for bit, the token its sampler picks on given logits, and its detectors' scores, p-values and
tokens scored on a corpus of texts, keys up to 2^64 − 1 and context widths 1 to 16."""
import numpy as np
import pytest
import torch

from fwsapp.watermark.factory import create
from fwsapp.watermark.philox import PhiloxPRF
from fwsapp.watermark.vllm_gumbel import gumbel_choice, processed_logits
from fwsapp.watermark.base import GenerationBatch
from tests.vllm_oracle import vllm_top_k_top_p, vllm_watermarking

KEYS = (0, 42, 2**63 + 5, 2**64 - 1)
WIDTHS = (1, 4, 5, 16)
VOCABULARY = 128256  # Llama 3's: token ids at both ends


@pytest.fixture(scope="module")
def vllm():
    return vllm_watermarking()


def contexts_and_tokens(rng, rows: int, width: int, tokens: int):
    contexts = rng.integers(-1, VOCABULARY, size=(rows, width))
    contexts[0] = -1  # the first position: nothing generated before it
    contexts[1, : width // 2] = -1
    candidates = rng.integers(0, VOCABULARY, size=(rows, tokens))
    candidates[0, :2] = (0, VOCABULARY - 1)[:tokens]
    return contexts, candidates


@pytest.mark.parametrize("key", KEYS)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_philox_uniforms_are_vllms_bit_for_bit(vllm, key, width):
    contexts, tokens = contexts_and_tokens(np.random.default_rng(width), 7, width, 64)
    ours = PhiloxPRF(key).uniform(contexts, tokens)
    theirs = vllm.PhiloxPRF(key).uniform(torch.tensor(contexts), torch.tensor(tokens)).numpy()
    assert ours.dtype == np.float32 and np.array_equal(ours, theirs)


def logits_of(shape: str, rows: int, vocabulary: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, vocabulary, generator=generator)
    if shape == "peaked":  # a confident model: a few tokens far ahead of the rest
        logits[:, :5] += 15
    if shape == "flat":  # every token a candidate
        logits = logits * 0.01
    return logits


@pytest.mark.parametrize("shape", ["normal", "peaked", "flat"])
@pytest.mark.parametrize("sampling", [{}, {"temperature": 0.7, "top_k": 50}, {"top_p": 0.9}, {"temperature": 1.3,
                                                                                            "top_k": 200, "top_p": 0.8}])
def test_the_sampler_picks_vllms_token_on_given_logits(vllm, shape, sampling):
    rng = np.random.default_rng(len(shape))
    for key, width in zip(KEYS, WIDTHS):
        contexts, _ = contexts_and_tokens(rng, 9, width, 1)
        raw = logits_of(shape, 9, 32002, key % 1000 + width)  # not a multiple of 4: the last group is short
        ours = processed_logits(raw, sampling)
        # vLLM's own sampler steps: temperature, then its top-k/top-p masks, then the watermarker's choice.
        scaled = raw.float() / torch.tensor(float(sampling.get("temperature", 1.0)), dtype=torch.float32)
        top_k, top_p = sampling.get("top_k"), sampling.get("top_p")
        theirs = vllm_top_k_top_p()(scaled.clone(), torch.full((9,), top_k) if top_k else None,
                                    torch.full((9,), top_p) if top_p else None)
        assert torch.equal(ours, theirs)
        expected = vllm.GumbelWatermarker(key, width)._sample_watermarked(theirs, torch.tensor(contexts)).token_ids
        assert torch.equal(gumbel_choice(ours, contexts, PhiloxPRF(key)), expected)


@pytest.mark.parametrize("alpha", [0.0, 0.1, 1.0])
def test_the_dual_key_picks_vllms_token_with_each_key(vllm, alpha):
    contexts, _ = contexts_and_tokens(np.random.default_rng(3), 6, 4, 1)
    logits = logits_of("normal", 6, 32000, 3)
    oracle = vllm.DualKeyGumbelWatermarker(2**63 + 5, 4, alpha=alpha)
    ours = create("vLLM-Gumbel-DualKey", 32000, {"key": 2**63 + 5, "alpha": alpha})
    for mine, theirs in zip(ours.keys, (oracle.draft_watermarker, oracle.target_watermarker)):
        expected = theirs._sample_watermarked(logits, torch.tensor(contexts)).token_ids
        assert torch.equal(gumbel_choice(logits, contexts, mine), expected)
    if alpha in (0.0, 1.0):  # one key only: vLLM needs no routing draw
        expected = oracle.sample(logits, torch.tensor(contexts)).token_ids
        processor = ours.generation_kwargs(GenerationBatch(6, 0))["logits_processor"][0]
        assert torch.equal(processor._choice(logits, contexts), expected)


def corpus(rng) -> list[list[int]]:
    pattern = rng.integers(0, VOCABULARY, 7).tolist()
    return [
        rng.integers(0, VOCABULARY, 300).tolist(),
        (pattern * 30)[:200],  # a discharge-note template: the same contexts again and again
        [0, VOCABULARY - 1] * 40,
        rng.integers(0, VOCABULARY, 3).tolist(),  # shorter than the context
        [5],
        [],
    ]


@pytest.mark.parametrize("method, alpha", [("vLLM-Gumbel", None), ("vLLM-Gumbel-DualKey", 0.1),
                                           ("vLLM-Gumbel-DualKey", 0.5), ("vLLM-Gumbel-DualKey", 0.3)])
@pytest.mark.parametrize("deduplicate", ["single_turn", "none"])
def test_the_detectors_give_vllms_score_p_value_and_tokens_scored(vllm, method, alpha, deduplicate):
    texts = corpus(np.random.default_rng(11))
    for key, width in [(key, width) for key in KEYS for width in (1, 4, 16)]:
        params = {"key": key, "context_width": width, "deduplicate_contexts": deduplicate,
                  **({"alpha": alpha} if alpha is not None else {})}
        ours = create(method, VOCABULARY, params)
        dedup = deduplicate != "none"
        oracle = (vllm.GumbelWatermarkDetector(key, width, deduplicate_contexts=dedup) if alpha is None else
                  vllm.DualKeyGumbelWatermarkDetector(key, width, deduplicate_contexts=dedup, alpha=alpha))
        for tokens in texts:
            mine, theirs = ours.detect(tokens), oracle.detect(tokens)
            assert mine.num_tokens_scored == theirs.num_scored_tokens
            if alpha in (None, 0.5):  # a whole shape: vLLM's own series, so a client comparing servers sees no digit differ
                assert (mine.p, mine.statistic) == (theirs.p_value, theirs.score)
            assert mine.p == pytest.approx(theirs.p_value, rel=1e-9, abs=1e-300)
            assert mine.statistic == pytest.approx(theirs.score, rel=1e-12)


def test_a_repeated_context_is_sampled_plainly_exactly_where_the_detector_skips_it(vllm):
    """Generation and detection agree on which contexts repeat: step the processor through a repetitive text and
    compare the rows it leaves unwatermarked with the positions vLLM's detector drops."""
    text = ([11, 12, 13] * 12)[:30]
    processor = create("vLLM-Gumbel", 100, {"context_width": 2}).generation_kwargs(
        GenerationBatch(1, 0, {"do_sample": True}, [[1, 2, 3]]))["logits_processor"][0]
    prompt = torch.tensor([[1, 2, 3]])
    left_plain = []
    for step in range(len(text)):
        scores = torch.randn(1, 100)
        output = processor(torch.cat([prompt, torch.tensor([text[:step]], dtype=torch.long)], dim=1), scores)
        left_plain.append(bool(torch.equal(output, scores)))
    contexts, _ = vllm.GumbelWatermarkDetector(0, 2)._prepare_inputs(text)
    kept = set()
    seen = set()
    for position in range(len(text)):
        context = tuple(([-1, -1] + text)[position:position + 2])
        if context not in seen:
            kept.add(position)
        seen.add(context)
    assert len(kept) == len(contexts)
    assert left_plain == [position not in kept for position in range(len(text))]


def test_greedy_decoding_is_left_unwatermarked_as_vllm_leaves_it():
    processor = create("vLLM-Gumbel", 50, {}).generation_kwargs(
        GenerationBatch(1, 0, {"do_sample": False}, [[1]]))["logits_processor"][0]
    scores = torch.randn(1, 50)
    assert torch.equal(processor(torch.tensor([[1]]), scores), scores)


@pytest.mark.model
@pytest.mark.parametrize("method", ["vLLM-Gumbel", "vLLM-Gumbel-DualKey"])
def test_vllms_own_detector_finds_the_watermark_in_exported_token_ids_with_fwsapps_p_value(vllm, lm, method, tmp_path):
    import json

    import pandas as pd

    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.results.export import export_run
    from fwsapp.store import Store

    store = Store(tmp_path / "vllm.duckdb")
    config = RunConfig(task="qa", method=method, n=2, max_new_tokens=24, batch_size=2, seed=3, params={"key": 2**64 - 7})
    run_id = run_generation(config, store, lm)
    exported = pd.read_csv(export_run(store, run_id, "csv", tmp_path / "run.csv"))
    detector = (vllm.GumbelWatermarkDetector(2**64 - 7, 4) if method == "vLLM-Gumbel"
                else vllm.DualKeyGumbelWatermarkDetector(2**64 - 7, 4, alpha=0.1))
    stored = store.detections([run_id]).set_index(["sample_idx", "text_kind"]).score
    for row in exported.itertuples():
        for kind in ("watermarked", "unwatermarked"):
            theirs = detector.detect(json.loads(getattr(row, f"{kind}_ids")))
            assert theirs.p_value == pytest.approx(stored[(row.sample_idx, kind)], rel=1e-9, abs=1e-300)
            assert theirs.is_watermarked == (kind == "watermarked")
    store.close()
