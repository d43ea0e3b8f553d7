"""One teacher-forcing pass feeds perplexity, token entropies and the post-hoc detectors."""
import math

import numpy as np
import pytest
import torch

from fwsapp.quality.perplexity import perplexity
from fwsapp.models.teacher_forcing import STATISTICS, spike_entropy, teacher_force

ALL = tuple(STATISTICS)

TEXTS = ["Hypertension is a common cause of stroke.", "Take ibuprofen with food to protect the stomach lining."]


def test_stats_match_a_plain_forward_pass(lm):
    context = lm.tokenizer("Question: what causes stroke?")["input_ids"]
    text = lm.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [(context, text)], ALL)[0]
    with torch.inference_mode():
        logits = lm.model(torch.tensor([context + text])).logits[0].float()
    rows = torch.log_softmax(logits[len(context) - 1:-1], dim=-1)
    expected = rows.gather(1, torch.tensor(text)[:, None]).squeeze(1)
    assert stats["log_prob"] == pytest.approx(expected.numpy(), abs=1e-5)
    assert stats["rank"][0] == int((rows[0] > rows[0, text[0]]).sum()) + 1
    probs = rows.exp()
    assert stats["entropy"] == pytest.approx((-(probs * rows).sum(1)).numpy(), abs=1e-4)
    assert stats["log_prob_square"] == pytest.approx((probs * rows.square()).sum(1).numpy(), rel=1e-4)
    # A statistic with a parameter, asked for alone: only it is computed.
    spike = spike_entropy(0.76)
    alone = teacher_force(lm, [(context, text)], [spike])[0]
    assert list(alone.values) == [spike.name]
    assert alone[spike.name] == pytest.approx((probs / (1 + 0.76 * probs)).sum(1).numpy(), rel=1e-5)


def test_batches_with_padding_give_what_single_texts_give(lm):
    pairs = [(lm.tokenizer("Q:")["input_ids"], lm.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in TEXTS]
    batched = teacher_force(lm, pairs, ALL, batch_size=2)
    single = [teacher_force(lm, [pair], ALL, batch_size=1)[0] for pair in pairs]
    for one, other in zip(batched, single):
        assert one["log_prob"] == pytest.approx(other["log_prob"], abs=1e-4)
        assert one["entropy"] == pytest.approx(other["entropy"], abs=1e-4)


def test_a_text_with_no_context_has_no_distribution_for_its_first_token(lm):
    text = lm.tokenizer(TEXTS[1], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [((), text)], ALL)[0]
    assert len(stats) == len(text) and stats["entropy"][0] == -math.inf and np.isnan(stats["log_prob"][0])
    started = teacher_force(lm, [((), text)], ALL, start_token=lm.tokenizer.eos_token_id)[0]
    assert np.isfinite(started["log_prob"]).all()


def test_perplexity_is_the_exponent_of_the_mean_negative_log_probability(lm):
    prompt, text = lm.tokenizer("Q:")["input_ids"], lm.tokenizer(TEXTS[0], add_special_tokens=False)["input_ids"]
    stats = teacher_force(lm, [(prompt, text)], ALL)[0]
    assert perplexity(lm, [(prompt, text), (prompt, [])]) == [pytest.approx(math.exp(-stats["log_prob"].mean())), None]


def test_windows_score_every_token_once_and_keep_half_a_window_of_context():
    from fwsapp.models.teacher_forcing import windows

    found = windows(0, length=100, first=7, size=16)
    scored = [token for window in found for token in range(window.scored_from, window.end)]
    assert scored == list(range(7, 100))
    assert all(window.width <= 16 for window in found)
    assert all(window.scored_from - window.start >= 8 for window in found[1:])
    assert windows(0, length=10, first=3, size=16) == [type(found[0])(0, 0, 10, 3)]
    long_context = windows(0, length=60, first=50, size=16)  # a prompt longer than the window
    assert long_context[0].start == 50 + 8 - 16 and long_context[0].scored_from == 50


def test_a_text_longer_than_the_window_is_read_in_bounded_windows(lm, monkeypatch):
    import fwsapp.models.teacher_forcing as forcing

    text = lm.tokenizer(" ".join(TEXTS * 4), add_special_tokens=False)["input_ids"]
    context = lm.tokenizer("Q:")["input_ids"]
    whole = teacher_force(lm, [(context, text)], ALL)[0]
    widths = []
    hook = lm.model.base_model.register_forward_hook(lambda module, args, kwargs, output: widths.append(kwargs["input_ids"].shape),
                                                     with_kwargs=True)
    monkeypatch.setattr(forcing, "MAX_WINDOW", 16)
    monkeypatch.setattr(forcing, "BATCH_TOKENS", 32)
    try:
        windowed = teacher_force(lm, [(context, text), (context, text[:5])], ALL, batch_size=8)
    finally:
        hook.remove()
    assert len(windowed[0]) == len(text) and len(windowed[1]) == 5
    assert all(rows * width <= 32 and width <= 16 for rows, width in widths)
    inside_first = 16 - len(context)  # tokens the first window scores with the whole context, as unwindowed
    assert windowed[0]["entropy"][:inside_first] == pytest.approx(whole["entropy"][:inside_first], abs=1e-4)
    assert windowed[1]["log_prob"] == pytest.approx(whole["log_prob"][:5], abs=1e-4)
    # A later token is predicted from its window alone: a plain forward over that window's tokens.
    sequence = context + text
    with torch.inference_mode():
        logits = lm.model(torch.tensor([sequence[len(sequence) - 16:]])).logits[0].float()
    last = torch.log_softmax(logits[-2], dim=-1)[sequence[-1]]
    assert windowed[0]["log_prob"][-1] == pytest.approx(float(last), abs=1e-4)
