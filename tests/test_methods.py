"""The method registry: one declaration per method, torch-free, matching the classes that implement them."""
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fwsapp.watermark import methods

ROOT = Path(__file__).resolve().parents[1]


def test_registry_imports_without_torch():
    code = "import sys, fwsapp.watermark.methods; print('torch' in sys.modules, 'transformers' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.split() == ["False", "False"]


def test_every_declared_method_has_its_class_bound_to_its_entry():
    import inspect

    from fwsapp.watermark.base import Watermark
    from fwsapp.watermark.factory import method_class

    for info in methods.METHODS:
        cls = method_class(info.name)
        assert cls.info is info
        assert (cls.name, cls.defaults, cls.param_specs, cls.score_direction, cls.needs_model, cls.post_hoc,
                cls.threshold_param) == (info.name, info.defaults, info.param_specs, info.score_direction,
                                         info.needs_model, info.post_hoc, info.threshold_param)
        assert info.threshold_param in info.params
        assert set(info.sweep_grid) <= set(info.params)
        # A method fitted on a run's references says how (`fit`) and takes the fit back; no other does.
        fits = cls.fit.__func__ is not Watermark.fit.__func__
        assert fits == info.fitted_on_references == ("fitted" in inspect.signature(cls).parameters), info.name


@pytest.mark.parametrize("spelling, name", [("kgw", "KGW"), ("DIP", "DiPmark"), ("expedit", "EXP-edit"),
                                            (" fast-detectgpt ", "Fast-DetectGPT")])
def test_names_and_aliases_resolve(spelling, name):
    assert methods.canonical_name(spelling) == name


def test_unknown_method_names_the_known_ones():
    with pytest.raises(ValueError, match="Unknown watermark method 'Foo': choose one of KGW, SWEET"):
        methods.canonical_name("Foo")


def test_declarations_carry_what_pages_need():
    assert methods.score_label("EXP-edit") == "p" and methods.score_label("SynthID") == "mean g"
    assert methods.score_label("LogRank") == "score" and methods.score_label("KGW") == "z"
    assert methods.detection_kinds("DetectGPT") == ("unwatermarked", "reference")
    assert methods.detection_kinds("KGW") == ("watermarked", "unwatermarked")
    assert methods.sweep_grids()["DiPmark"] == {"alpha": [0.4, 0.45, 0.5]}
    assert methods.EXP_EDIT.is_watermarked(0.1, {}) and not methods.EXP_EDIT.is_watermarked(0.3, {})
    assert methods.KGW.is_watermarked(4.5, {}) and not methods.KGW.is_watermarked(4.5, {"z_threshold": 5.0})
    assert methods.EXP_EDIT.verdict_rule({"p_threshold": 0.05}) == "p < 0.05"


@pytest.mark.parametrize("method", methods.METHODS.names())
def test_a_score_at_the_threshold_is_called_as_the_verdict_rule_says(method):
    """vLLM's detector calls p ≤ threshold watermarked, as MarkLLM's ITS-Edit (whose p moves in steps of 1 / n_runs,
    so a text lands on 0.1 = 50 / 500): fwsapp called such texts unwatermarked. Each method's rule says its sign,
    and a score at the threshold, a hair inside and a hair outside are called as the rule says."""
    entry = methods.info(method)
    threshold = float(entry.defaults[entry.threshold_param])
    rule = entry.verdict_rule({})
    inside = -1 if entry.score_direction == "lower" else 1
    assert entry.is_watermarked(threshold, {}) == any(sign in rule for sign in "≤≥"), rule
    assert entry.is_watermarked(threshold + inside * 1e-9, {}) and not entry.is_watermarked(threshold - inside * 1e-9, {})


def test_the_reference_detectors_decide_ties_as_fwsapp_does():
    """MarkLLM's ITS-Edit `pval <= p_threshold`, its EXP-edit `p_val < p_threshold`, vLLM's `p_value <= threshold`."""
    assert methods.ITS_EDIT.is_watermarked(50 / 500, {}) and methods.ITS_EDIT.verdict_rule({}) == "p ≤ 0.1"
    assert not methods.EXP_EDIT.is_watermarked(0.2, {})
    assert methods.VLLM_GUMBEL.is_watermarked(0.01, {}) and methods.VLLM_GUMBEL.verdict_rule({}) == "p ≤ 0.01"
    assert not methods.KGW.is_watermarked(4.0, {})  # MarkLLM's z_score > z_threshold


def test_no_module_outside_the_registry_special_cases_a_method_by_name():
    names = methods.METHODS.names()
    offenders = []
    for path in [*ROOT.joinpath("fwsapp").rglob("*.py"), *ROOT.joinpath("pages").glob("*.py")]:
        if path.parent.name == "watermark" or path.name == "methods.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if any(f'== "{name}"' in line or f'"{name}":' in line or f'in ("{name}"' in line for name in names):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


@pytest.mark.parametrize("method, change, named", [
    ("KGW", {"score_direction": "lower"}, "score_label='z' needs score_direction='higher'"),  # a z read the wrong way
    ("EXP", {"score_direction": "higher"}, "score_label='p' needs score_direction='lower'"),
    ("KGW", {"score_direction": "up"}, "score_direction='up'"),
    ("KGW", {"threshold_param": "p_threshold"}, "threshold_param='p_threshold' is not one of its params"),
    ("EXP", {"params": {**methods.EXP.params, "p_threshold": (4.0, None)}}, "p_threshold's default 4.0 is no p-value"),
    ("SynthID", {"standard_score": True}, "standard_score=True promises a z or a p-value"),
    ("KGW", {"strength_param": "alpha"}, "strength_param='alpha'"),
    ("vLLM-Gumbel", {"deduplication_param": "dedup"}, "deduplication_param='dedup'"),
    ("vLLM-Gumbel", {"seeding_context": methods.tokens_before("context_width")}, "seeding_context and keyed_draw.context"),
    ("KGW", {"keyed_draw": None}, "declares its keyed_draw"),
    ("LogRank", {"strength_param": "threshold"}, "strength_param is declared, and a post-hoc detector"),
    ("EXP", {"expected_evidence": methods.GREEN_LIST}, "expected_evidence predicts a z"),
    ("MorphMark", {"expected_evidence": methods.GREEN_LIST}, "expected_evidence reads delta"),
    ("KGW", {"null_keys_param": "z_threshold"}, "null_keys_param='z_threshold' counts a p-value's null keys"),
    ("EXP-edit", {"null_keys_param": "runs"}, "null_keys_param='runs' is not one of its params"),
])
def test_a_declaration_whose_fields_disagree_is_refused_naming_the_field(method, change, named):
    """Direction, threshold, strength, seeding context, keyed draw and expected evidence are one story: an entry that
    tells two is refused when it is declared (a frozen entry's `replace` declares it again), the field named."""
    import dataclasses
    import re

    with pytest.raises(ValueError, match=re.escape(named)):
        dataclasses.replace(methods.info(method), **change)


def test_every_registered_declaration_is_consistent():
    assert {name: methods.info(name).declaration_problems() for name in methods.METHODS.names()} == {
        name: [] for name in methods.METHODS.names()}


def test_a_p_value_that_counts_null_keys_reads_below_its_step_where_it_is_zero():
    """ITS-Edit's p is MarkLLM's k / n_runs: 5 of 8 watermarked answers of a run read p = 0, and every page wrote them
    "< 1e-300", an underflow. Its 0 is one below the step 1 / n_runs; other p-values (EXP-edit's (k + 1) / (n + 1), a
    normal tail) keep theirs."""
    from fwsapp.ui.render import score_text, scores_written

    assert methods.p_resolution("ITS-Edit", '{"n_runs": 500}') == 0.002 and methods.p_resolution("ITS-Edit", {}) == 0.002
    assert methods.p_resolution("EXP-edit", {}) is None and methods.p_resolution("an imported detector", {}) is None
    assert [name for name in methods.METHODS.names() if methods.info(name).null_keys_param] == ["ITS-Edit"]
    assert score_text(0.0, "p", 0.002) == "< 0.002" and score_text(0.004, "p", 0.002) == "0.004"
    assert score_text(0.0, "p") == "< 1e-300" and score_text(0.0, "z", 0.002) == "0.000"
    table = scores_written(pd.DataFrame({"score": [0.0, 0.0]}), {"score": "p"}, [0.002, None])
    assert table.score.tolist() == ["< 0.002", "< 1e-300"]
