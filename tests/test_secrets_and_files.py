"""Issue 58, items 20–24 and 29: secrets that must never be printed, stored or guessed, and the files fwsapp writes.

A key given as `$VAR` is held to the same range as a key written out; its fingerprint is salted and slow; a password in a
server's address is refused; every CSV fwsapp writes survives a lone CR in a text; every `--out` follows one rule."""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import time

import pytest

from fwsapp.cli import main
from fwsapp.secret_keys import SCRYPT_COST, fingerprint, matches
from fwsapp.store import Store
from tests.conftest import tiny_spec
from tests.test_malformed_inputs import GOOD, assert_refused

VARIABLE = "FWSAPP_TEST_HOSTILE_KEY"


@pytest.fixture
def db(tmp_path):
    """A database that holds an imported run, so that 'nothing stored is lost' is visible."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    path = tmp_path / "hostile.duckdb"
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(good), "--db",
                 str(path)]) == 0
    return path


# -- item 21: a key given as $VAR is checked as a literal one is ------------------------------------------------------
@pytest.mark.parametrize("value, expected", [
    # the exact end (it read "1.09951e+12", so a key just past it looked in range)
    (str(2**40 + 1), "KGW: hash_key: the key in $FWSAPP_TEST_HOSTILE_KEY is out of range; it must be in [0, 1,099,511,627,776]"),
    ("-7", "is out of range"),
    (str(2**70), "is out of range"),
    ("abc", "KGW's hash_key: $FWSAPP_TEST_HOSTILE_KEY does not hold a whole number; set it to the key, a whole number "
            "in [0, 1,099,511,627,776]"),
    ("123 45", "does not hold a whole number"),
])
def test_a_key_in_a_variable_is_held_to_the_range_of_a_written_key_and_never_echoed(db, capsys, monkeypatch, value,
                                                                                     expected):
    monkeypatch.setenv(VARIABLE, value)
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--param", f"hash_key=${VARIABLE}", "--db", str(db)],
                   [expected], db, capsys)
    spec = db.parent / "keyed.toml"
    spec.write_text(tiny_spec(method=f'params = {{ hash_key = "${VARIABLE}" }}'))
    assert_refused(["grid", str(spec), "--dry-run", "--db", str(db)], [expected], db, capsys)
    capsys.readouterr()
    assert main(["generate", "--task", "qa", "--method", "KGW", "--param", f"hash_key=${VARIABLE}", "--db",
                 str(db)]) == 2
    assert value not in capsys.readouterr().err


def test_a_written_key_out_of_range_is_not_echoed_either(db, capsys):
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--param", "hash_key=12345678901234567", "--db",
                    str(db)], ["hash_key: the key is out of range"], db, capsys)
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--param", "hash_key=secret12", "--db", str(db)],
                   ["KGW: hash_key (a key, not shown) must be a whole number"], db, capsys)


# -- item 22: the fingerprint does not give the key away --------------------------------------------------------------
def test_the_fingerprint_is_salted_and_slow_and_still_tells_another_key_apart(monkeypatch, tmp_path):
    from fwsapp.generation.run_config import RunConfig

    monkeypatch.setenv(VARIABLE, "12345")
    recorded = RunConfig(task="qa", method="KGW", params={"hash_key": f"${VARIABLE}"}).params["hash_key"]
    kind, salt, digest = recorded.split(" ", 1)[1].split(":")
    assert kind == "scrypt" and len(salt) == 16 and len(digest) == 16
    assert hashlib.sha256(b"12345").hexdigest()[:16] not in recorded  # the brute-forced record of before
    # The cost that makes 2^40 keys take years: about 0.1 s and 32 MiB each (timed without the in-process cache).
    assert SCRYPT_COST["n"] >= 2**15 and SCRYPT_COST["r"] >= 8
    started = time.perf_counter()
    hashlib.scrypt(b"54321", salt=bytes.fromhex(salt), dklen=8, **SCRYPT_COST)
    assert time.perf_counter() - started > 0.02
    # One key, one record in one installation (a repeated command keeps its run id); another installation's salt
    # gives another record, and both are checked.
    assert fingerprint("12345") == recorded.split(" ")[1]
    assert fingerprint("12345", "00" * 8) != recorded.split(" ")[1]
    assert matches("12345", fingerprint("12345", "00" * 8)) and not matches("12346", recorded.split(" ")[1])
    assert matches("12345", "sha256:" + hashlib.sha256(b"12345").hexdigest()[:16])  # runs recorded before still read
    monkeypatch.setenv(VARIABLE, "12346")
    from fwsapp.watermark.methods import info

    with pytest.raises(ValueError, match=r"holds another key than the one recorded: set it to that key"):
        info("KGW").with_keys({"hash_key": recorded})


# -- item 20: no credentials in a server's address ----------------------------------------------------------------------
def test_a_server_address_with_a_password_is_refused_without_printing_it(db, capsys, tmp_path):
    assert_refused(["generate", "--task", "qa", "--method", "gumbel", "--server", "http://alice:PW-s3cret@localhost:9/v1",
                    "--db", str(db)], ["The server address http://localhost:9/v1 (as given) holds a user name or password"],
                   db, capsys)
    capsys.readouterr()
    main(["generate", "--task", "qa", "--method", "gumbel", "--server", "http://alice:PW-s3cret@localhost:9/v1",
          "--db", str(db)])
    assert "PW-s3cret" not in capsys.readouterr().err
    spec = tmp_path / "served.toml"
    spec.write_text(tiny_spec().replace('name = "KGW"', 'name = "vLLM-Gumbel"') + '\n[server]\nurl = '
                    '"https://bob:PW-s3cret@example.org/v1"\n')
    assert_refused(["grid", str(spec), "--dry-run", "--db", str(db)], ["holds a user name or password"], db, capsys)


# -- item 23: a lone CR never starts a row ------------------------------------------------------------------------------
def test_every_csv_fwsapp_writes_keeps_a_text_with_a_lone_cr_in_its_cell(tmp_path, capsys):
    rows = [{**GOOD[0], "watermarked_text": "\r=3+3"}, {**GOOD[1], "unwatermarked_text": "a\r=HYPERLINK(1)"},
            {**GOOD[2], "natural_text": "line\nbreak\r\nboth"}]
    generations = tmp_path / "g.json"
    generations.write_text(json.dumps(rows))
    db_path = tmp_path / "cr.duckdb"
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(generations),
                 "--db", str(db_path)]) == 0
    run_id = Store(db_path, read_only=True).runs().run_id.iloc[0]
    out = tmp_path / "run.csv"
    assert main(["export", "--run", run_id, "--format", "csv", "--out", str(out), "--db", str(db_path)]) == 0
    read = list(csv.reader(io.StringIO(out.read_bytes().decode(), newline="")))
    header, body = read[0], read[1:]
    assert len(body) == 3  # one row per sample: no cell split into a new row
    cells = [dict(zip(header, row)) for row in body]
    assert cells[0]["watermarked_text"] == "'\r=3+3"
    assert cells[1]["unwatermarked_text"] == "a\r=HYPERLINK(1)"
    assert cells[2]["reference"] == "line\nbreak\r\nboth"


def test_a_raters_comment_with_a_lone_cr_stays_in_its_cell():
    import pandas as pd

    from fwsapp.human.study import ratings_file

    data = ratings_file(pd.DataFrame({"rater": ["r1", "r2"], "comment": ["ok\r=1+1", "fine"]}), "csv")
    assert list(csv.reader(io.StringIO(data.decode(), newline=""))) == [["rater", "comment"], ["r1", "ok\r=1+1"],
                                                                         ["r2", "fine"]]


# -- items 24 and 29: one rule for every file fwsapp writes -------------------------------------------------------------
@pytest.mark.parametrize("command", [
    ["export", "--format", "csv"],
    ["detect", "--tokenizer", "mistral-v1"],
    ["paired", "--method", "EntityKGW", "--against", "KGW"],
])
def test_every_out_is_refused_before_any_work_where_it_would_replace_or_follow_or_block(db, capsys, tmp_path, command):
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    args = [*command, *(["--run", run_id] if command[0] != "paired" else []), "--db", str(db)]
    existing = tmp_path / "existing.csv"
    existing.write_text("keep me")
    target = tmp_path / "target.csv"
    target.write_text("the link's target")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    assert_refused([*args, "--out", str(existing)], [f"--out {existing} exists: pass --force"], db, capsys)
    for refused in (link, fifo, folder, "/dev/full", "/dev/stdout"):
        assert_refused([*args, "--out", str(refused), "--force"], [f"--out {refused} exists and is not a regular file"],
                       db, capsys)
    assert existing.read_text() == "keep me" and target.read_text() == "the link's target"


def test_export_replaces_a_file_only_with_force(db, tmp_path, capsys):
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    out = tmp_path / "run.parquet"
    out.write_text("old")
    assert main(["export", "--run", run_id, "--format", "parquet", "--out", str(out), "--force", "--db", str(db)]) == 0
    assert out.read_bytes()[:4] == b"PAR1"
