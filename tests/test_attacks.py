"""Robustness (issue 33): every registered attack is seeded, repeatable, leaves protected disease mentions alone and does
nothing at zero strength; the word and character attacks change the share of words they declare; copy-paste places
its spans and entity-swap its names; an attack set is resumable and idempotent, and detection of its texts is
compared with the clean run's negatives."""
import html
import json
import re
import time
import shutil

import numpy as np
import pytest

from fwsapp.orchestration import pipeline
from fwsapp.robustness.attacks import ATTACKS
from fwsapp.robustness.attacks.base import AttackInput, Span, words_of
from fwsapp.robustness.attack_sets import CLEAN as CLEAN_COLUMN
from fwsapp.robustness.attack_sets import attack_run, summaries, words_changed
from fwsapp.results.tables import number_text
from fwsapp.sample_size import MINIMUM

CLEAN = ("Patients with type 2 diabetes and high blood pressure should not skip their medication. It is the kidney "
         "disease that worries doctors most, and asthma does not help. They are told to walk daily and eat less salt, "
         "which lowers the risk of a heart attack in older adults with obesity.")
# The clean text of an attack that reads drug or dose mentions: CLEAN names none.
WITH_DRUGS = CLEAN + " Some take 500 mg of metformin twice daily, or 0.5 g of aspirin."
UNWATERMARKED = ("Diabetes is a long-term condition in which the body cannot use sugar well. People with it are "
                 "asked to exercise, to watch their diet and to take their medicine every day as prescribed.")


def mentions_in(text: str, name: str | None = None) -> tuple[Span, ...]:
    """The mentions attack `name` reads (by its default recognizer: disease, drug or dose), else disease mentions."""
    from fwsapp.entities.recognizers import MODEL_FREE_RECOGNIZER, load_recognizer

    entry = ATTACKS[name] if name else None
    recognizer = entry.recognizer(entry.defaults) if entry and entry.uses_mentions else MODEL_FREE_RECOGNIZER
    return tuple(Span(entity.start, entity.end) for entity in load_recognizer(recognizer).find_many([text])[0])


def clean_text(name: str | None = None) -> str:
    """The clean text attack `name` is tried on: one with drugs and doses for an attack that edits them."""
    return WITH_DRUGS if name and ATTACKS[name].uses_mentions and ATTACKS[name].mentions != "disease" else CLEAN


def sample(index: int = 0, keep: bool = False, name: str | None = None) -> AttackInput:
    text = clean_text(name)
    mentions = mentions_in(text, name)
    return AttackInput(index, text, UNWATERMARKED, "Less salt and more exercise.", mentions if keep else (), mentions,
                       prompt="Question: how should high blood pressure be treated? Answer:")


def attacker(name: str, seed: int = 0, lm=None, **params):
    """The attack with these parameters (an LLM attack's test parameters under them, rewriting with `lm`; a forger
    writing with `lm`, having observed CLEAN as watermarked)."""
    from fwsapp.robustness.attack_sets import rewriting_backend

    entry = ATTACKS[name]
    checked = entry.checked_params({**entry.test_params, **params})
    resources = {"backend": rewriting_backend(checked, lambda model: lm)} if "backend" in entry.needs else {}
    if entry.forges:
        resources = {"adversary": lm, "observed": ([CLEAN], [UNWATERMARKED]), "context_width": 1, "max_new_tokens": 8,
                     "sampling": {"do_sample": True, "min_new_tokens": 8}}
    return entry.load()(checked, seed, resources)


def runs_a_model(name: str) -> bool:
    return bool({"backend", "model"} & set(ATTACKS[name].needs))


@pytest.mark.parametrize("name", ATTACKS.names())
def test_each_attack_declares_what_it_edits_keeps_and_reads(name):
    from fwsapp.robustness.attacks import EDITS, HOST_TEXTS, PROTECTS

    entry = ATTACKS[name]
    assert entry.edits in EDITS
    assert (entry.protects in PROTECTS) == ("keep_entities" in entry.params)
    assert entry.uses_mentions == ("recognizer" in entry.params)  # a recognizer only where the attack reads mentions
    if entry.protects:  # the parameter's help says what it keeps
        assert PROTECTS[entry.protects] in entry.params["keep_entities"][1].help
    if entry.host_text_param:
        assert set(entry.params[entry.host_text_param][1].choices) <= set(HOST_TEXTS)
        assert entry.host_text(entry.defaults) in HOST_TEXTS


@pytest.mark.parametrize("name", ATTACKS.names())
def test_an_attack_loads_a_model_here_only_as_a_forger_or_through_the_local_backend(name):
    """What `attack` reads to refuse --device and --dtype where nothing is loaded."""
    entry = ATTACKS[name]
    assert entry.reads_model(entry.checked_params(entry.test_params)) == runs_a_model(name)
    if "backend" in entry.needs:  # a server rewrites: no model loaded here
        served = {**entry.test_params, "backend": "compatible", "base_url": "http://localhost:8000/v1", "model": "m"}
        assert not entry.reads_model(entry.checked_params(served))


@pytest.mark.parametrize("declaration, problem", [
    ({"edits": "everything"}, "edits='everything' is none of"),
    ({"params": {"keep_entities": (False, None)}}, "keep_entities is implied by `protects`"),
    ({"protects": "sentences"}, "protects='sentences' is none of"),
    ({"params": {"recognizer": ("mesh", None)}}, "it reads no mentions"),
    ({"host_text_param": "into"}, "into must be a parameter whose choices are among"),
    ({"strength": "ratio"}, "its strength 'ratio' is not one of its parameters"),
])
def test_an_inconsistent_attack_declaration_fails_when_it_is_made(declaration, problem):
    from fwsapp.robustness.attacks import AttackPlugIn

    with pytest.raises(ValueError, match=f"The attack 'odd' is declared inconsistently: .*{re.escape(problem)}"):
        AttackPlugIn("odd", "a declaration with a mistake", "tests.test_plugins:Shout", **declaration)


@pytest.mark.parametrize("name", [pytest.param(name, marks=pytest.mark.model) if runs_a_model(name)
                                  else name for name in ATTACKS.available()])
def test_each_attack_is_seeded_repeatable_and_a_sample_is_the_same_in_any_batch(name, request):
    check_seeded(name, request.getfixturevalue("lm") if runs_a_model(name) else None)


def check_seeded(name: str, lm=None) -> None:
    """What every attack does: one seed gives one text per sample, in any batch; an attack that draws at random draws
    other edits under another seed. An LLM attack rewrites with `lm` (the local backend)."""
    first = attacker(name, 3, lm).attack_many([sample(0, name=name), sample(1, name=name)])
    again = attacker(name, 3, lm).attack_many([sample(1, name=name)])
    assert first[1] == again[0]
    assert all(result.text.strip() and result.text != clean_text(name) for result in first)
    if ATTACKS[name].strength:  # random draws: another seed draws other edits
        others = [attacker(name, seed=seed, lm=lm).attack(sample(0, name=name), np.random.default_rng([seed, 0])).text
                  for seed in range(4, 8)]
        assert any(text != first[0].text for text in others)


@pytest.mark.parametrize("name", [entry.name for entry in ATTACKS if entry.strength and not entry.forges])
def test_each_attack_at_zero_strength_leaves_the_text_as_it_is(name):
    entry = ATTACKS[name]
    unchanged = UNWATERMARKED if entry.hosts_the_watermark else clean_text(name)  # copy-paste pastes nothing into its host
    assert attacker(name, **{entry.strength: 0}).attack_many([sample(name=name)])[0].text == " ".join(unchanged.split())


@pytest.mark.parametrize("name", [entry.name for entry in ATTACKS if entry.keeps_entities])
def test_keep_entities_leaves_every_recognised_disease_span_byte_for_byte(name):
    entry = ATTACKS[name]
    strongest = {entry.strength: 1.0} if entry.strength else {}
    item = sample(keep=True)
    assert len(item.protected) >= 4
    attacked = attacker(name, keep_entities=True, **strongest).attack_many([item])[0].text
    position = 0
    for span in item.protected:  # in order, each verbatim
        position = attacked.index(CLEAN[span.start:span.end], position) + 1
    if entry.strength:
        assert attacked != CLEAN


def long_text(words: int = 2000, seed: int = 0) -> str:
    vocabulary = "patients take the medicine daily and doctors treat their pain with care when blood tests show risk"
    return " ".join(np.random.default_rng(seed).choice(vocabulary.split(), words).tolist())


def letters_changed(before: str, after: str) -> float:
    return sum(a != b for a, b in zip(before, after)) / sum(letter.isalpha() for letter in before)


@pytest.mark.parametrize("name, strength, measured, expected", [
    ("word-deletion", 0.3, lambda before, after: words_changed(before, after), lambda r: int(r * 2000) / 2000),
    ("synonym", 0.5, lambda before, after: words_changed(before, after), lambda r: int(r * 2000) / 2000),
    ("typo", 0.1, letters_changed, lambda p: p),
    ("homoglyph", 0.25, letters_changed, lambda r: r * 0.5),  # about half the letters here have a look-alike
    ("misspelling", 0.25, lambda before, after: words_changed(before, after), lambda p: p),
    ("swap", 0.1, lambda before, after: sum(a != b for a, b in zip(before.split(), after.split())) / 2000,
     lambda p: 2 * p / (1 + p)),  # a swapped pair is skipped: swaps ≈ p·n/(1 + p), each moving two words
])
def test_word_and_character_attacks_change_the_declared_share(name, strength, measured, expected):
    text = long_text() if name != "misspelling" else " ".join(np.random.default_rng(0).choice(  # each has misspellings
        "already believe receive available beginning government separate".split(), 2000).tolist())
    entry = ATTACKS[name]
    attacked = attacker(name, **{entry.strength: strength}).attack_many([AttackInput(0, text)])[0].text
    share, wanted = measured(text, attacked), expected(strength)
    tolerance = 4 * np.sqrt(wanted * (1 - wanted) / 2000) + 0.02 * (name in ("homoglyph", "synonym"))
    assert share == pytest.approx(wanted, abs=tolerance)


def test_copy_paste_places_the_declared_spans():
    item = sample()
    result = attacker("copy-paste", spans=3, span_share=0.2).attack_many([item])[0]
    source = " ".join(CLEAN.split())
    length = round(0.2 * len(source.split()))
    assert len(result.spans) == 3 and result.note == ""
    for span in result.spans:
        pasted = result.text[span.start:span.end]
        assert len(pasted.split()) == length and pasted in source
    outside = [word.text for word in words_of(result.text) if not any(s.start <= word.start < s.end for s in result.spans)]
    assert set(outside) <= set(UNWATERMARKED.split())


def test_entity_swap_replaces_k_mentions_with_disease_names_of_other_concepts():
    from fwsapp.robustness.attacks.entity_swap import disease_names
    from fwsapp.entities.recognizers.base import mesh_heading, normalize

    item = sample()
    names = {name.lower() for name in disease_names()}
    originals = {mesh_heading(normalize(CLEAN[span.start:span.end])) for span in item.mentions}
    for seed in range(5):
        result = attacker("entity-swap", seed, k=2).attack_many([item])[0]
        assert len(result.spans) == 2
        for span in result.spans:
            inserted = result.text[span.start:span.end]
            assert inserted.lower() in names and mesh_heading(normalize(inserted)) not in originals
    assert attacker("entity-swap", k=9).attack_many([item])[0].note == \
        f"changed {len(item.mentions)} disease mentions, of the 9 asked for: no more in the text"
    assert attacker("entity-swap", k=1).attack_many([AttackInput(0, "Rest and fluids help.")])[0].note == \
        "nothing changed: no disease mention in the text"  # it read "0 of 1 mentions found"


def test_entity_survival_compares_concepts_so_a_synonym_keeps_a_mention_and_another_disease_is_introduced():
    from fwsapp.entities.recognizers.base import Entity
    from fwsapp.robustness.attack_sets import mention_survival

    def entities(*names):
        return [Entity(name, 0, len(name)) for name in names]

    clean = entities("type 2 diabetes", "heart attack", "asthma", "asthma")
    assert mention_survival(clean, entities("Type 2 diabetes mellitus", "myocardial infarction", "asthma")) == (3, [])
    assert mention_survival(clean, entities("gout", "asthma", "asthma", "Gout")) == (2, ["gout", "gout"])
    assert mention_survival([], entities("asthma")) == (0, ["asthma"])


def test_a_parameter_out_of_range_or_unknown_is_one_line_before_any_work():
    with pytest.raises(ValueError, match=r"ratio=1.5 is out of range; it must be in \[0, 1\]"):
        ATTACKS["word-deletion"].checked_params({"ratio": "1.5"})
    with pytest.raises(ValueError, match="spans='2.5' must be a whole number"):
        ATTACKS["copy-paste"].checked_params({"spans": "2.5"})
    with pytest.raises(ValueError, match="k=1.5 must be a whole number"):
        ATTACKS["entity-swap"].checked_params({"k": 1.5})
    assert ATTACKS["typo"].checked_params({"p": 0})["p"] == 0.0 and ATTACKS["entity-swap"].checked_params(
        {"k": 2.0})["k"] == 2
    with pytest.raises(ValueError, match="word-deletion has no parameter p; its parameters are ratio"):
        ATTACKS["word-deletion"].checked_params({"p": 0.1})
    with pytest.raises(ValueError, match="Unknown attack 'paraphrase-all'"):
        ATTACKS.check("paraphrase-all")


# -- attack sets, detection and what they measure -------------------------------------------------------------------
@pytest.fixture
def run_copy(qa_run, tmp_path):
    from fwsapp.store import Store

    source, _, run_id = qa_run
    source.row("CHECKPOINT")
    shutil.copy(source.path, tmp_path / "attack.duckdb")
    store = Store(tmp_path / "attack.duckdb")
    yield store, run_id
    store.close()


def test_an_attack_is_detected_against_the_clean_negatives_and_a_rerun_adds_nothing(run_copy, lm, monkeypatch):
    store, run_id = run_copy
    sets = pipeline.attack(store, [run_id], lambda name: lm, attack="word-deletion", params={"ratio": "0.3"}, seed=1)
    attacked = [entry for entry in sets if entry.attack_set]
    assert len(attacked) == 1 and attacked[0].attack_set.startswith("atk-")
    texts = store.attacked_texts([attacked[0].attack_set])
    samples = store.count("generations", run_id)
    assert len(texts) == samples and (texts.words_changed > 0.2).all() and (texts.rouge_l < 1).all()
    scores = store.redetections([attacked[0].set_id])
    assert set(scores.text_kind) == {"watermarked"} and len(scores) == samples
    clean_row, row = summaries(store, [run_id])
    assert clean_row["attack_label"] == CLEAN_COLUMN and clean_row["texts"] == samples and clean_row["words_changed"] == 0
    assert row["attack"] == "word-deletion" and row["attack_label"] == "word-deletion (ratio=0.3)"
    assert row["negatives"] == "unwatermarked" and row["texts"] == samples and 0 <= row["auroc"] <= 1
    assert row["mean_score_change"] < 0 and 0 <= row["still_detected"] <= 1
    assert row["words_changed"] == pytest.approx(texts.words_changed.mean())
    similarities = store.attacked_texts([attacked[0].attack_set]).similarity
    assert similarities.between(0.3, 0.999).all() and row["similarity"] == pytest.approx(similarities.mean())
    revision = store.revision()
    with monkeypatch.context() as patched:  # nor loads the encoder, with nothing to measure (4 s of a rerun's 11)
        patched.setattr("fwsapp.models.encoder.load_encoder", lambda *folder: pytest.fail("the encoder was loaded"))
        pipeline.attack(store, [run_id], lambda name: lm, attack="word-deletion", params={"ratio": 0.3}, seed=1)
    assert store.revision() == revision  # a repeated command changes nothing
    assert store.detection_sets([run_id], attacked=False).shape[0] == 1  # the Detect page's sets: the clean one
    from fwsapp.store.migrations import MIGRATIONS

    counts = ["mentions_clean", "mentions_kept", "mentions_introduced"]
    counted = store.attacked_texts([attacked[0].attack_set])[counts]
    assert counted.mentions_clean.sum() > 0 and row["entity_survival"] is not None
    store.row(MIGRATIONS[9])  # schema 10 clears the mentions that schema 9 counted by name
    assert summaries(store, [run_id])[1]["entity_survival"] is None
    pipeline.attack(store, [run_id], lambda name: lm, attack="word-deletion", params={"ratio": 0.3}, seed=1)
    assert store.attacked_texts([attacked[0].attack_set])[counts].equals(counted)  # counted again, by concept


def test_a_zero_strength_attack_is_detected_exactly_as_the_clean_run(run_copy, lm):
    store, run_id = run_copy
    sets = pipeline.attack(store, [run_id], lambda name: lm, attack="synonym", params={"ratio": 0}, seed=0)
    clean, attacked = sets
    mine = store.redetections([attacked.set_id]).set_index("sample_idx").score
    own = store.redetections([clean.set_id]).query("text_kind == 'watermarked'").set_index("sample_idx").score
    assert mine.to_dict() == own.to_dict()
    clean_row, row = summaries(store, [run_id])
    assert row["mean_score_change"] == 0 and row["words_changed"] == 0 and row["entity_survival"] in (1.0, None)
    # The clean column is the same texts detected the same way, so a zero-strength attack reads exactly as it does.
    assert (row["auroc"], row["still_detected"], row["tpr_at_fpr"]) == (
        clean_row["auroc"], clean_row["still_detected"], clean_row["tpr_at_fpr"])


def test_an_attack_is_read_against_the_clean_set_scored_as_it_was_not_a_windowed_or_deduplicated_one(run_copy, lm):
    """A windowed (WinMax) and a deduplicated detection of the run's texts, same method, parameters and tokenizer,
    were taken for the attack's clean set too: their negatives were pooled with the whole texts' (12 negatives of 4
    texts), so the attack's AUROC and the clean baseline were read against other statistics."""
    store, run_id = run_copy
    samples = store.count("generations", run_id)
    pipeline.detect(store, [run_id], lambda name: lm, window=16)
    pipeline.detect(store, [run_id], lambda name: lm, deduplicate=True)
    clean, attacked = pipeline.attack(store, [run_id], lambda name: lm, attack="synonym", params={"ratio": 0}, seed=0)
    pipeline.detect(store, [run_id], lambda name: lm, window=8)  # after the attack too
    clean_row, row = summaries(store, [run_id])
    assert clean_row["set_id"] == clean.set_id and clean_row["negative_texts"] == row["negative_texts"] == samples
    assert (row["auroc"], row["still_detected"], row["tpr_at_fpr"]) == (
        clean_row["auroc"], clean_row["still_detected"], clean_row["tpr_at_fpr"])


def test_a_killed_attack_resumes_with_no_duplicates_and_the_texts_of_an_uninterrupted_one(run_copy, monkeypatch):
    import threading

    store, run_id = run_copy
    monkeypatch.setattr("fwsapp.robustness.attack_sets.WRITE_EVERY", 1)
    cancel = threading.Event()

    def stop_after_the_first(done, total, note=""):
        if done >= 1:
            cancel.set()

    set_id = attack_run(store, run_id, "typo", {"p": 0.1}, 5, stop_after_the_first, cancel)
    assert len(store.attacked_texts([set_id])) == 1
    assert attack_run(store, run_id, "typo", {"p": 0.1}, 5) == set_id
    resumed = store.attacked_texts([set_id])
    assert len(resumed) == store.count("generations", run_id) and resumed.sample_idx.is_unique
    with store.transaction() as cursor:
        cursor.execute("DELETE FROM attacked_texts")
    attack_run(store, run_id, "typo", {"p": 0.1}, 5)
    assert list(store.attacked_texts([set_id]).text) == list(resumed.text)


def test_a_run_deleted_while_it_is_attacked_keeps_no_attacked_text_or_set(run_copy, monkeypatch):
    from fwsapp.store.core import StoreError

    store, run_id = run_copy
    monkeypatch.setattr("fwsapp.robustness.attack_sets.WRITE_EVERY", 1)

    def delete_after_the_first(done, total, note=""):
        if done == 1:
            store.delete_run(run_id)  # as the Report page or another process could

    with pytest.raises(StoreError, match="was deleted while this job ran"):
        attack_run(store, run_id, "typo", {"p": 0.1}, 5, delete_after_the_first)
    for table in ("attacked_texts", "attack_sets", "detection_sets", "redetections"):
        assert store.row(f"SELECT count(*) FROM {table} WHERE run_id = ?", [run_id])[0] == 0, table


def test_homoglyphs_evade_detection_and_the_normaliser_maps_them_back(run_copy, lm):
    store, run_id = run_copy
    plain = pipeline.attack(store, [run_id], lambda name: lm, attack="homoglyph", params={"ratio": 0.5})
    defended = pipeline.attack(store, [run_id], lambda name: lm, attack="homoglyph", params={"ratio": 0.5},
                               normalize="homoglyphs")
    scores = {entry.set_id: store.redetections([entry.set_id]).set_index(["sample_idx", "text_kind"]).score
              for entry in (*plain, *defended)}
    clean_plain, attacked_plain = (scores[entry.set_id] for entry in plain)
    clean_defended, attacked_defended = (scores[entry.set_id] for entry in defended)
    watermarked = clean_plain.xs("watermarked", level="text_kind")
    assert attacked_plain.droplevel("text_kind").mean() < watermarked.mean() - 1
    assert attacked_defended.droplevel("text_kind").to_dict() == clean_defended.xs(
        "watermarked", level="text_kind").to_dict()


def test_a_run_without_watermarked_texts_or_an_unavailable_recognizer_is_refused_with_nothing_stored(run_copy, lm):
    from fwsapp.entities.recognizers import RECOGNIZERS

    store, run_id = run_copy
    for name in set(RECOGNIZERS.names()) - set(RECOGNIZERS.available()):
        with pytest.raises(ValueError, match=f"recognizer '{name}' cannot run here"):
            pipeline.attack(store, [run_id], lambda name: lm, attack="typo", params={"recognizer": name})
    with store.transaction() as cursor:
        cursor.execute("UPDATE generations SET watermarked_text = NULL")
    revision = store.revision()
    with pytest.raises(ValueError, match="has no watermarked texts to attack"):
        pipeline.attack(store, [run_id], lambda name: lm, attack="typo")
    assert store.revision() == revision and store.attack_sets().empty


def test_the_cli_attacks_a_run_and_says_what_is_wrong_in_one_line(run_copy, capsys):
    from fwsapp.cli import main

    store, run_id = run_copy
    db = str(store.path)
    store.close()
    assert main(["attack", "--run", run_id, "--attack", "swap", "--param", "p=0.1", "--db", db]) == 0
    sets, did = capsys.readouterr().out.strip().splitlines()[-2:]
    assert sets.startswith(f"{run_id}: attack set atk-")
    # What it did, not the sets' ids alone: the share still called watermarked, detection against the clean negatives.
    assert re.fullmatch(r"  still called watermarked \d+\.\d% of 4; AUROC \d\.\d{3} against the 4 clean unwatermarked "
                        r"texts \(too few for a TPR at 1% FPR\); words changed \d+\.\d%"
                        r"(; disease mentions kept \d+ of \d+)?", did), did
    assert main(["attack", "--run", run_id, "--attack", "swap", "--param", "p=2", "--db", db]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "p=2.0 is out of range" in error[0]


def test_the_robustness_page_shows_the_table_the_curve_and_each_text_and_launches_an_attack(run_copy, lm, monkeypatch):
    import time

    from streamlit.testing.v1 import AppTest

    from tests.conftest import PROJECT

    store, run_id = run_copy
    for ratio in (0.1, 0.5):
        pipeline.attack(store, [run_id], lambda name: lm, attack="word-deletion", params={"ratio": ratio})
    pipeline.attack(store, [run_id], lambda name: lm, attack="copy-paste", params={"spans": 2})
    pipeline.attack(store, [run_id], lambda name: lm, attack="dose-change")
    pasted, dosed = store.attack_sets().set_index("attack").attack_set_id[["copy-paste", "dose-change"]]
    store.close()
    monkeypatch.setenv("FWSAPP_DB", str(store.path))
    monkeypatch.setitem(MINIMUM, "auroc_ci", 12)  # the caption states the rule the table follows
    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=60)
    app.run()
    app.switch_page("pages/robustness.py").run()
    assert not app.exception
    assert any("interval (from 12 texts a side)" in caption.value for caption in app.caption)
    table = app.dataframe[0].value
    assert list(table.columns) == [CLEAN_COLUMN, "copy-paste (span_share=0.25, spans=2)", "dose-change (k=1)",
                                   "word-deletion (ratio=0.1)", "word-deletion (ratio=0.5)"]  # the clean re-detection
    # first; each attack's strength
    assert " · delta=2 (defaults) · Question answering · " in table.index[0] and " · n=4" in table.index[0]
    from tests.conftest import written_cells

    every = next(frame for frame in app.dataframe if "Run" in frame.value.columns)
    assert not [column for column in every.value.columns if "_" in column]  # headed, not run_id or words_changed
    assert {"Attack", "Words changed", "Similarity to the clean text", "Mentions introduced"} <= set(every.value.columns)
    written = written_cells(every)
    assert written["Words changed"].tolist() == [number_text(value) for value in every.value["Words changed"]]
    app.radio(key="robustness-measure").set_value("Words changed").run()
    changed = app.dataframe[0].value.iloc[0]
    assert float(changed[CLEAN_COLUMN]) == 0
    assert float(changed["word-deletion (ratio=0.1)"]) < float(changed["word-deletion (ratio=0.5)"])
    app.radio(key="robustness-measure").set_value("Still detected (share)").run()
    assert app.dataframe[0].value.iloc[0][CLEAN_COLUMN] == "not enough data (n = 4)"  # the small-sample rule
    assert any("A text can rank above every negative" in caption.value for caption in app.caption)
    assert app.selectbox(key="robustness-curve-attack").options == ["word-deletion"]
    app.selectbox(key="robustness-set").set_value(pasted).run()
    marked = [block.value for block in app.markdown if "background:#b7e4c7" in block.value]
    assert marked and "<script" not in "".join(marked)
    app.selectbox(key="robustness-set").set_value(dosed).run()  # a dose change's mentions are doses, not diseases
    legend = next(block.value for block in app.markdown if "a dose mention" in block.value)
    line = next(caption.value for caption in app.caption if caption.value.startswith("Words changed"))
    assert " · dose mentions kept " in line and "disease" not in legend + line
    # to a tenth of a percent, as `attack` prints it: one dose of a 150-word answer read "Words changed 1%"
    assert re.match(r"Words changed (\d+\.\d%|under 0\.1%) · ", html.unescape(line)), line
    assert any("or the mentions counted (each attack's own: disease, drug or dose)" in caption.value
               for caption in app.caption)  # the table's survival column counts a dose change's doses
    app.selectbox(key="attack-name").set_value("swap").run()
    app.button[0].click().run()  # "Attack and detect": a background job
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "swap" not in app.dataframe[0].value.columns.str.cat():
        time.sleep(1)
        app.run()
    assert "swap" in app.dataframe[0].value.columns.str.cat()


# -- LLM attacks -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [entry.name for entry in ATTACKS if "backend" in entry.needs])
def test_each_llm_attack_rewrites_through_a_compatible_server_and_records_its_prompt_and_model(name, run_copy):
    from tests.openai_stub import StubServer

    store, run_id = run_copy
    with StubServer(default="rewrite") as stub:
        set_id = attack_run(store, run_id, name, {"backend": "compatible", "model": "stub-rewriter",
                                                  "base_url": stub.base_url, "keep_entities": True})
        asked = [request["messages"][-1]["content"] for request in stub.requests if request.get("max_tokens") == 512]
    texts = store.attacked_texts([set_id])
    clean = store.generations(run_id).set_index("sample_idx").watermarked_text
    assert len(texts) == len(clean) and all(" the " not in f" {text.lower()} " for text in texts.text)
    assert all(words_changed(" ".join(clean[row.sample_idx].split()), row.text) > 0 for row in texts.itertuples()
               if " the " in f" {clean[row.sample_idx].lower()} ")
    (entry,) = store.attack_sets().itertuples()
    assert entry.model == "stub-rewriter" and entry.attack == name
    if name == "paraphrase":
        assert '"prompt": "Please rewrite the following text: "' in entry.params
        assert all(question.startswith("Please rewrite the following text:") for question in asked)
    else:
        assert sum("into French" in question for question in asked) == len(clean)
        assert sum("into English" in question for question in asked) == len(clean)
    with_terms = texts[[bool(mentions_in(" ".join(clean[index].split()))) for index in texts.sample_idx]]
    assert (with_terms.note.str.match(r"kept \d+ of \d+ terms verbatim")).all()
    assert any("Keep these terms exactly as they are written:" in question for question in asked) == (len(with_terms) > 0)


def test_the_local_model_rewrites_a_batch_each_row_from_its_own_seed(lm):
    """A row of a left-padded batch is sampled exactly as it is alone, so a resumed attack rewrites as an
    uninterrupted one; another seed samples another text."""
    from fwsapp.judge.backends import LocalBackend

    backend = LocalBackend(loaded=lm)
    short, long = ([{"role": "user", "content": f"Please rewrite the following text: {text}"}]
                   for text in (UNWATERMARKED[:60], CLEAN))
    together = backend.rewrite_many([short, long], 1.0, 12, seeds=[5, 6])
    assert [reply.text for reply in together] == [backend.rewrite(short, 1.0, 12, seed=5).text,
                                                  backend.rewrite(long, 1.0, 12, seed=6).text]
    assert together[0].prompt_tokens < together[1].prompt_tokens
    assert len({backend.rewrite(long, 1.0, 12, seed=seed).text for seed in range(4)}) > 1


def test_an_unreachable_rewriter_is_one_line_and_a_failing_one_keeps_what_it_rewrote(run_copy, capsys):
    from fwsapp.cli import main
    from tests.conftest import free_port
    from tests.openai_stub import StubServer

    store, run_id = run_copy
    revision = store.revision()
    with pytest.raises(RuntimeError, match="does not answer .*nothing was attacked"):
        attack_run(store, run_id, "paraphrase", {"backend": "compatible", "model": "m",
                                                 "base_url": f"http://127.0.0.1:{free_port()}/v1"})
    assert store.revision() == revision and store.attack_sets().empty
    prompts = list(store.generations(run_id).watermarked_text)
    with StubServer(default="rewrite") as stub:
        stub.plan = {prompts[1].split()[0] + " " + prompts[1].split()[1]: ["empty"] * 3}
        params = {"backend": "compatible", "model": "m", "base_url": stub.base_url}
        with pytest.raises(RuntimeError, match="1 of .* texts were not rewritten \\(an empty reply\\).*again"):
            attack_run(store, run_id, "paraphrase", params)
        set_id = store.attack_sets().attack_set_id[0]
        assert len(store.attacked_texts([set_id])) == len(prompts) - 1
        db = str(store.path)
        store.close()
        assert main(["attack", "--run", run_id, "--attack", "paraphrase", "--param", "backend=compatible",
                     "--param", "model=m", "--param", f"base_url={stub.base_url}", "--db", db]) == 0
    from fwsapp.store import Store

    reopened = Store(db)
    assert len(reopened.attacked_texts([set_id])) == len(prompts)
    reopened.close()


@pytest.mark.model  # the grid generates its runs with the embedded model
def test_a_grid_attacks_its_runs_with_a_swept_attack_and_a_bad_parameter_is_one_line(tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.store import Store
    from tests.conftest import tiny_spec

    spec = tmp_path / "attack.toml"
    spec.write_text(tiny_spec(n=2, steps='score = ["rouge"]\nattack = [{ name = "word-deletion", params = { ratio = '
                                         '[0.25, 0.5] } }, { name = "typo", seed = 3 }]'))
    bad = tmp_path / "bad.toml"
    bad.write_text(tiny_spec(steps='attack = [{ name = "typo", params = { p = [0.1, 2] } }]'))
    assert main(["grid", str(bad), "--dry-run", "--db", str(tmp_path / "bad.duckdb")]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and "[steps] attack 1: typo: p=2.0 is out of range" in error[0]
    db = str(tmp_path / "grid.duckdb")
    assert main(["grid", str(spec), "--db", db]) == 0
    said = capsys.readouterr().out
    # Each step says what it did, as its own command does (the grid printed the runs' "done" and the sets' ids alone).
    assert said.count("attack set atk-") == 3 and said.count("  still called watermarked ") == 3
    assert re.search(r"^\w+: computed 2 rouge values$", said, re.MULTILINE), said  # both samples
    store = Store(db, read_only=True)
    sets = store.attack_sets()
    assert sorted(json.loads(params).get("ratio", json.loads(params).get("p")) for params in sets.params) == [
        0.05, 0.25, 0.5]
    assert len([row for row in summaries(store) if row["attack"]]) == 3
    store.close()
    assert main(["grid", str(spec), "--db", db]) == 0  # a rerun adds nothing
    assert re.search(r"^\w+: computed no value; rouge already stored$", capsys.readouterr().out, re.MULTILINE)
    store = Store(db, read_only=True)
    assert len(store.attack_sets()) == 3 and len(store.attacked_texts(list(store.attack_sets().attack_set_id))) == 6
    store.close()


def test_report_json_lists_each_runs_attacks(run_copy, lm, capsys):
    from fwsapp.cli import main

    store, run_id = run_copy
    pipeline.attack(store, [run_id], lambda name: lm, attack="entity-swap", params={"k": 1})
    db = str(store.path)
    store.close()
    assert main(["report", "--format", "json", "--db", db]) == 0
    run = next(entry for entry in json.loads(capsys.readouterr().out)["runs"] if entry["run_id"] == run_id)
    clean, attacked = run["robustness"]
    assert clean["attack_label"] == CLEAN_COLUMN and clean["texts"] == attacked["texts"]
    assert attacked["attack"] == "entity-swap" and attacked["params"]["k"] == 1 and attacked["texts"] > 0
    assert set(attacked["tpr_at_fpr"]) == {"0", "0.01", "0.05"} and attacked["mentions_introduced"] >= 0


@pytest.mark.parametrize("model", ["biomistral", "jsl"])
def test_the_papers_own_7b_texts_are_attacked_and_detected_from_text_with_their_tokenizers(model, tmp_path):
    from fwsapp.store import Store
    from tests.test_redetect import PAPER, import_paper

    if not PAPER.exists():
        pytest.skip("../shared/data/paper is not beside the project")
    store = Store(tmp_path / "paper.duckdb")
    run_id = import_paper(store, model, "qa")
    with store.transaction() as cursor:  # 30 of its 200 samples keep the test short
        for table in ("generations", "detections"):
            cursor.execute(f"DELETE FROM {table} WHERE sample_idx >= 30")
    sets = pipeline.attack(store, [run_id], lambda name: pytest.fail("no model is needed"), attack="word-deletion")
    _, row = summaries(store, [run_id])
    assert sets[1].tokenizer == {"biomistral": "mistral-v1", "jsl": "llama-3"}[model]
    assert row["negatives"] == "unwatermarked" and row["texts"] == 30
    clean = store.redetections([sets[0].set_id])
    published = store.detections([run_id]).merge(clean, on=["sample_idx", "text_kind"], suffixes=("_published", ""))
    assert np.max(np.abs(published.score - published.score_published)) < 1e-6  # the clean set is the paper's
    assert row["mean_score_change"] < -1 and row["auroc"] > 0.9 and 0.25 < row["words_changed"] < 0.35
    store.close()


def test_a_run_whose_tokenizer_cannot_be_loaded_is_refused_before_it_is_attacked(store):
    from tests.conftest import imported_qa_db

    store.close()
    run_id = imported_qa_db(store.path, 2)
    from fwsapp.store import Store

    again = Store(store.path)
    with again.transaction() as cursor:  # a model folder that is not on this machine (no Hub request to wait for)
        cursor.execute("UPDATE runs SET model = '/no/such/model-folder'")
    with pytest.raises(RuntimeError, match="No tokenizer '/no/such/model-folder'"):
        pipeline.attack(again, [run_id], lambda name: None, attack="typo")
    assert again.attack_sets().empty
    again.close()


def test_attack_all_skips_a_run_without_texts_and_says_so(tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.store import Store
    from tests.test_redetect import PAPER, import_paper

    if not PAPER.exists():
        pytest.skip("../shared/data/paper is not beside the project")
    db = tmp_path / "all.duckdb"
    store = Store(db)
    run_id = import_paper(store, "biomistral", "qa")
    with store.transaction() as cursor:  # 10 of its 200 samples keep the test short
        for table in ("generations", "detections"):
            cursor.execute(f"DELETE FROM {table} WHERE sample_idx >= 10")
    store.ensure_run("gen-empty", {"task": "qa"}, model="smollm2", task="qa", method="KGW", params={}, seed=0, n=4)
    store.close()
    assert main(["attack", "--all", "--attack", "typo", "--db", str(db)]) == 0
    captured = capsys.readouterr()
    assert "gen-empty: skipped" in captured.err and f"{run_id}: attack set atk-" in captured.out


@pytest.mark.parametrize("mode", ["endless", "trickle", "object"])
def test_a_rewrite_through_a_hostile_server_ends_within_its_deadline_and_stores_nothing(tmp_path, monkeypatch, mode):
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db
    from tests.openai_stub import StubServer

    monkeypatch.setattr("fwsapp.judge.registry.REQUEST_TIMEOUT_SECONDS", 2.0)
    monkeypatch.setattr("fwsapp.models.server.MAX_RETRY_AFTER", 1.0)
    run_id = imported_qa_db(tmp_path / "hostile.duckdb", 2)
    store = Store(tmp_path / "hostile.duckdb")
    with StubServer(default=mode) as stub:
        started = time.monotonic()
        with pytest.raises(RuntimeError) as refused:
            attack_run(store, run_id, "paraphrase", {"backend": "compatible", "model": "m", "base_url": stub.base_url})
        elapsed = time.monotonic() - started
    assert elapsed < 15 and "\n" not in str(refused.value)
    assert store.attack_sets().empty and store.attacked_texts(["none"]).empty
    store.close()


def test_a_run_with_a_text_too_long_to_measure_is_refused_before_any_work(tmp_path):
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.robustness.attack_sets import MAX_ATTACKED_CHARACTERS
    from fwsapp.store import Store

    store = Store(tmp_path / "long.duckdb")
    rows = [{"prompt": "Q?", "watermarked_text": "word " * (MAX_ATTACKED_CHARACTERS // 4), "unwatermarked_text": "u.",
             "natural_text": "r."}]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa",
                         generations=LogFile("g.json", json.dumps(rows).encode()))
    started = time.monotonic()
    with pytest.raises(ValueError, match="more than the 20,000 an attack measures"):
        attack_run(store, run_id, "word-deletion")
    assert time.monotonic() - started < 5 and store.attack_sets().empty
    store.close()


def test_word_deletion_draws_exactly_or_as_markllm_does_each_word_with_probability_ratio():
    text = long_text()
    exact = attacker("word-deletion", ratio=0.3).attack_many([AttackInput(0, text)])[0].text
    assert len(exact.split()) == 2000 - int(0.3 * 2000)
    lengths = [len(attacker("word-deletion", seed, ratio=0.3, draw="markllm").attack_many(
        [AttackInput(0, text)])[0].text.split()) for seed in range(5)]
    assert len(set(lengths)) > 1  # the share varies from draw to draw
    assert all(abs(kept / 2000 - 0.7) < 4 * np.sqrt(0.21 / 2000) for kept in lengths)
