"""Issue 58, item 13: every form that starts a job offers the same runs: none still generating, none without a sample."""
from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from fwsapp.cli import main
from fwsapp.store import Store
from tests.conftest import PROJECT
from tests.test_malformed_inputs import GOOD

FORMS = [("pages/quality.py", "score-runs"), ("pages/entropy.py", "analyze-runs"), ("pages/robustness.py", "attack-runs")]


@pytest.mark.parametrize("page, key", FORMS)
def test_a_run_still_generating_is_offered_by_no_form(app_db, page, key):
    good = app_db.parent / "good.json"
    good.write_text(json.dumps(GOOD))
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(good), "--db",
                 str(app_db)]) == 0
    store = Store(app_db)
    store.ensure_run("still-going", {"task": "qa"}, model="m", task="qa", method="KGW", params={}, seed=1, n=4)
    [imported] = [run_id for run_id in store.runs().run_id if run_id != "still-going"]
    store.close()
    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120)
    app.run()
    app.switch_page(page).run()
    assert not app.exception
    picker = app.multiselect(key=key)
    assert [imported] == [option.split(" · ")[-1] for option in picker.options]  # options are shown as labels
    assert not any("still-going" in option for option in picker.options)
    assert any("Left out until their texts are stored: still-going" in caption.value for caption in app.caption)


def test_a_cancelled_scoring_stops_between_batches_and_its_count_is_what_was_stored(tmp_path):
    """Issue 58, item 14: Cancel is heard after the batch in hand, and the count the job reports is the samples stored."""
    import threading

    from fwsapp.orchestration import pipeline

    rows = [{**GOOD[0], "prompt": f"Is gout {index} serious?", "natural_text": f"Gout {index} can be serious."}
            for index in range(40)]
    logs = tmp_path / "forty.json"
    logs.write_text(json.dumps(rows))
    db = tmp_path / "forty.duckdb"
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(logs), "--db",
                 str(db)]) == 0
    store = Store(db)
    [run_id] = store.runs().run_id
    cancel, reported = threading.Event(), []

    def progress(done, total, note=""):
        reported.append((done, total))
        if done > 0:
            cancel.set()

    pipeline.score(store, [run_id], None, progress, cancel, metrics=("simcse_reference",))
    stored = store.metrics([run_id]).query("metric == 'simcse_reference'").sample_idx.nunique()
    assert 0 < stored < 40 and reported[-1] == (stored, 40)
    store.close()
