"""The example data on every page, offline: BioMistral's runs, whose tokenizer ships, are scored by length and attacked
from their text; Meditron's, whose tokenizer (Llama 2's) does not ship, are refused at once, with why."""
import pytest
from streamlit.testing.v1 import AppTest

from tests.conftest import PROJECT

APP = str(PROJECT / "app.py")


def shown(elements) -> str:
    """What the page's messages say, as read: stored text is shown inert (escaped, with word joiners)."""
    import html

    return " ".join(html.unescape(element.value).replace("\u2060", "") for element in elements)


@pytest.mark.slow  # detects 400 example texts again from their text
def test_the_example_data_is_scored_by_length_and_attacked_offline(store, monkeypatch):
    from fwsapp.detection.length import run_curves
    from fwsapp.orchestration import pipeline
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.robustness.attack_sets import summaries

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    load_examples(store)
    runs = store.runs().set_index("run_id")
    qa = runs[(runs.model == "biomistral") & (runs.task == "qa")].index[0]
    no_model = lambda name: pytest.fail("no model is needed")  # noqa: E731
    pipeline.lengths(store, [qa], no_model)
    curves = run_curves(store, qa)
    assert curves is not None and len(curves.positives) == 200
    pipeline.attack(store, [qa], no_model, attack="word-deletion", measure=False)
    clean, attacked = summaries(store, [qa])
    assert clean["texts"] == attacked["texts"] == 200 and attacked["auroc"] < clean["auroc"]


def test_a_run_whose_tokenizer_is_not_here_is_refused_at_once_on_the_length_tab_and_the_robustness_form(app_db):
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.store import Store

    store = Store(app_db)
    load_examples(store)
    runs = store.runs()
    store.close()
    meditron = runs[runs.model == "meditron"].run_id.tolist()
    app = AppTest.from_file(APP, default_timeout=60)
    app.run()
    app.switch_page("pages/detect.py").run()
    app.multiselect(key="detect-runs").set_value(runs.run_id.tolist()).run()
    # The tab scores the other runs: each meditron run is left out with a warning, not a red error as if it failed.
    warnings = shown(app.warning)
    assert all(f"{run_id}: the tokenizer 'epfl-llm/meditron-7b' is not on this machine" in warnings
               for run_id in meditron) and "It is left out." in warnings
    assert "meditron-7b" not in shown(app.error)
    assert any(button.label == "Score 3 of them by length" and not button.disabled for button in app.button)
    app.multiselect(key="detect-runs").set_value(meditron).run()  # nothing else to score: the tab can do nothing
    assert all(f"{run_id}: the tokenizer 'epfl-llm/meditron-7b'" in shown(app.error) for run_id in meditron)
    app.switch_page("pages/robustness.py").run()
    app.multiselect(key="attack-runs").set_value(meditron[:1]).run()
    assert "Llama 2" in shown(app.error)
    assert next(button for button in app.button if button.label == "Attack and detect").disabled
    assert not app.exception
