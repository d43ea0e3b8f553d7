"""Every plug-in axis has one registry that the CLI, doctor, the pages and the generic tests read: a new plug-in is its
module plus one entry. Each axis's generic checks run once per registered plug-in, and once more on a toy plug-in
registered here, which must also show in the CLI's choices, in doctor and in the page's options."""
import ast
import json
import os
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from fwsapp.watermark import methods
from fwsapp.robustness.attacks import ATTACKS
from fwsapp.judge.registry import JUDGE_BACKENDS
from fwsapp.quality.registry import METRICS
from fwsapp.entities.recognizers import KINDS, RECOGNIZERS, load_recognizer
from tests.conftest import PROJECT
from tests.toy_plugins import TOY_ATTACK, TOY_BACKEND, TOY_METHOD, TOY_METRIC, TOY_RECOGNIZER
from tests.openai_stub import StubServer
from tests.test_watermarks import check_method

APP = str(PROJECT / "app.py")
AXES = {"methods": methods.METHODS, "recognizers": RECOGNIZERS, "judge backends": JUDGE_BACKENDS, "metrics": METRICS,
        "attacks": ATTACKS}


def test_the_registries_import_without_torch_spacy_or_the_openai_sdk():
    code = ("import sys, fwsapp.watermark.methods, fwsapp.entities.recognizers, fwsapp.judge.registry, fwsapp.quality.registry, "
            "fwsapp.robustness.attacks; "
            "print(*(name in sys.modules for name in ('torch', 'transformers', 'spacy', 'openai')))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT, check=True)
    assert result.stdout.split() == ["False"] * 4


def named_strings(tree) -> list[ast.Constant]:
    """The string constants a module compares with, keys a dict by, or lists in a list, tuple or set literal: where
    a hand-written list of plug-ins would be."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += [part for part in (node.left, *node.comparators) if isinstance(part, ast.Constant)]
            found += [element for part in node.comparators if isinstance(part, (ast.List, ast.Tuple, ast.Set))
                      for element in part.elts if isinstance(element, ast.Constant)]
        elif isinstance(node, ast.Dict):
            found += [key for key in node.keys if isinstance(key, ast.Constant)]
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            found += [element for element in node.elts if isinstance(element, ast.Constant)]
    unique = {id(node): node for node in found}
    return sorted((node for node in unique.values() if isinstance(node.value, str)), key=lambda node: (node.lineno, node.col_offset))


@pytest.mark.parametrize("axis", list(AXES))
def test_no_module_outside_a_registry_names_one_of_its_plug_ins(axis):
    names = set(AXES[axis].names())
    own = {"methods": ("watermark",), "recognizers": ("recognizers",),
           "judge backends": ("judge",), "metrics": ("quality",), "attacks": ("attacks",)}[axis]
    # Words that are a plug-in's name and something else too: EntityKGW's lexicon "mesh" (a word list, not the
    # recognizer), Ray's address "local", the judge's "swap" (ask again with A and B swapped).
    homonyms = {"recognizers": {("entity_kgw.py", "mesh"), ("methods.py", "mesh")},
                "judge backends": {("distributed.py", "local")}, "attacks": {("grid.py", "swap")}}.get(axis, set())
    offenders = []
    for path in [*PROJECT.joinpath("fwsapp").rglob("*.py"), *PROJECT.joinpath("pages").glob("*.py"), PROJECT / "app.py"]:
        if path.parent.name in own:
            continue
        offenders += [f"{path.relative_to(PROJECT)}:{node.lineno}: {node.value!r}"
                      for node in named_strings(ast.parse(path.read_text()))
                      if node.value in names and (path.name, node.value) not in homonyms]
    assert offenders == []


def test_the_name_check_sees_comparisons_keys_and_list_literals():
    code = 'a == "KGW"\n{"rouge": 1}\ncolumns = ["simcse", "f1"]\nx in ("typo",)\n"""KGW in a docstring"""\n'
    assert [node.value for node in named_strings(ast.parse(code))] == ["KGW", "rouge", "simcse", "f1", "typo"]


def seen_by_the_cli_doctor_and_grid(command: str, option: str, name: str, steps: str, tmp_path) -> None:
    """A registered plug-in `name` is among `command --option`'s choices, has its line in doctor, and a grid spec with
    these [steps] passes the dry run."""
    from fwsapp.cli import build_parser, main
    from fwsapp.orchestration.doctor import backend_checks
    from tests.conftest import tiny_spec

    parser = build_parser()._subparsers._group_actions[0].choices[command]
    assert name in next(action for action in parser._actions if action.dest == option).choices
    assert any(check.item == name for check in backend_checks())
    spec = tmp_path / "toy.toml"
    spec.write_text(tiny_spec(steps=steps))
    assert main(["grid", str(spec), "--dry-run", "--db", str(tmp_path / "dry.duckdb")]) == 0


def page_on_two_imported_samples(page: str, app_db) -> AppTest:
    from tests.conftest import imported_qa_db

    imported_qa_db(app_db, 2)
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    return app.switch_page(page).run()


# -- watermark methods -------------------------------------------------------------------------------------------------


def test_a_toy_method_is_one_entry_away_from_the_cli_doctor_the_grid_the_page_and_the_generic_test(
        lm, store, app_db, tmp_path, capsys):
    from fwsapp.cli import main
    from fwsapp.orchestration.doctor import backend_checks
    from fwsapp.orchestration.grid import load_spec

    with methods.METHODS.registered(TOY_METHOD):
        check_method("QuarterGreen", lm, store)
        with pytest.raises(SystemExit):
            main(["generate", "--help"])
        assert "QuarterGreen" in capsys.readouterr().out.split("--method METHOD")[1].split("--param")[0]
        assert any(check.topic == "method" and check.item == "QuarterGreen" and check.status == "ok"
                   for check in backend_checks())
        spec = tmp_path / "toy.toml"
        spec.write_text('[grid]\nmodels = ["smollm2-135m-instruct"]\ntasks = ["qa"]\nn = 1\nmax_new_tokens = 4\n\n'
                        '[[method]]\nname = "quartergreen"\nparams = { gamma = [0.25, 0.1] }\n')
        assert [(run.method, run.params["gamma"]) for run in load_spec(spec).runs] == [
            ("QuarterGreen", 0.25), ("QuarterGreen", 0.1)]
        app = page_on_two_imported_samples("pages/generate.py", app_db)
        assert "QuarterGreen" in next(box for box in app.selectbox if box.label == "Watermark").options
        assert not app.exception


# -- disease recognizers ---------------------------------------------------------------------------------------------


def check_recognizer(entry) -> None:
    """What every recognizer does: it finds its kind's example mention (`FactKind.example`), its mentions are spans of
    the text, it records its declared label, and it normalises a mention as its kind declares, every one passing its
    kind's declared rule (`FactKind.mention_rule`) within its bounds (`mention_bounds`). No outcome ("Death") or
    drug-name modifier ("Tumor necrosis" factor) counts as a disease, and no amount is part of a drug's name."""
    recognizer = load_recognizer(entry.name)
    assert recognizer.backend == entry.label()
    assert recognizer.kind == entry.kind
    sentence, mention = KINDS[entry.kind].example
    texts = [sentence, "Death followed. Tumor necrosis factor inhibitors help.", ""]
    found = recognizer.find_many(texts)
    assert len(found) == len(texts) and found[2] == []
    assert mention in [entity.text for entity in found[0]], (entry.name, found[0])
    for text, entities in zip(texts, found):
        assert all(text[entity.start:entity.end] == entity.text for entity in entities)
        assert all(recognizer.concept(entity.text) == KINDS[entry.kind].concept(entity.text) for entity in entities)
        assert all(KINDS[entry.kind].rule()(text, entity.start, entity.end) for entity in entities)
        assert all(KINDS[entry.kind].bounds()(text, entity.start, entity.end) == (entity.start, entity.end)
                   for entity in entities)
    if entry.kind == "disease":
        assert not any(entity.text.lower() in {"death", "tumor necrosis", "tumor"} for entity in found[1])
    if entry.kind == "chemical":  # no amount in a drug's name: the tagger read "lisinopril 10mg" and "IU" as drugs
        dosed = recognizer.find("Start lisinopril 10mg qd, and vitamin D 1000 IU daily.")
        assert [entity.text for entity in dosed if re.search(r"\d|\bIU\b", entity.text)] == []


@pytest.mark.parametrize("name", RECOGNIZERS.available())
def test_each_recognizer(name):
    check_recognizer(RECOGNIZERS[name])


def test_a_toy_recognizer_is_one_entry_away_from_the_cli_doctor_the_page_and_the_generic_test(app_db):
    from fwsapp.cli import build_parser
    from fwsapp.orchestration.doctor import backend_checks

    with RECOGNIZERS.registered(TOY_RECOGNIZER):
        check_recognizer(TOY_RECOGNIZER)
        analyze = build_parser()._subparsers._group_actions[0].choices["analyze"]
        assert "capitals" in next(action for action in analyze._actions if action.dest == "recognizer").choices
        assert any(check.topic == "recognizer" and check.item == "capitals" and check.status == "ok"
                   for check in backend_checks())
        from tests.conftest import imported_qa_db

        imported_qa_db(app_db, 2)
        app = AppTest.from_file(APP, default_timeout=60)
        app.run()
        app.switch_page("pages/entropy.py").run()
        assert f"capitals: {TOY_RECOGNIZER.help}" in app.selectbox(key="analyze-recognizer").options


# -- judge backends ----------------------------------------------------------------------------------------------------
def check_judge_backend(entry, lm, stub, store, monkeypatch) -> None:
    """What every backend does, given what it declares it needs: it judges a stored pair, and the verdict parses."""
    from fwsapp.orchestration import pipeline
    from fwsapp.judge.runner import JudgeSettings
    from tests.test_judge_runner import make_run

    if "key" in entry.needs:  # a keyed API, pointed at the stub as its SDK allows
        monkeypatch.setenv(entry.key_env, "sk-test")
        monkeypatch.setenv("OPENAI_BASE_URL", stub.base_url)
    run_id = make_run(store, n=1)
    backend = pipeline.judge_backend(lambda name: lm, entry.name, entry.default_model or "stub-judge",
                                     stub.base_url if "base_url" in entry.needs else None, 10.0)
    outcome = pipeline.judge(store, [run_id], None, backend=backend, settings=JudgeSettings(concurrency=1))
    assert outcome.judged == 1, outcome.describe(entry.name)
    assert (store.judgments([run_id]).status == "ok").all()


@pytest.mark.parametrize("name", JUDGE_BACKENDS.available())
def test_each_judge_backend(name, lm, store, monkeypatch):
    with StubServer() as stub:
        check_judge_backend(JUDGE_BACKENDS[name], lm, stub, store, monkeypatch)


def test_a_toy_judge_backend_is_one_entry_away_from_the_cli_doctor_the_page_and_the_generic_test(
        app_db, lm, store, monkeypatch, tmp_path):
    with JUDGE_BACKENDS.registered(TOY_BACKEND), StubServer() as stub:
        check_judge_backend(TOY_BACKEND, lm, stub, store, monkeypatch)
        seen_by_the_cli_doctor_and_grid("judge", "backend", "toy", 'judge = { backend = "toy" }', tmp_path)
        app = page_on_two_imported_samples("pages/judge.py", app_db)
        assert TOY_BACKEND.menu_label in app.radio(key="judge-backend").options
        app.radio(key="judge-backend").set_value("toy").run()
        assert not app.exception
        assert app.text_input(key="judge-model-toy").value == "toy-judge"


def test_an_unknown_plug_in_names_the_registered_ones():
    with pytest.raises(ValueError, match="Unknown judge backend 'gpt': choose one of local, openai, compatible"):
        JUDGE_BACKENDS["gpt"]
    assert json.dumps(RECOGNIZERS.names()) == '["trained", "mesh", "scispacy", "chemical-tagger", "drug-lexicon", "doses", "durations"]'


# -- quality metrics ---------------------------------------------------------------------------------------------------
def check_metric(entry, qa_run, lm, tmp_path) -> None:
    """What every metric does: it stores one value per text it declares for each sample of a generated run, under its
    declared names, and a second call computes nothing (the job is resumable and idempotent)."""
    import shutil

    from fwsapp.quality.scoring import QualityResources, score_run
    from fwsapp.store import Store

    source, _, run_id = qa_run
    source.row("CHECKPOINT")
    shutil.copy(source.path, tmp_path / "metric.duckdb")
    store = Store(tmp_path / "metric.duckdb")
    resources = QualityResources(model_loader=lambda name: lm)
    samples = store.count("generations", run_id)
    before = store.metrics([run_id])
    computed = score_run(store, run_id, resources, (entry.name,))
    added = store.metrics([run_id]).merge(before, how="left", indicator=True).query("_merge == 'left_only'")
    assert computed == {entry.name: samples}  # sample × metric values, whatever rows each stores
    for name in entry.stored_names:
        rows = added[added.metric == name]
        assert sorted(rows.text_kind.unique()) == sorted(entry.kinds) and len(rows) == samples * len(entry.kinds)
    assert score_run(store, run_id, resources, (entry.name,)) == {entry.name: 0}
    store.close()


@pytest.mark.parametrize("name", [name for name in METRICS.available() if METRICS[name].by_default])
def test_each_metric(name, qa_run, lm, tmp_path):
    check_metric(METRICS[name], qa_run, lm, tmp_path)


def test_a_toy_metric_is_one_entry_away_from_the_cli_doctor_the_grid_the_page_and_the_generic_test(
        qa_run, lm, tmp_path, app_db):
    with METRICS.registered(TOY_METRIC):
        check_metric(TOY_METRIC, qa_run, lm, tmp_path)
        seen_by_the_cli_doctor_and_grid("score", "metrics", "length_ratio", 'score = ["length_ratio"]', tmp_path)
        app = page_on_two_imported_samples("pages/quality.py", app_db)
        assert "length_ratio: Length ratio" in app.multiselect(key="score-metrics").options
        assert not app.exception
        check_every_results_view_shows_the_toy_column(app, app_db)


def check_every_results_view_shows_the_toy_column(app: AppTest, app_db) -> None:
    """The toy metric's column, read from the registry alone, in the Quality page's table, its CSV and LaTeX, the
    report's tables and the FWS page's aspect choices; lower is better, so its best cell is the smallest."""
    from fwsapp.results.report import build_report
    from fwsapp.results.tables import best_cells, quality_latex, quality_table, render
    from fwsapp.store import Store

    store = Store(app_db)
    report = build_report(store)
    store.close()
    table = quality_table(report, "qa")
    assert "Length ratio" in table.columns and table["Length ratio"].notna().all()  # computed at import
    assert "Length ratio" in table.to_csv(index=False).splitlines()[0]
    assert "Length ratio" in quality_latex(table, "Quality")
    assert "| Length ratio |" in render(report, "markdown").replace("|Length ratio|", "| Length ratio |")
    best = best_cells(pd.DataFrame({"Model": ["m", "m"], "Length ratio": [0.5, 2.0]}))
    assert best["Length ratio"].tolist() == [True, False]
    shown = [frame.value.data if hasattr(frame.value, "data") else frame.value for frame in app.dataframe]
    assert any("Length ratio" in frame.columns for frame in shown)
    app.switch_page("pages/fws.py").run()
    assert "Length ratio" in app.selectbox(key="map-relevance").options
    assert not app.exception


# -- attacks -----------------------------------------------------------------------------------------------------------


def test_a_toy_attack_is_one_entry_away_from_the_cli_doctor_the_page_and_the_generic_tests(app_db, tmp_path):
    from fwsapp.cli import build_parser
    from fwsapp.orchestration.doctor import backend_checks
    from tests.test_attacks import check_seeded

    from fwsapp.robustness.attack_sets import attack_run, measure_changes
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    with ATTACKS.registered(TOY_ATTACK):
        check_seeded("shout")
        # It declares no recognizer, as it reads no mention: it attacks a run, and its survival is still counted.
        run_id = imported_qa_db(tmp_path / "toy.duckdb", 2)
        store = Store(tmp_path / "toy.duckdb")
        set_id = attack_run(store, run_id, "shout")
        assert list(store.attacked_texts([set_id]).text) == ["IT IS W0.", "IT IS W1."]
        class SameEverywhere:  # an encoder stand-in: every text the same unit vector
            def encode(self, texts):
                return np.full((len(texts), 4), 0.5)

        assert measure_changes(store, set_id, SameEverywhere()) == 2
        changes = store.attacked_texts([set_id])
        assert changes.similarity.tolist() == [1.0, 1.0] and changes.mentions_clean.tolist() == [0, 0]
        store.close()
        attack = build_parser()._subparsers._group_actions[0].choices["attack"]
        assert "shout" in next(action for action in attack._actions if action.dest == "attack").choices
        assert any(check.topic == "attack" and check.item == "shout" and check.status == "ok"
                   for check in backend_checks())
        app = page_on_two_imported_samples("pages/robustness.py", app_db)
        assert f"shout: {TOY_ATTACK.help}" in app.selectbox(key="attack-name").options
        assert not app.exception


@pytest.mark.slow  # collects the whole suite again, in another process
def test_toys_registered_at_collection_are_cases_of_every_generic_test_their_siblings_are(request):
    """With the five toys registered before collection, the suite gains exactly their cases: in each axis, the toy is
    one more case of the generic tests that its axis's default plug-in is a case of, and nothing else changes."""
    from tests.conftest import COLLECTED
    from tests.toy_plugins import TOYS

    def collecting(toys: bool) -> subprocess.Popen:
        environment = {**os.environ, "FWSAPP_TOY_PLUGINS": "1" if toys else "0"}
        return subprocess.Popen([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                                cwd=PROJECT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def collected(process: subprocess.Popen) -> set[str]:
        return {line for line in process.communicate(timeout=300)[0].splitlines() if "::" in line}

    toys = collecting(True)
    # This session's own collection where it was the whole suite without toys (as `make test` runs it); else another.
    whole = not request.config.args or request.config.args == [request.config.getini("testpaths")[0]]
    plain = (request.config.stash[COLLECTED] if whole and os.environ.get("FWSAPP_TOY_PLUGINS", "0") != "1"
             else collected(collecting(False)))
    with_toys = collected(toys)
    added = with_toys - plain
    assert plain <= with_toys
    for axis, (registry, toy) in TOYS.items():
        own = {case for case in added if re.search(rf"[\[-]{re.escape(toy.name)}[\]-]", case)}
        assert own, f"no generic test of the {axis} has a case for its toy"
        sibling = registry.default
        assert {case.replace(toy.name, sibling) for case in own} <= plain, axis
        added -= own
    assert added == set()  # every new case is a toy's


DECLARED = [(axis, entry.name, key) for axis, registry in AXES.items() for entry in registry
            if hasattr(entry, "typed_params") for key in entry.params]


@pytest.mark.parametrize("axis, name, key", DECLARED, ids=["-".join(case) for case in DECLARED])
def test_every_parameter_is_typed_one_way_from_text_and_from_values(axis, name, key):
    """One path for parameters (plugins.typed_value): a default written as the command line writes it, or given as
    TOML and JSON give it, is the same typed value; a value of another kind is refused naming the entry and the key."""
    entry = AXES[axis][name]
    default = entry.params[key][0]
    written = str(default).lower() if isinstance(default, bool) else str(default)
    typed = entry.typed_params({key: written})[key]
    assert typed == default and type(typed) is type(default)
    assert entry.typed_params({key: default})[key] == default
    wrong = [1, 2] if isinstance(default, (bool, int, float, str)) else None
    with pytest.raises(ValueError, match=re.escape(f"{entry.name}: ") + r".* must be "):
        entry.typed_params({key: wrong})


@pytest.mark.parametrize("axis, name, key", DECLARED, ids=["-".join(case) for case in DECLARED])
def test_every_parameter_declares_its_meaning_and_valid_values(axis, name, key):
    """The command line's --help, the pages' forms and `doctor` read a parameter's help and range from its entry: the
    post-hoc detectors' thresholds and DetectGPT's seed declared none, so --help listed "threshold=-1.0" alone."""
    spec = AXES[axis][name].params[key][1]
    assert spec is not None and spec.help.strip() and spec.help != key, (name, key)
    assert spec.describe(), (name, key)
