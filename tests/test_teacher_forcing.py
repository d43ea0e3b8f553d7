"""One teacher-forcing pass feeds perplexity, token entropies and the post-hoc detectors."""
import math

import numpy as np
import pytest
import torch

from fwsapp.metrics.perplexity import perplexity
from fwsapp.teacher_forcing import teacher_force

TEXTS = ["Hypertension is a common cause of stroke.", "Take ibuprofen with food to protect the stomach lining."]


def test_stats_match_a_plain_forward_pass(lm):
    context = lm.tokenizer("Question: what causes stroke?")["input_ids"]
    text = lm.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [(context, text)])[0]
    with torch.inference_mode():
        logits = lm.model(torch.tensor([context + text])).logits[0].float()
    rows = torch.log_softmax(logits[len(context) - 1:-1], dim=-1)
    expected = rows.gather(1, torch.tensor(text)[:, None]).squeeze(1)
    assert stats.log_prob == pytest.approx(expected.numpy(), abs=1e-5)
    assert stats.rank[0] == int((rows[0] > rows[0, text[0]]).sum()) + 1
    probs = rows.exp()
    assert stats.entropy == pytest.approx((-(probs * rows).sum(1)).numpy(), abs=1e-4)
    assert stats.log_prob_square == pytest.approx((probs * rows.square()).sum(1).numpy(), rel=1e-4)


def test_batches_with_padding_give_what_single_texts_give(lm):
    pairs = [(lm.tokenizer("Q:")["input_ids"], lm.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in TEXTS]
    batched = teacher_force(lm, pairs, batch_size=2)
    single = [teacher_force(lm, [pair], batch_size=1)[0] for pair in pairs]
    for one, other in zip(batched, single):
        assert one.log_prob == pytest.approx(other.log_prob, abs=1e-4)
        assert one.entropy == pytest.approx(other.entropy, abs=1e-4)


def test_a_text_with_no_context_has_no_distribution_for_its_first_token(lm):
    text = lm.tokenizer(TEXTS[1], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [((), text)])[0]
    assert len(stats) == len(text) and stats.entropy[0] == -math.inf and np.isnan(stats.log_prob[0])
    started = teacher_force(lm, [((), text)], start_token=lm.tokenizer.eos_token_id)[0]
    assert np.isfinite(started.log_prob).all()


def test_perplexity_is_the_exponent_of_the_mean_negative_log_probability(lm):
    prompt, text = lm.tokenizer("Q:")["input_ids"], lm.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [(prompt, text)])[0]
    assert perplexity(lm, [(prompt, text), (prompt, [])]) == [pytest.approx(math.exp(-stats.log_prob.mean())), None]
