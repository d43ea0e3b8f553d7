"""EntityKGW: KGW that spares medical entities, detected from the text alone."""
import numpy as np
import pytest
import torch

from fwsapp.watermark import methods
from fwsapp.models.tokenizers import from_huggingface
from fwsapp.watermark.factory import create
from fwsapp.watermark.entity_kgw import build_trie

TEXT = " Patients with type 2 diabetes mellitus often develop chronic kidney disease; many also take metformin daily."


def ids_of(lm, text):
    return lm.tokenizer(text, add_special_tokens=False)["input_ids"]


def test_a_small_lexicon_spares_names_and_their_starts_but_not_function_words(lm):
    encode = from_huggingface("smollm2", lm.tokenizer).encode_many
    trie = build_trie(["diabetes mellitus", "kidney disease", "andersen disease"], encode, lm.vocab_size)
    tokens = ids_of(lm, " the diabetes mellitus and the kidney disease and andersen disease")
    spared = dict(zip(range(len(tokens)), trie.spared(tokens)))
    words = [lm.tokenizer.decode([token]) for token in tokens]
    flagged = [word for index, word in enumerate(words) if spared[index]]
    # Starts (" diabetes", " kidney") and continuations are spared; " and" and " the" are not, though
    # " and" is the first piece of " andersen": only its continuation is.
    assert flagged[:4] == [" diabetes", " mellitus", " kidney", " disease"]
    assert " the" not in flagged and words.count(" and") == 3 and " and" not in flagged
    assert trie.starts[ids_of(lm, " diabetes")[0]] and not trie.starts[ids_of(lm, " and")[0]]


@pytest.mark.parametrize("method", ["EntityKGW", "EntityKGW-Predict"])
def test_detection_recomputes_the_generators_record(lm, method):
    """EntityKGW's detector from the text alone; EntityKGW-Predict's with the model's start mass, teacher-forced."""
    watermark = create(method, lm.vocab_size, {"rng": "cpu", "delta": 4.0}, lm=lm)
    processor = watermark.logits_processor()
    prompt = lm.tokenizer("Question: how is type 2 diabetes treated? Answer:", return_tensors="pt")
    torch.manual_seed(0)
    output = lm.model.generate(**prompt, logits_processor=[processor], max_new_tokens=40, min_new_tokens=40,
                               do_sample=True, pad_token_id=lm.tokenizer.eos_token_id)
    generated = output[0, prompt["input_ids"].shape[1]:].tolist()
    biased = [step[0] for step in processor.biased_steps]
    from_generator = [not was_biased or bool(watermark.trie.starts[token])
                      for was_biased, token in zip(biased, generated)]
    detection = watermark.detect(generated, prompt["input_ids"][0].tolist())
    assert [flag == -1 for flag in detection.token_flags] == from_generator
    assert detection.num_tokens_scored == from_generator.count(False) > 0
    if method == "EntityKGW-Predict":  # steps spared because a name was likely to start, outside any entry
        inside = [watermark.trie.inside(generated[:position]) for position in range(len(generated))]
        assert any(not was_biased and not within for was_biased, within in zip(biased, inside))


def test_predicting_starts_spares_the_steps_where_a_name_is_likely():
    from fwsapp.watermark.entity_kgw_predicted import start_mass

    starts = np.zeros(6, dtype=bool)
    starts[[1, 4]] = True
    log_probs = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.1, 0.2, 0.1], [0.5, 0.0, 0.5, 0.0, 0.0, 0.0]]))
    assert start_mass(starts).compute(log_probs, None).tolist() == pytest.approx([0.4, 0.0])


def test_a_bare_tokenizer_detects_as_the_model_does(lm):
    tokens = ids_of(lm, TEXT)
    with_model = create("EntityKGW", lm.vocab_size, {"rng": "cpu"}, lm=lm).detect(tokens)
    bare = create("EntityKGW", lm.vocab_size, {"rng": "cpu"}, tokenizer=from_huggingface("other-name", lm.tokenizer))
    assert bare.detect(tokens) == with_model
    assert -1 in with_model.token_flags and with_model.num_tokens_scored < len(tokens)


def test_parameters_are_checked_and_a_lexicon_file_is_read(lm, tmp_path):
    with pytest.raises(ValueError, match="lexicon='nope' is out of range; it must be one of mesh, mesh\\+drugs, or a file"):
        methods.ENTITY_KGW.checked_params({"lexicon": "nope"})
    names = tmp_path / "names.txt"
    names.write_text("metformin\nkidney disease\n")
    watermark = create("EntityKGW", lm.vocab_size, {"rng": "cpu", "lexicon": str(names)}, lm=lm)
    tokens = ids_of(lm, " take metformin for kidney disease")
    assert [flag for flag in watermark.detect(tokens).token_flags].count(-1) >= 3
    names.write_bytes("m\u00e9tformine\n".encode("latin-1"))
    with pytest.raises(ValueError, match=f"lexicon {names}: not UTF-8 text \\(invalid continuation byte\\); save it as "
                                         "UTF-8, one name per line."):
        create("EntityKGW", lm.vocab_size, {"rng": "cpu", "lexicon": str(names)}, lm=lm)
    with pytest.raises(ValueError, match="needs the model"):
        create("EntityKGW", lm.vocab_size, {"entropy_threshold": 0.5}, tokenizer=from_huggingface("t", lm.tokenizer))
    assert methods.ENTITY_KGW.detector_needs_model({"entropy_threshold": 0.5})
    assert not methods.ENTITY_KGW.detector_needs_model({})
    assert methods.canonical_name("ekgw") == methods.canonical_name("entity-kgw") == "EntityKGW"


def test_the_entropy_gate_skips_low_entropy_steps_too(lm):
    tokens = ids_of(lm, TEXT)
    plain = create("EntityKGW", lm.vocab_size, {"rng": "cpu"}, lm=lm).detect(tokens)
    gated = create("EntityKGW", lm.vocab_size, {"rng": "cpu", "entropy_threshold": 2.0}, lm=lm).detect(tokens)
    assert gated.num_tokens_scored < plain.num_tokens_scored
    kept = np.array(gated.token_flags) >= 0
    assert (np.array(plain.token_flags)[kept] == np.array(gated.token_flags)[kept]).all()
