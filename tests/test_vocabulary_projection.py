"""The few-rows vocabulary projection on CPU: the values `linear` gives, and the answers the plain head gives."""
import pytest
import torch

from fwsapp.models.vocabulary_projection import FEW_ROWS, FewRowsProjection, project_few_rows_fast


@pytest.mark.parametrize("bias", [False, True])
def test_every_row_count_and_shape_gets_the_values_linear_gives(bias):
    torch.manual_seed(0)
    plain = torch.nn.Linear(48, 1000, bias=bias)
    fast = FewRowsProjection(48, 1000, bias=bias)
    fast.load_state_dict(plain.state_dict())
    for rows in range(1, 11):
        for shape in ((rows, 48), (rows, 1, 48), (1, rows, 48)):
            hidden = torch.randn(shape)
            found = fast(hidden)
            assert found.shape == plain(hidden).shape == (*shape[:-1], 1000)
            torch.testing.assert_close(found, plain(hidden), rtol=1e-5, atol=1e-5)
    half = torch.randn(3, 48, dtype=torch.bfloat16)  # another dtype goes through linear itself
    assert torch.equal(fast.to(torch.bfloat16)(half), plain.to(torch.bfloat16)(half))
    one_row = torch.randn(1, 48)  # one row is MKL's gemv either way: linear itself, to the bit
    assert 1 not in FEW_ROWS and torch.equal(fast.float()(one_row), plain.float()(one_row))


def test_a_tied_head_keeps_its_weight_and_another_kind_of_head_is_left_alone():
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=1, tie_word_embeddings=True)
    model = LlamaForCausalLM(config)
    project_few_rows_fast(model)
    assert type(model.lm_head) is FewRowsProjection
    assert model.lm_head.weight is model.get_input_embeddings().weight

    class Other(torch.nn.Module):
        def get_output_embeddings(self):
            return torch.nn.Identity()

    other = Other()
    project_few_rows_fast(other)
    assert type(other.get_output_embeddings()) is torch.nn.Identity


def test_the_embedded_model_on_cpu_answers_greedily_as_with_the_plain_head(lm):
    from fwsapp.generation.generate import generate_batch

    head = lm.model.get_output_embeddings()
    assert type(head) is FewRowsProjection
    prompts = ["What is gout?", "Which drug lowers blood pressure, and how?"]
    answers = {}
    try:
        for kind in (torch.nn.Linear, FewRowsProjection):
            head.__class__ = kind
            answers[kind] = generate_batch(lm, prompts, 12, {"do_sample": False, "min_new_tokens": 12}, seed=0).token_ids
    finally:
        head.__class__ = FewRowsProjection
    assert answers[torch.nn.Linear] == answers[FewRowsProjection]
    assert [len(tokens) for tokens in answers[FewRowsProjection]] == [12, 12]
