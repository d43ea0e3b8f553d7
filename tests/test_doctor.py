"""`doctor`: what this setup can run, known before any download or load."""
from pathlib import Path

import pytest

from fwsapp.cli import main
from fwsapp.orchestration.doctor import PARAMETERS, checks, database_check, fits


def test_a_7b_model_fits_by_its_bytes_per_parameter_and_a_margin():
    meditron = PARAMETERS["epfl-llm/meditron-7b"]
    assert fits(meditron, "bf16", 17 * 2**30)  # 6.74e9 × 2 bytes × 1.2 = 15.1 GiB
    assert not fits(meditron, "bf16", 14 * 2**30)
    assert not fits(meditron, "fp32", 24 * 2**30)  # 30.1 GiB: not on this 24 GiB machine's CPU


def test_a_model_that_does_not_fit_in_fp32_is_told_what_bf16_would_need():
    """A 7B model on this 24 GiB CPU: 30.1 GiB in fp32 does not fit, and the line said no more, though --dtype bf16
    (15.1 GiB) does."""
    from fwsapp.orchestration.doctor import model_checks

    lines = {check.item: check.detail for check in model_checks("fp32", 24 * 2**30)}
    assert lines["epfl-llm/meditron-7b"].endswith(
        "needs about 30.1 GiB in fp32: does NOT fit (in bf16, --dtype bf16: about 15.1 GiB, fits)")
    assert lines["smollm2-135m-instruct"].endswith("in fp32: fits")
    tight = {check.item: check.detail for check in model_checks("fp32", 10 * 2**30)}
    assert tight["epfl-llm/meditron-7b"].endswith("(in bf16, --dtype bf16: about 15.1 GiB, does NOT fit either)")
    assert "--dtype" not in {check.item: check.detail for check in model_checks("bf16", 10 * 2**30)}["epfl-llm/meditron-7b"]


def test_doctor_reports_every_part_without_loading_a_model(tmp_path, capsys):
    db = tmp_path / "fresh.duckdb"
    assert main(["doctor", "--db", str(db)]) == 0
    out = capsys.readouterr().out.splitlines()
    topics = {line.split()[1] for line in out}
    assert topics == {"device", "model", "tokenizer", "recognizer", "encoder", "judge", "metric", "method", "attack",
                      "database"}
    assert any(line.startswith("ok") and "synonym" in line for line in out)  # WordNet found offline
    embedded = next(line for line in out if "smollm2-135m-instruct" in line)
    assert embedded.startswith("ok") and "fits" in embedded
    assert any(line.startswith("ok") and "mistral-v1" in line for line in out)
    assert any(line.startswith("ok") and "trained (default)" in line and "trained disease tagger" in line for line in out)
    assert not db.exists()  # reporting creates nothing


def test_the_database_check_counts_runs_and_names_a_file_it_cannot_open(tmp_path):
    from fwsapp.store import Store

    store = Store(tmp_path / "held.duckdb")
    try:
        assert database_check(tmp_path / "held.duckdb", store).detail.endswith("0 runs")
        assert checks(tmp_path / "held.duckdb", store)[-1].status == "ok"
    finally:
        store.close()
    not_a_db = tmp_path / "notes.txt"
    not_a_db.write_text("hello")
    assert database_check(not_a_db).status == "warning"


def test_a_database_path_that_cannot_be_created_is_said_so_by_doctor_and_by_runs(capsys):
    """Issue 38: under /proc, doctor said 'ok … the first run creates it' and `runs` then called the path
    'truncated or damaged'. `runs` creates no database; the store, asked to, says it cannot."""
    from fwsapp.store import Store, StoreError

    path = Path("/proc/fwsapp-test/fwsapp.duckdb")
    check = database_check(path)
    assert check.status == "warning" and "cannot be created there" in check.detail
    assert main(["runs", "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"No database at {path}" in err and "damaged" not in err
    with pytest.raises(StoreError, match="cannot be created there") as raised:
        Store(path)
    assert "damaged" not in str(raised.value)
