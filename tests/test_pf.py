"""PF (Zhao et al. 2025), the method that shows the detector skeleton: a module that supplies only its keyed choice and
its per-token evidence, over a shared keyed draw and its family's p-value, is a complete method (its generic cases come
from the registry)."""
import inspect

import numpy as np
import torch
from scipy.stats import kstest

from fwsapp.watermark import methods
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.factory import create
from fwsapp.watermark.pf import PF, ZERO_DRAW

VOCAB = 64


def test_pf_takes_the_token_of_largest_p_over_r_under_the_key():
    watermark = create("PF", VOCAB, {"prefix_length": 2})
    processor = watermark.logits_processor()
    logits = torch.randn(3, VOCAB, generator=torch.Generator().manual_seed(1))
    contexts = torch.tensor([[5, 7], [9, 2], [3, 3]])
    chosen = processor(contexts, logits).argmax(dim=-1).tolist()
    for row, context in enumerate(contexts.tolist()):
        r = watermark.uniforms.draw(context)
        p = torch.softmax(logits[row], dim=-1)
        assert chosen[row] == int(torch.argmax(p / torch.where(r == 0, ZERO_DRAW, r)))


def test_without_the_key_its_evidence_is_exponential_and_its_p_values_uniform():
    watermark = create("PF", VOCAB, {"prefix_length": 1})
    rng = np.random.default_rng(0)
    found = [watermark.detect(rng.integers(0, VOCAB, 40).tolist(), [1]) for _ in range(300)]
    assert all(detection.num_tokens_scored == 40 for detection in found)
    assert kstest([detection.p for detection in found], "uniform").pvalue > 0.01
    means = np.mean([detection.statistic / detection.num_tokens_scored for detection in found])
    assert abs(means - 1.0) < 0.05  # Exp(1) per token


def test_the_key_s_own_choices_are_detected_and_another_key_s_are_not():
    watermark = create("PF", VOCAB, {"prefix_length": 1})
    processor = watermark.logits_processor()
    noise = torch.Generator().manual_seed(2)
    tokens = [3]
    for _ in range(30):  # a new, fairly flat distribution at each step, so the text does not cycle through contexts
        logits = 0.5 * torch.randn(1, VOCAB, generator=noise)
        tokens.append(int(processor(torch.tensor([tokens]), logits).argmax()))
    assert watermark.detect(tokens[1:], tokens[:1]).p < 1e-6
    other = create("PF", VOCAB, {"prefix_length": 1, "hash_key": 7})
    assert other.detect(tokens[1:], tokens[:1]).p > 0.01


def test_a_method_on_the_skeleton_writes_only_its_choice_and_its_evidence():
    """Its draw is the shared keyed uniforms', its p-value the exponential family's, its detection the skeleton's."""
    assert issubclass(PF, TokenDetector) and methods.info("PF").implementation == "fwsapp.watermark.pf:PF"
    own = {name for name, member in vars(PF).items() if inspect.isfunction(member) or isinstance(member, staticmethod)}
    assert own == {"keys", "token_evidence"}


def test_a_class_on_the_skeleton_is_refused_when_its_entry_declares_no_seeding_context():
    """The skeleton reads the context width from the entry, as deduplication and evidence records do: an entry that
    forgets it is refused when a class binds to it, naming the field, instead of seeding every draw with no context."""
    import dataclasses

    import pytest

    from fwsapp.watermark.kgw import KGW

    forgetful = dataclasses.replace(methods.KGW, name="Forgetful", seeding_context=None)
    with pytest.raises(TypeError, match="Forgetful: a detector on the skeleton .* declare seeding_context"):
        type("Forgetful", (KGW,), {}, info=forgetful)
