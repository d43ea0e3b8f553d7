"""KGW against markllm 0.1.5, the paper's implementation, as a test-only oracle on the CPU (rng=cpu)."""
import pytest
import torch

from fwsapp.watermark.factory import create
from fwsapp.watermark.methods import parse_params
from fwsapp.watermark.evidence import green_z
from fwsapp.watermark.kgw import bias_green

markllm_kgw = pytest.importorskip("markllm.watermark.kgw.kgw", reason="markllm==0.1.5 is the test oracle")

TEXT = (
    "Plantar fasciitis is inflammation of the plantar fascia. Rest, ice, stretching and supportive shoes help "
    "most people, and a steroid injection is sometimes considered when pain lasts for months."
)


@pytest.fixture(scope="module")
def oracle(lm):
    from markllm.utils.transformers_config import TransformersConfig

    config = markllm_kgw.KGWConfig(None, TransformersConfig(model=lm.model, tokenizer=lm.tokenizer, device="cpu"))
    return markllm_kgw.KGWUtils(config)


CPU = {"rng": "cpu"}  # markllm here runs on the CPU, so its lists come from the CPU generator


def test_green_lists_equal_markllm(lm, oracle):
    ours = create("KGW", lm.vocab_size, CPU)
    for previous in [0, 1, 2, 17, 1234, 20000, lm.vocab_size - 1]:
        expected = sorted(oracle.get_greenlist_ids(torch.tensor([5, previous])).tolist())
        assert ours.green_lists.green_ids([5, previous]).tolist() == expected


def test_z_scores_equal_markllm_on_text(lm, oracle):
    ours = create("KGW", lm.vocab_size, CPU)
    for text in (TEXT, TEXT.upper(), "The patient has type 2 diabetes mellitus and hypertension."):
        ids = lm.tokenizer(text, add_special_tokens=False)["input_ids"]
        expected_z, expected_flags = oracle.score_sequence(torch.tensor(ids))
        detection = ours.detect(ids)
        assert detection.z == pytest.approx(expected_z, abs=1e-12)
        assert detection.token_flags == expected_flags


def test_known_z_score():
    assert green_z(48, 64, 0.5) == pytest.approx(4.0)
    assert green_z(16, 64, 0.25) == pytest.approx(0.0)
    assert green_z(0, 0, 0.5) == 0.0


def test_detection_scores_generated_tokens_only_with_prompt_as_context(lm):
    watermark = create("KGW", lm.vocab_size)
    prompt = lm.tokenizer("What is gout?")["input_ids"]
    generated = lm.tokenizer(" Gout is a form of arthritis.", add_special_tokens=False)["input_ids"]
    detection = watermark.detect(generated, prompt)
    assert detection.num_tokens_scored == len(generated)  # the first token is scored, seeded by the prompt
    alone = watermark.detect(generated)
    assert alone.num_tokens_scored == len(generated) - 1
    assert detection.token_flags[1:] == alone.token_flags[1:]


def test_processor_copes_with_logits_wider_than_the_vocabulary(lm):
    watermark = create("KGW", lm.vocab_size, {"delta": 2.0})
    processor = watermark.logits_processor()
    input_ids = torch.tensor([[1, 2, 3], [4, 5, 6]])
    scores = torch.zeros(2, lm.vocab_size + 64)
    biased = processor(input_ids, scores)
    assert biased.shape == scores.shape
    assert torch.all(biased[:, lm.vocab_size:] == 0)
    for row, previous in enumerate([3, 6]):
        green = watermark.green_lists.green_ids([previous])
        assert torch.all(biased[row, green] == 2.0)
        assert biased[row, : lm.vocab_size].sum().item() == pytest.approx(2.0 * len(green))
    narrow = bias_green(torch.zeros(1, 10), torch.ones(1, 20, dtype=torch.bool), 1.0)
    assert narrow.shape == (1, 10)


def test_detection_counts_out_of_vocabulary_tokens_as_red(lm):
    watermark = create("KGW", lm.vocab_size)
    detection = watermark.detect([lm.vocab_size + 5, lm.vocab_size + 6], [1])
    assert detection.token_flags == [0, 0]


def test_params_parse_from_cli_strings():
    assert parse_params("kgw", ["delta=1.5", "gamma=0.25", "hash_key=7"]) == {"delta": 1.5, "gamma": 0.25, "hash_key": 7}
    with pytest.raises(ValueError, match="no parameter 'alpha'"):
        parse_params("KGW", ["alpha=1"])
    with pytest.raises(ValueError, match="KGW: delta='big' must be a number"):
        parse_params("KGW", ["delta=big"])
    assert parse_params("KGW", {"prefix_length": "2.0", "rng": "cpu"}) == {"prefix_length": 2, "rng": "cpu"}
    with pytest.raises(ValueError, match="Unknown watermark method"):
        parse_params("nope", [])
