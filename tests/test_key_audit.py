"""Issue 60, item 4: false positives under the deployer's key, audited on human text under many keys."""
from __future__ import annotations

import html
import json

import numpy as np
import pytest

from fwsapp.detection.key_audit import AUDIT_LEVELS, audit, audit_keys_drawn, audit_problem
from fwsapp.watermark import methods

VOCABULARY = 5000


def human_texts(count: int, length: int = 120, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, VOCABULARY, length).tolist(), []) for _ in range(count)]


def repetitive_texts(count: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """A 12-token sentence said ten times over, as a template or a list repeats itself."""
    rng = np.random.default_rng(seed)
    return [(rng.integers(0, VOCABULARY, 12).tolist() * 10, []) for _ in range(count)]


def test_human_text_keeps_to_the_nominal_rate_under_every_key_and_its_p_values_are_uniform():
    # A key of eight digits: the fingerprint is hex under a salt drawn per install, so a key of three digits ("123")
    # was inside it by chance in about one install of a hundred.
    found = audit("KGW", {"rng": "cpu", "hash_key": 15485863}, human_texts(200), VOCABULARY, keys=4, seed=1)
    assert list(found.table.deduplication.unique()) == ["each repeat scored", "each (context, token) pair once"]
    assert len(found.table) == 8 and (found.table.texts == 200).all()
    assert found.table.key.iloc[0].startswith("deployed (scrypt:") and "15485863" not in found.table.key.iloc[0]
    for row in found.table.to_dict("records"):
        low, high = row["fpr_0.01_interval"]
        assert low <= 0.01 <= high  # the nominal 1 % inside each key's exact interval
        assert row["ks_p"] > 0.001  # uniform p-values
    assert found.bonferroni[0.01] == pytest.approx(0.01 / 8)
    assert set(found.worst.deduplication) == set(found.table.deduplication)


@pytest.mark.parametrize("method", ["KGW", "SynthID"])
def test_a_counts_p_values_are_randomized_at_their_ties_so_short_human_text_reads_uniform(method):
    """A count's p-values fall on steps (24 scored tokens: 25 green counts), and Kolmogorov–Smirnov read the steps as a
    departure: KGW's p-values on 200 random texts of 25 tokens were "not uniform" at 1 % under most keys. The test
    reads them randomized at their ties, uniform without a watermark."""
    found = audit(method, {"rng": "cpu"} if method == "KGW" else {}, human_texts(200, length=25), VOCABULARY, keys=6,
                  seed=4)
    assert (found.table.texts == 200).all()
    assert (found.table.ks_p > 0.01).all(), found.table.ks_p.tolist()


@pytest.mark.parametrize("method", ["KGW", "Unigram", "SynthID", "DiPmark", "EXP"])
def test_the_audit_counts_the_p_values_the_detection_service_answers_with(method):
    """A deployer who calls a text watermarked at the service's p < 1 % meets the audit's false-positive rate: the
    audit reads the same p (a green count's exact binomial tail under 200 tokens; KGW's audit read the normal tail of
    its z, smaller on short texts, and counted false positives the service never makes). SynthID's detector gave
    no p: the service answered none while the audit read the normal tail of its z, so a deployer could not call a text
    at the rate audited; the detector now gives that p (DiPmark's score is on another scale too, its p its own)."""
    from fwsapp.detection.key_audit import p_values
    from fwsapp.detection.verdicts import UNCALIBRATED, verdict_fields
    from fwsapp.watermark.factory import create

    watermark = create(method, VOCABULARY, {})
    texts = human_texts(300, length=30, seed=5)
    found, _ = p_values(watermark, texts, False, np.random.default_rng(0))
    answered = [verdict_fields(watermark, detection, UNCALIBRATED)["p_value"] for detection in watermark.detect_many(texts)]
    assert None not in answered and found.tolist() == pytest.approx(answered, rel=1e-12)


def test_repetitive_text_is_flagged_under_a_key_unless_each_pair_is_scored_once():
    found = audit("KGW", {"rng": "cpu"}, repetitive_texts(200), VOCABULARY, keys=3, seed=2)
    by_setting = found.table.groupby("deduplication")["fpr_0.01"].mean()
    assert by_setting["each repeat scored"] > 0.05  # many times the nominal rate
    assert by_setting["each (context, token) pair once"] < 0.03
    assert found.table.groupby("deduplication").ks_p.max()["each repeat scored"] < 1e-6


def test_vllm_gumbel_is_audited_with_its_own_deduplication_and_a_key_from_the_environment(monkeypatch):
    monkeypatch.setenv("FWSAPP_AUDITED_KEY", "2718281828")
    found = audit("vLLM-Gumbel", {"key": "$FWSAPP_AUDITED_KEY"}, repetitive_texts(120), VOCABULARY, keys=2)
    settings = list(found.table.deduplication.unique())
    assert settings == ["deduplicate_contexts=none", "deduplicate_contexts=single_turn"]
    rates = found.table.groupby("deduplication", sort=False)["fpr_0.01"].mean()
    assert rates.iloc[0] > 0.05 and rates.iloc[1] < 0.05
    assert "2718281828" not in json.dumps(found.table.key.tolist())


def test_the_keys_the_levels_and_what_cannot_be_audited():
    keys = audit_keys_drawn(methods.info("KGW"), 7, 5, seed=3)
    assert keys[0] == 7 and len(set(keys)) == 5 and keys == audit_keys_drawn(methods.info("KGW"), 7, 5, seed=3)
    with pytest.raises(ValueError, match="between 1 and 1000"):
        audit_keys_drawn(methods.info("KGW"), 7, 0, seed=3)
    assert "post-hoc" in audit_problem("LogRank")
    assert audit_problem("SynthID") is None  # standardised from its per-token evidence
    assert AUDIT_LEVELS == (0.01, 0.001, 0.0001)
    with pytest.raises(ValueError, match="no text to audit"):
        audit("KGW", {}, [], VOCABULARY, keys=2)


def test_detect_audit_keys_on_a_runs_references_and_on_a_hospitals_own_notes(tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    db = tmp_path / "audit.duckdb"
    store = Store(db)
    load_examples(store)
    runs = store.runs()
    run_id = runs[runs.model == "biomistral"].run_id.iloc[0]  # Meditron's tokenizer is not shipped
    store.close()
    assert main(["detect", "--run", run_id, "--audit-keys", "2", "--db", str(db)]) == 0
    shown = capsys.readouterr().out
    assert f"200 human texts (the references of {run_id}, mistral-v1) under 2 keys" in shown
    assert "deployed (scrypt:" in shown and "15485863" not in shown and "Bonferroni over the 4 configurations" in shown
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps({"text": f"Patient {i} reports no chest pain; continue metformin 500 mg."}) + "\n"
                             for i in range(30)))
    assert main(["detect", "--run", run_id, "--audit-keys", "2", "--corpus", str(notes), "--db", str(db)]) == 0
    assert f"30 human texts ({notes}, mistral-v1)" in capsys.readouterr().out
    assert main(["detect", "--run", run_id, "--corpus", str(notes), "--db", str(db)]) == 2
    assert "--corpus is the human text of --audit-keys" in capsys.readouterr().err
    # Options the audit does not read are refused, not ignored.
    assert main(["detect", "--run", run_id, "--seed", "3", "--db", str(db)]) == 2
    assert "--seed seeds the keys --audit-keys draws: add --audit-keys K, or drop it." in capsys.readouterr().err
    assert main(["detect", "--run", run_id, "--audit-keys", "2", "--predict", "--db", str(db)]) == 2
    assert "drop --window, --by-length, --predict," in capsys.readouterr().err
    absent = tmp_path / "absent.jsonl"
    assert main(["detect", "--run", run_id, "--audit-keys", "2", "--corpus", str(absent), "--db", str(db)]) == 2
    assert f"{absent}: cannot be read (No such file or directory)" in capsys.readouterr().err
    assert main(["detect", "--run", run_id, "--audit-keys", "5000", "--db", str(db)]) == 2
    assert "between 1 and 1000" in capsys.readouterr().err
    assert main(["detect", "--run", run_id, "--audit-keys", "2", "--seed", "-1", "--db", str(db)]) == 2
    assert "--seed must be a whole number from 0" in capsys.readouterr().err  # numpy's "expected non-negative integer"
    for named, evidence, problem in (("records.csv", ["--evidence"], "names CSV, but --evidence writes JSONL evidence "
                                      "records: name it ….jsonl"),
                                     ("scores.jsonl", [], "names JSONL, but detect writes the scores as CSV: name it …"
                                      ".csv")):
        assert main(["detect", "--run", run_id, *evidence, "--out", str(tmp_path / named), "--db", str(db)]) == 2
        assert problem in capsys.readouterr().err and not (tmp_path / named).exists()


def audited_run(store, n: int, scored: bool = True) -> str:
    """A KGW run (hash key 99) of the embedded model whose n references are human text ("the patient was given
    aspirin ..."), with its texts' scores where `scored`; returns its id."""
    rng = np.random.default_rng(3)
    words = "the patient was given aspirin for pain and fever after surgery with no further".split()
    store.ensure_run("kgw-audit", {}, model="smollm2-135m-instruct", task="qa", method="KGW",
                     params={"rng": "cpu", "hash_key": 99}, seed=1, n=n)
    store.write_batch("kgw-audit", [
        {"sample_idx": index, "prompt": f"q{index}", "reference": " ".join(rng.choice(words, 60)),
         "watermarked_text": "w", "unwatermarked_text": "u"} for index in range(n)], [
        {"sample_idx": index, "text_kind": kind, "detector": "KGW", "score": score, "num_tokens_scored": 40}
        for index in range(n) for kind, score in (("watermarked", 5.0 + index / 10), ("unwatermarked", index / 30))
        if scored])
    return "kgw-audit"


def detect_page():
    from streamlit.testing.v1 import AppTest

    from tests.conftest import PROJECT

    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    return app


def test_the_detect_pages_key_audit_tab_audits_a_runs_key_on_its_references(app_db):
    """A KGW run whose references are human text: the tab's audit is the CLI's table, each FPR with its interval."""
    from fwsapp.store import Store

    store = Store(app_db)
    audited_run(store, 30)
    store.close()
    app = detect_page()
    app.number_input(key="audit-keys").set_value(3)
    app.button(key="audit-start").click().run()
    assert not app.exception and not app.error
    table = next(frame.value for frame in app.dataframe if "FPR@0.01" in frame.value.columns)
    assert len(table) == 6 and set(table.deduplication) == {"each repeat scored", "each (context, token) pair once"}
    assert table.key.iloc[0].startswith("deployed (scrypt:") and (table.texts == 30).all()
    assert all(value.endswith("]") for value in table["FPR@0.01"])  # a rate and its exact interval
    assert any("Bonferroni over the 6 configurations" in text.value for text in app.markdown)


def test_the_key_audit_tab_opens_on_a_run_whose_tokenizer_is_here_and_takes_one_named(app_db):
    """The tab chose the newest keyed run, an imported meditron one whose tokenizer is not shipped, and its Audit button
    failed after the click with no way to name one: it opens on a run it can audit, says at once why the other cannot,
    and audits that one too under a tokenizer named."""
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    store = Store(app_db)
    audited = audited_run(store, 12)
    store.close()
    meditron = imported_qa_db(app_db, n=12)
    app = detect_page()
    assert app.selectbox(key="audit-run").options[0].endswith(meditron)  # newest first
    length_tab = len(app.error)  # the Length tab's word on the runs it cannot score by length
    assert app.selectbox(key="audit-run").value == audited and not app.button(key="audit-start").disabled
    app.selectbox(key="audit-run").set_value(meditron).run()
    assert len(app.error) == length_tab + 1 and "is not on this machine" in app.error[-1].value
    assert app.button(key="audit-start").disabled
    app.text_input(key="audit-tokenizer").set_value("llama-3").run()
    app.number_input(key="audit-keys").set_value(2)
    app.button(key="audit-start").click().run()
    assert not app.exception and len(app.error) == length_tab
    table = next(frame.value for frame in app.dataframe if "FPR@0.01" in frame.value.columns)
    assert (table.texts == 12).all()
    assert any("references, llama-3)" in html.unescape(caption.value) for caption in app.caption)  # what it read


def test_a_parameter_given_to_the_audit_is_set_over_the_runs_own_and_keeps_its_key(tmp_path):
    """`detect --audit-keys K --param gamma=…` audited under the method's defaults with the parameter given: the run's
    key (hash_key 99) was dropped for the default one, so the "deployed" key was not the deployer's."""
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store

    store = Store(tmp_path / "audit.duckdb")
    audited_run(store, 20, scored=False)
    own = pipeline.audit_keys(store, "kgw-audit", None, 2)
    given = pipeline.audit_keys(store, "kgw-audit", None, 2, params={"gamma": 0.5})
    assert given.table.key.iloc[0] == own.table.key.iloc[0] and given.table.key.iloc[0].startswith("deployed (")
    assert given.table["fpr_0.01"].tolist() == own.table["fpr_0.01"].tolist()  # gamma 0.5 is the run's own
    store.close()


def test_the_worst_key_names_every_key_as_bad_as_it_not_the_first_of_them():
    """Where no key called a text watermarked, the summary named the deployed key the worst: the first of a tie."""
    import pandas as pd

    from fwsapp.detection.key_audit import KeyAudit

    rows = [{"key": key, "deduplication": setting, "texts": 200, "false_0.01": false, "fpr_0.01": false / 200,
             "fpr_0.01_interval": (0.0, 0.02)}
            for setting, counts in (("each repeat scored", (0, 0, 0)), ("once", (1, 3, 3)), ("windowed", (0, 2, 0)))
            for key, false in zip(("deployed (scrypt:x)", "drawn #1 (seed 0)", "drawn #2 (seed 0)"), counts)]
    lines = KeyAudit("KGW", 200, pd.DataFrame(rows), {0.01: 0.01 / 9}).summary()
    assert [line.rsplit(", ", 2)[0] for line in lines[:3]] == [  # less the rate and its interval
        "Worst key (each repeat scored): none worse than another (all 3 keys)",
        "Worst key (once): drawn #1 (seed 0), drawn #2 (seed 0) alike",
        "Worst key (windowed): drawn #1 (seed 0)"]


def test_a_level_below_the_smallest_p_value_a_permutation_test_answers_is_said_to_be_unreachable():
    """EXP-edit's permutation test answers no p below 1 / (1 + n_runs): 0.0099 at its 100 null keys. The audit read
    "0.00% [0.00%, 36.94%]" at 0.1 % and 0.01 % and advised a Bonferroni threshold of p < 0.0002, which no text, however
    watermarked, can reach."""
    found = audit("EXP-edit", {"n_runs": 20}, human_texts(6, length=30), VOCABULARY, keys=2)
    assert found.smallest_p == pytest.approx(1 / 21)
    assert (found.written()[[f"FPR@{level:g}" for level in AUDIT_LEVELS]] == "unreachable (p ≥ 0.0476)").all().all()
    said = found.summary()
    assert said[-1] == ("EXP-edit's detector answers no p-value below 0.0476, so no text is called watermarked at "
                        "p < 0.01, p < 0.001, p < 0.0001, p < 0.005, p < 0.0005, p < 5e-05: those rates measure "
                        "nothing (a permutation test reaches them with more null keys)."), said
    kgw = audit("KGW", {"rng": "cpu"}, human_texts(6, length=30), VOCABULARY, keys=2)
    assert kgw.smallest_p == 0 and not any("unreachable" in line for line in kgw.summary())
    assert not kgw.written().map(lambda cell: "unreachable" in str(cell)).any().any()
