"""The entity-watermark bench's record: seeds measured in different sessions make one table."""
import sys

from bench import entity_watermark as bench


def measured_run(task, method, seed, unsupported, mentions, **measures):
    return {"task": task, "method": method, "seed": seed, "n": 200, "new_tokens": 200, "delta": 2.0, "recognizer": "trained",
            "auroc": 1.0, "tpr1": 1.0, "tokens": 190.0, "introduced": 0.5, "hallucination": unsupported / mentions * 100,
            "mentions": mentions, "unsupported": unsupported, "entropy_shift": None, "fws": 0.4, "fws_plain": 0.45,
            **measures}


def test_a_remeasured_run_replaces_its_row_and_every_other_row_stays(tmp_path):
    path = tmp_path / "results" / "record.csv"
    bench.record(path, [measured_run("completion", "KGW", 0, 134, 170), measured_run("completion", "KGW", 1, 10, 20)])
    bench.record(path, [measured_run("completion", "KGW", 1, 15, 20, auroc=0.9)])

    assert len(path.read_text().splitlines()) == 1 + 2
    runs = bench.recorded(path, task="completion")
    assert sorted(key[2] for key in runs) == [0, 1]
    assert runs[("completion", "KGW", 1, 200, 200, 2.0, "trained")]["unsupported"] == 15
    assert runs[("completion", "KGW", 1, 200, 200, 2.0, "trained")]["auroc"] == 0.9
    assert runs[("completion", "KGW", 0, 200, 200, 2.0, "trained")]["unsupported"] == 134
    # A measure the run lacked comes back as None, which the table's cells skip, not as NaN.
    assert runs[("completion", "KGW", 0, 200, 200, 2.0, "trained")]["entropy_shift"] is None
    assert list(bench.recorded(path, task="completion", seed=[1])) == [("completion", "KGW", 1, 200, 200, 2.0, "trained")]


def test_rows_recorded_before_the_recognizer_was_named_are_the_mesh_matchers_and_stay(tmp_path):
    path = tmp_path / "record.csv"
    old = {key: value for key, value in measured_run("completion", "KGW", 0, 134, 170).items() if key != "recognizer"}
    path.write_text(",".join(old) + "\n" + ",".join("" if value is None else str(value) for value in old.values()) + "\n")
    bench.record(path, [measured_run("completion", "KGW", 0, 120, 160)])  # the same run, with the trained tagger
    runs = bench.recorded(path, task="completion")
    assert {key[-1]: run["unsupported"] for key, run in runs.items()} == {"mesh": 134, "trained": 120}
    assert list(bench.recorded(path, recognizer="mesh")) == [("completion", "KGW", 0, 200, 200, 2.0, "mesh")]


def test_pooled_mentions_and_fishers_test_against_kgw():
    rows = {("qa", "KGW"): [measured_run("qa", "KGW", 0, 50, 60), measured_run("qa", "KGW", 1, 30, 40)],
            ("qa", "EntityKGW"): [measured_run("qa", "EntityKGW", 0, 35, 50), measured_run("qa", "EntityKGW", 1, 25, 50)]}
    lines = bench.pooled(rows).splitlines()
    assert lines[2] == "| qa | KGW | 2 | 80 of 100 | 80.0 | – |"
    # 60 of 100 against 80 of 100: Fisher's exact two-sided p = 0.00319.
    assert lines[3] == "| qa | EntityKGW | 2 | 60 of 100 | 60.0 | 0.003 |"


def test_the_table_prints_from_the_record_without_a_model(tmp_path, monkeypatch, capsys):
    path = tmp_path / "record.csv"
    bench.record(path, [measured_run("completion", method, seed, unsupported, 100, introduced=introduced)
                        for method, introduced, unsupported in (("KGW", 0.7, 80), ("EntityKGW", 0.3, 70))
                        for seed in (0, 1, 2)]
                 + [measured_run("qa", "KGW", 0, 1, 2)])
    monkeypatch.setattr(sys, "argv", ["entity_watermark", "--only", "table", "--tasks", "completion",
                                      "--seeds", "0", "1", "--from-record", "--record", str(path)])
    monkeypatch.setattr(bench, "measures", None)  # nothing may be measured, so no store or model is touched
    bench.main()

    printed = capsys.readouterr().out
    assert "| completion | KGW | 2 | 1.000 ± 0.000 | 1.000 ± 0.000 | 190.0 ± 0.0 | 0.70 ± 0.00 | 80.0 ± 0.0 | – |" in printed
    assert "| completion | EntityKGW | 2 | 140 of 200 | 70.0 |" in printed
    assert "| qa |" not in printed
