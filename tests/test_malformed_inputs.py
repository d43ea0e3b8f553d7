"""Malformed files and arguments through `import`, `generate --dataset` and `judge`: each one exits 2 with one
line naming the file, the row and the problem, never a traceback, and leaves every table as it was."""
import json
import pickle

import pytest

from fwsapp.cli import main
from fwsapp.store import Store
from fwsapp.watermark.methods import post_hoc_names
from tests.conftest import tiny_spec

GOOD = [{"prompt": f"Is gout {i} serious?", "watermarked_text": f"Is gout {i} serious? Yes, it can be.",
         "unwatermarked_text": f"Is gout {i} serious? It can be.", "natural_text": f"Gout {i} can be serious."}
        for i in range(3)]
JUDGED = [{"sample_id": str(i), "w_output": "a", "uw_output": "b", "judge_output": "[[A]]: [3, 3, 3]\n[[B]]: [4, 4, 4]",
           "randomized": "False", "scores_W": [3, 3, 3], "scores_U": [4, 4, 4]} for i in range(3)]
DETECTION = {"watermarked_scores": [5.0, 6.0, 7.0], "unwatermarked_scores": [0.1, 0.2, -0.3]}


def judged(**change):
    rows = [dict(row) for row in JUDGED]
    rows[1].update(change)
    return json.dumps(rows)


def detection(**change):
    return json.dumps({**DETECTION, **change})


# (which file, its name, its content, what the message must say)
IMPORT_FILES = [
    ("generations", "g.json", b"", ["g.json", "the file is empty"]),
    ("generations", "g.json", b"\xff\xfe\x00broken", ["g.json", "not UTF-8"]),
    ("generations", "g.json", b'[{"prompt": "x",', ["g.json", "broken JSON at line 1"]),
    ("generations", "g.json", pickle.dumps(GOOD), ["g.json", "is a pickle"]),
    ("generations", "g.pkl", b"[]", ["g.pkl", "is a pickle"]),
    ("generations", "g.json", b"42", ["g.json", "expected a non-empty JSON list"]),
    ("generations", "g.json", b"[]", ["g.json", "expected a non-empty JSON list"]),
    ("generations", "g.json", b'["just text"]', ["g.json, row 1", "expected an object"]),
    ("generations", "g.json", json.dumps([{"watermarked_text": "a", "unwatermarked_text": "b"}]).encode(),
     ["g.json, row 1", "missing natural_text"]),
    ("generations", "g.json", json.dumps([{**GOOD[0], "watermarked_text": 7}]).encode(),
     ["g.json, row 1", "'watermarked_text' must be text"]),
    ("generations", "g.json", json.dumps([GOOD[0], {**GOOD[1], "prompt": ["a"]}]).encode(),
     ["g.json, row 2", "'prompt' must be text"]),
    ("generations", "g.json", json.dumps({"watermarked_text": ["a"], "unwatermarked_text": [], "natural_text": ["c"]}).encode(),
     ["g.json", "unequal lengths"]),
    ("generations", "g.jsonl", (json.dumps(GOOD[0]) + "\n{broken\n").encode(), ["g.jsonl", "line 2"]),
    ("generations", "g.json", json.dumps([GOOD[0], {**GOOD[1], "natural_text": "a \ud800 b"}]).encode(),
     ["g.json, row 2", "'natural_text' holds a lone surrogate at character 3"]),
    ("detection", "d.json", json.dumps({"watermarked_scores": [1.0]}).encode(), ["d.json", "unwatermarked_scores"]),
    ("detection", "d.json", detection(watermarked_scores=5).encode(), ["d.json", "'watermarked_scores' must be a non-empty list"]),
    ("detection", "d.json", detection(watermarked_scores=[5.0, "4.2", 1.0]).encode(), ["d.json", "item 2 is '4.2'"]),
    ("detection", "d.json", b'{"watermarked_scores": [NaN, 1, 2], "unwatermarked_scores": [0, 0, 0]}',
     ["d.json", "item 1 is nan, not a finite number"]),  # "not a number that fits a float": NaN fits one
    ("detection", "d.json", b'{"watermarked_scores": [1e400, 1, 2], "unwatermarked_scores": [0, 0, 0]}', ["d.json", "item 1 is inf"]),
    ("detection", "d.json", detection(watermarked_scores=[True, 1.0, 2.0]).encode(), ["d.json", "item 1 is True"]),
    # 1e400 written out as an integer: valid JSON that no float holds
    ("detection", "d.json", detection(watermarked_scores=[10**400, 1.0, 2.0]).encode(),
     ["d.json", "item 1 is 1000000000", "(401 characters), not a finite number that fits a float"]),
    ("detection", "d.json", b'{"watermarked_scores": [1' + b"0" * 5000 + b'], "unwatermarked_scores": [0]}',
     ["d.json", "holds a number too long to read"]),
    ("judged", "j.json", judged(scores_W=[10**400, 3, 3]).encode(), ["j.json, row 2", "three numbers that fit a float"]),
    ("detection", "d.json", detection(watermarked_scores=[1.0, 2.0, 3.0, 4.0]).encode(), ["d.json", "has 4 scores but g.json has 3"]),
    ("detection", "d.json", detection(watermarked_scores=[]).encode(), ["d.json", "must be a non-empty list"]),
    ("detection", "d.json", detection(unwatermarked_scores=[1.0]).encode(), ["d.json", "'unwatermarked_scores' has 1 score but"]),
    ("judged", "j.json", b'{"sample_id": 0}', ["j.json", "expected a non-empty JSON list"]),
    ("judged", "j.json", json.dumps([{"sample_id": 0, "w_output": "a", "uw_output": "b"}]).encode(),
     ["j.json, row 1", "missing judge_output"]),
    ("judged", "j.json", judged(sample_id="abc").encode(), ["j.json, row 2", "sample_id 'abc' must be a whole number"]),
    ("judged", "j.json", judged(sample_id=-1).encode(), ["j.json, row 2", "sample_id -1 must be a whole number"]),
    ("judged", "j.json", judged(sample_id=1.5).encode(), ["j.json, row 2", "sample_id 1.5 must be a whole number"]),
    ("judged", "j.json", judged(sample_id=10**12).encode(), ["j.json, row 2", "beyond the 3 generations"]),
    ("judged", "j.json", judged(sample_id="0").encode(), ["j.json, row 2", "sample_id 0 appears twice"]),
    ("judged", "j.json", judged(sample_id=5).encode(), ["j.json, row 2", "beyond the 3 generations (ids 0–2)"]),
    ("judged", "j.json", judged(scores_W=[3, 3, 3, 3]).encode(), ["j.json, row 2", "'scores_W' must be a list of three"]),
    ("judged", "j.json", judged(scores_W=[0, 3, 3]).encode(), ["j.json, row 2", "whole numbers from 1 to 5"]),
    ("judged", "j.json", judged(scores_W=[9, 1, 1]).encode(), ["j.json, row 2", "whole numbers from 1 to 5"]),
    ("judged", "j.json", judged(scores_U=[2.5, 3, 3]).encode(), ["j.json, row 2", "'scores_U' scores must be whole"]),
    ("judged", "j.json", judged(scores_W="not json").encode(), ["j.json, row 2", "not a list of three numbers"]),
    ("judged", "j.json", judged(scores_U='[NaN, 3, 3]').encode(), ["j.json, row 2", "three numbers that fit a float"]),
]

DATASETS = [
    ("data.json", None, ["data.json", "no such file"]),
    ("data.json", b"", ["data.json", "the file is empty"]),
    ("data.csv", b'prompt,natural\n"What is gout?,Arthritis.\nIs it bad?,Yes.\n', ["data.csv", "malformed CSV", "quote"]),
    ("data.csv", b"prompt,natural\nWhat is gout?,Arthritis.,extra\n", ["data.csv, row 1", "more fields than the header"]),
    ("data.csv", b"prompt,natural\nWhat is gout?\n", ["data.csv, row 1", "fewer fields than the header"]),
    ("data.json", json.dumps([{"prompt": "What is gout?"}]).encode(), ["data.json, row 1", "missing the reference"]),
    ("data.json", json.dumps([{"prompt": "", "natural": "x"}]).encode(), ["data.json, row 1", "'prompt' must be non-empty"]),
    ("data.jsonl", b'{"prompt": "a", "natural": "b"}\n{oops\n', ["data.jsonl, row 2", "broken JSON"]),
    ("data.json", json.dumps([{"title": "x"}]).encode(), ["data.json, row 1", "unknown columns"]),
    ("data.json", json.dumps({"prompt": "x"}).encode(), ["data.json", "expected a JSON list"]),
    # which rule the rows of a raw table failed, and the other way in (it said "see docs/data.md" alone)
    ("data.csv", b'question,answer\n"What is asthma?","A lung disease."\n"What is gout?",""\n',
     ["data.csv: none of its 2 rows passes the paper's qa rule: a question of exactly 10 words ending in '?' and an "
      "answer under 250 words. To take rows as they are, give each a 'prompt' and a 'reference' instead"]),
]

GENERATE_ARGUMENTS = [
    (["--n", "500"], ["n=500 is more than the 20 samples"]),
    (["--param", "gamma=0"], ["gamma=0.0 is out of range", "(0, 1)"]),
    (["--param", "delta=nan"], ["delta=nan is out of range", "in [0, 20]"]),
    (["--param", "prefix_length=0"], ["prefix_length=0 is out of range", "≥ 1"]),
    (["--param", "rng=gpu"], ["rng='gpu' is out of range", "cuda, cpu"]),
    (["--param", "alpha=1"], ["KGW has no parameter 'alpha'"]),
    (["--param", "gamma"], ["must look like key=value"]),
    (["--param", "delta=big"], ["KGW: delta='big' must be a number"]),
    (["--param", "delta=1000"], ["delta=1000.0 is out of range", "in [0, 20]"]),
    (["--param", "hash_key=1180591620717411303424"], ["hash_key: the key is out of range"]),
    (["--seed", "2147483648"], ["--seed must be a whole number from 0 to 2,147,483,647"]),
    (["--seed", "-1"], ["--seed must be a whole number from 0 to 2,147,483,647"]),
    # each option of a served run named alone, with its value (one message named both, whichever was wrong)
    (["--server", "http://127.0.0.1:9/v1", "--timeout", "nan"], ["--timeout must be more than 0 and at most 3600 seconds, not nan"]),
    (["--server", "http://127.0.0.1:9/v1", "--attempts", "0"], ["--attempts must be from 1 to 20, not 0"]),
    # a served run's options without a server (--concurrency was ignored, and one option read "go with")
    (["--concurrency", "3"], ["--concurrency goes with --server: add --server URL, or drop it."]),
    (["--served-model", "m", "--attempts", "2"], ["--served-model, --attempts go with --server: add --server URL, or drop them."]),
    # where and how to load a model, through a server that holds it (each was ignored)
    (["--server", "http://127.0.0.1:9/v1", "--device", "cuda:1"], ["Through --server the server holds the model, so "
                                                                    "none is loaded: drop --device."]),
    (["--server", "http://127.0.0.1:9/v1", "--device", "cpu", "--dtype", "fp32"], ["Through --server the server holds",
                                                                                    "drop --device and --dtype."]),
]


def row_counts(path) -> dict:
    store = Store(path)
    tables = [row[0] for row in store.rows("SELECT table_name FROM information_schema.tables")]
    counts = {table: store.row(f"SELECT count(*) FROM {table}")[0] for table in tables}
    store.close()
    return counts


@pytest.fixture
def db(tmp_path):
    """A database that already holds an imported run, so 'nothing lost' is visible."""
    good = tmp_path / "good.json"
    good.write_text(json.dumps(GOOD))
    path = tmp_path / "fuzz.duckdb"
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(good), "--db", str(path)]) == 0
    return path


def assert_refused(args, expected, db, capsys):
    before = row_counts(db)
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err and err.count("\n") <= 2, err
    for text in expected:
        assert text in err, (text, err)
    assert row_counts(db) == before


@pytest.mark.parametrize("kind, name, content, expected", IMPORT_FILES)
def test_malformed_import_files(tmp_path, db, capsys, kind, name, content, expected):
    files = {"generations": tmp_path / "g.json", "detection": tmp_path / "d.json", "judged": tmp_path / "j.json"}
    files["generations"].write_text(json.dumps(GOOD))
    files["detection"].write_text(json.dumps(DETECTION))
    files["judged"].write_text(json.dumps(JUDGED))
    files[kind] = tmp_path / name
    files[kind].write_bytes(content)
    args = ["import", "--method", "KGW", "--model", "m2", "--task", "qa", "--db", str(db)]
    for option, path in files.items():
        args += [f"--{option}", str(path)]
    assert_refused(args, expected, db, capsys)


def test_a_refused_first_import_leaves_no_database_behind(tmp_path, capsys):
    """The database was opened, so created, before the logs were read: a malformed first log left an empty one."""
    bad = tmp_path / "g.json"
    bad.write_text(json.dumps([{"prompt": "p"}]))
    new = tmp_path / "new.duckdb"
    assert main(["import", "--method", "KGW", "--model", "m", "--task", "qa", "--generations", str(bad),
                 "--db", str(new)]) == 2
    assert "missing watermarked_text" in capsys.readouterr().err and not new.exists()


@pytest.mark.parametrize("name, content, expected", DATASETS)
def test_malformed_datasets_for_generate(tmp_path, db, capsys, name, content, expected):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--dataset", str(path), "--db", str(db)],
                   expected, db, capsys)


@pytest.mark.parametrize("extra, expected", GENERATE_ARGUMENTS)
def test_bad_generate_arguments_are_refused_before_any_work(db, capsys, extra, expected):
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--db", str(db), *extra], expected, db, capsys)


@pytest.mark.parametrize("command, expected", [
    (["attack", "--attack", "typo", "--seed", "2147483648"], "--seed must be a whole number from 0 to 2,147,483,647"),
    (["attack", "--attack", "typo", "--seed", "-1"], "--seed must be a whole number from 0 to 2,147,483,647"),
    (["detect", "--window", "3000000000"], "--window must be from 1 to 100,000 tokens"),
])
def test_integers_a_database_column_cannot_hold_are_refused_before_any_work(db, capsys, command, expected):
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    assert_refused([*command, "--run", run_id, "--db", str(db)], [expected], db, capsys)


@pytest.mark.parametrize("options, expected", [
    (["--by-length", "--fpr", "1.5"], "--fpr must be in (0, 1), not 1.5"),
    (["--window", "0"], "--window must be from 1 to 100,000 tokens, not 0"),
    (["--audit-keys", "10"], "--audit-keys audits one run's method and key"),
    (["--predict"], "--predict compares predicted with measured tokens to detect"),
    (["--fpr", "0.05"], "--fpr sets the false-positive rate of --by-length's and --window's verdicts"),  # not ignored
])
def test_detect_over_every_run_refuses_its_options_before_reading_any_run(db, capsys, options, expected):
    """The refusal is the one line: it came below a line for each run `--all` skips (the imported run's model 'm'
    names no tokenizer here)."""
    assert_refused(["detect", "--all", *options, "--db", str(db)], [expected], db, capsys)


@pytest.mark.parametrize("options, unused", [
    (["--device", "cpu"], "--device"),
    (["--dtype", "fp32", "--device", "cuda"], "--device and --dtype"),
    (["--audit-keys", "2", "--dtype", "fp32"], "--dtype"),
])
def test_detect_refuses_loading_options_where_no_detector_reads_a_model(db, capsys, options, unused):
    """KGW's detector reads no model, so --device and --dtype were ignored without a word."""
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    assert_refused(["detect", "--run", run_id, *options, "--db", str(db)],
                   [f"KGW's detector reads no model, so none is loaded: drop {unused}."], db, capsys)


@pytest.mark.parametrize("command, expected", [
    (["score", "--metrics", "rouge", "f1", "--device", "cpu"],
     "No metric asked for (rouge, f1) reads with a language model, so none is loaded: drop --device."),
    (["judge", "--backend", "openai", "--dtype", "fp32"],
     "The openai judge's model answers from its server, so none is loaded: drop --dtype."),
    (["analyze", "--device", "cpu"], "Every one of these runs was imported or served (its generator is not loaded "
                                     "here) and no --entropy-model is named, so none is loaded: drop --device."),
    (["attack", "--attack", "typo", "--device", "cpu", "--dtype", "fp32"],
     "typo reads no model, nor does KGW's detector, so none is loaded: drop --device and --dtype."),
])
def test_commands_refuse_loading_options_where_they_load_no_model(db, capsys, command, expected):
    """Only `generate --server`, `serve-detection` and `detect` refused them; `score`, `judge`, `analyze` and `attack`
    went on without a word, loading nothing, or asked OpenAI and stored its verdicts."""
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    assert_refused([*command, "--run", run_id, "--db", str(db)], [expected], db, capsys)


@pytest.mark.parametrize("steps, expected", [
    ("", "{spec} generates through the serving engine at http://127.0.0.1:9, and none of its detectors and steps reads a "
         "model here, so none is loaded: drop --device."),
    ('attack = [{ name = "typo" }]', "and none of its detectors and steps reads a model here"),
    # A local judge loads one: the options stand, and the unreachable server is what stops the grid, in one sentence.
    ('judge = { backend = "local" }', "The server at http://127.0.0.1:9 did not list its models: connection failed or "
                                      "response cut off: Connection error. Is it an OpenAI-compatible server"),
])
def test_a_served_grid_refuses_loading_options_where_nothing_loads_a_model_here(tmp_path, db, capsys, steps, expected):
    """Through a [server], --device and --dtype were handed to nothing and ignored without a word."""
    spec = tmp_path / "served.toml"
    spec.write_text('[server]\nurl = "http://127.0.0.1:9"\n\n' + tiny_spec(steps=steps).replace("KGW", "vLLM-Gumbel"))
    assert_refused(["grid", str(spec), "--device", "cpu", "--db", str(db)], [expected.format(spec=spec)], db, capsys)


@pytest.mark.parametrize("options, expected", [
    (["--seed", "-1"], "--seed must be a whole number from 0 to 2,147,483,647"),
    (["--param", "p=5"], "typo: p=5.0 is out of range; it must be in [0, 1]"),
])
def test_attack_over_every_run_refuses_its_options_before_reading_any_run(db, capsys, options, expected):
    assert_refused(["attack", "--all", "--attack", "typo", *options, "--db", str(db)], [expected], db, capsys)


@pytest.mark.parametrize("method", post_hoc_names())
def test_detect_refuses_a_post_hoc_detector_before_loading_anything(db, capsys, monkeypatch, method):
    """`detect` scores texts again under a watermark's key, which LogRank and its kin have not; the refusal came after
    the run's model was loaded, so a user whose machine lacks it read that instead."""
    from fwsapp import models
    from fwsapp.models import tokenizers

    def loading(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded before the method was checked")

    monkeypatch.setattr(models, "load_model", loading)
    monkeypatch.setattr(tokenizers, "load_tokenizer", loading)
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    assert_refused(["detect", "--run", run_id, "--method", method, "--db", str(db)],
                   [f"{method} is a post-hoc detector with no key"], db, capsys)


def test_a_study_of_an_unknown_run_names_it(db, capsys):
    assert_refused(["study", "create", "--name", "s", "--runs", "imp-nope", "--db", str(db)], ["No run 'imp-nope'"],
                   db, capsys)


@pytest.mark.parametrize("steps, expected", [
    ('attack = [{ name = "word-deletion", params = { ratio = true } }]', "ratio=True must be a number, not true or false"),
    ('attack = [{ name = "typo", params = { keep_entities = 2 } }]', "keep_entities=2 must be true or false"),
    ('attack = [{ name = "typo", params = { p = [' + ", ".join(f"{i / 10**6:.6f}" for i in range(10001)) + '] } }]',
     "makes 10,001 attack settings, more than 10,000"),
    ('attack = [{ name = "typo", params = { p = [[0.1, 0.2]] } }]', "typo: p=[0.1, 0.2] is not a number; it must be in"),
    ('attack = [{ name = "typo", params = { p = { a = 1 } } }]', "typo: p={'a': 1} is not a number"),
    ('attack = [{ name = "typo", params = { p = [0.1, { a = 1 }] } }]', "typo: p={'a': 1} is not a number"),
])
def test_a_grid_attack_step_is_checked_as_its_declaration_says(tmp_path, db, capsys, steps, expected):
    spec = tmp_path / "attack.toml"
    spec.write_text(tiny_spec(steps=steps))
    assert_refused(["grid", str(spec), "--dry-run", "--db", str(db)], [expected], db, capsys)


def test_a_grid_takes_a_64_bit_key_written_as_a_string_where_toml_integers_stop(tmp_path, db, capsys):
    spec = tmp_path / "vllm.toml"
    spec.write_text(tiny_spec().replace('name = "KGW"', f'name = "vLLM-Gumbel"\nparams = {{ key = "{2**64 - 1}" }}'))
    assert main(["grid", str(spec), "--dry-run", "--db", str(db)]) == 0
    assert "vLLM-Gumbel" in capsys.readouterr().out
    spec.write_text(tiny_spec().replace('name = "KGW"', 'name = "vLLM-Gumbel"\nparams = { key = "-1" }'))
    assert_refused(["grid", str(spec), "--dry-run", "--db", str(db)], ["vLLM-Gumbel: key: the key is out of range"], db, capsys)


def test_keep_entities_1_is_the_same_attack_setting_as_true():
    from fwsapp.robustness.attacks import ATTACKS

    assert ATTACKS["typo"].checked_params({"keep_entities": 1}) == ATTACKS["typo"].checked_params({"keep_entities": True})


def test_a_study_seed_beyond_32_bits_is_refused(db, capsys):
    run_id = Store(db, read_only=True).runs().run_id.iloc[0]
    assert_refused(["study", "create", "--name", "s", "--runs", run_id, "--seed", str(2**40), "--db", str(db)],
                   ["--seed must be a whole number from 0 to 2,147,483,647"], db, capsys)


@pytest.mark.parametrize("extra, expected", [
    (["--run", "nope", "--backend", "local"], ["No run 'nope'"]),
    (["--all", "--backend", "compatible", "--judge-model", "m"], ["needs a base URL (--base-url"]),
    (["--all", "--backend", "compatible", "--base-url", "http://127.0.0.1:9/v1"], ["needs a judge model (--judge-model"]),
    (["--all", "--backend", "compatible", "--base-url", "http://127.0.0.1:9/v1", "--judge-model", "m",
      "--api-key-env", "FWSAPP_TEST_UNSET_KEY"], ["FWSAPP_TEST_UNSET_KEY: that environment variable is not set"]),
    # A URL meant for a server of one's own went unused: OpenAI's backend asked OpenAI with OPENAI_API_KEY.
    (["--all", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1"],
     ["The openai judge backend takes no base URL", "use the compatible backend"]),
    (["--all", "--backend", "local", "--base-url", "http://127.0.0.1:9/v1"], ["The local judge backend takes no base URL"]),
    (["--all", "--backend", "local", "--api-key-env", "PATH"], ["The local judge backend sends no API key"]),
    (["--all", "--backend", "local", "--concurrency", "0"], ["--concurrency must be at least 1"]),
    # nan passed a `timeout <= 0` check, and each of the four requests failed as an "unreadable response"
    (["--all", "--backend", "local", "--timeout", "nan"], ["--timeout must be a number of seconds above 0, not nan"]),
    (["--all", "--backend", "local", "--timeout", "0"], ["--timeout must be a number of seconds above 0, not 0"]),
    (["--all", "--backend", "local", "--budget", "nan"], ["--budget must be a number of US$ from 0, not nan"]),
    (["--all", "--backend", "local", "--budget", "-1"], ["--budget must be a number of US$ from 0, not -1"]),
    # No price is known for these models, so the spend stayed uncounted and the cap was never reached.
    (["--all", "--backend", "local", "--budget", "5"], ["A budget of $5 cannot be kept with", "no price is known"]),
    (["--all", "--backend", "compatible", "--base-url", "http://127.0.0.1:9/v1", "--judge-model", "my-llama",
      "--budget", "0.5"], ["A budget of $0.5 cannot be kept with my-llama: no price is known for it (only for gpt-4o"]),
])
def test_bad_judge_arguments(db, capsys, extra, expected):
    assert_refused(["judge", *extra, "--db", str(db)], expected, db, capsys)


GIVEN_SETTINGS = {"oracle": "gpt2", "alignscore_checkpoint": "align.ckpt", "recognizer": "mesh"}


@pytest.mark.parametrize("setting", GIVEN_SETTINGS)
def test_a_scoring_setting_no_metric_asked_for_reads_is_refused(db, capsys, setting):
    """Each was ignored: ROUGE and F1 were computed, the oracle never loaded, the checkpoint and the recognizer never
    read, without a word."""
    from fwsapp.quality.registry import METRICS, SCORE_SETTINGS

    assert set(GIVEN_SETTINGS) == set(SCORE_SETTINGS)
    readers = [entry.name for entry in METRICS if setting in entry.reads]
    assert readers and not {"rouge", "f1"} & set(readers)
    assert_refused(["score", "--all", "--metrics", "rouge", "f1", f"--{setting.replace('_', '-')}",
                    GIVEN_SETTINGS[setting], "--db", str(db)],
                   [f"No metric asked for (rouge, f1) reads {SCORE_SETTINGS[setting]}: add {' or '.join(readers)} to "
                    f"the metrics, or drop '{GIVEN_SETTINGS[setting]}'."], db, capsys)


@pytest.mark.parametrize("name, content", [("notes.json", b'{"a": 1}'), ("table.csv", b"a,b\n1,2\n"),
                                           ("data.parquet", b"PAR1\x00\x00PAR1")])
def test_a_database_path_that_is_another_file_is_refused_and_left_alone(tmp_path, capsys, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["runs", "--db", str(path)]) == 2
    assert "exists and is not a DuckDB database" in capsys.readouterr().err
    assert path.read_bytes() == content


def test_a_truncated_database_gets_one_line_saying_how_to_recover(tmp_path, db, capsys):
    data = db.read_bytes()
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(data[: len(data) // 3])
    assert main(["runs", "--db", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "may be truncated or damaged" in err and "move it aside" in err and "Traceback" not in err


def test_a_folder_that_is_not_a_model_is_named_as_such(tmp_path, db, capsys):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.txt").write_text("not a model")
    assert_refused(["generate", "--task", "qa", "--method", "KGW", "--model", str(folder), "--n", "1", "--db", str(db)],
                   ["the folder has no config.json, so it is not a model folder"], db, capsys)


def test_help_lists_each_methods_parameters_with_their_ranges(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    out = capsys.readouterr().out
    assert "gamma=0.5  in (0, 1); share of the vocabulary that is green" in out
    assert "rng=cuda  one of cuda, cpu" in out and "prefix_length=1  ≥ 1" in out


def test_json_lines_are_accepted_as_generations(tmp_path, db, capsys):
    lines = tmp_path / "g.jsonl"
    lines.write_text("\n".join(json.dumps(row) for row in GOOD) + "\n")
    assert main(["import", "--method", "KGW", "--model", "m3", "--task", "qa", "--generations", str(lines),
                 "--db", str(db)]) == 0
    run_id = capsys.readouterr().out.strip()
    assert Store(db).count("generations", run_id) == 3


# Issue 38: specs are shared and re-run, so a spec never chooses which secret leaves the machine.

SECRET_STEP = ('judge = { backend = "compatible", base_url = "{url}", model = "stub-judge", '
               'api_key_env = "FWSAPP_TEST_SECRET" }')


def test_a_spec_cannot_send_a_secret_the_command_line_did_not_confirm(tmp_path, db, capsys, monkeypatch):
    from tests.openai_stub import StubServer

    monkeypatch.setenv("FWSAPP_TEST_SECRET", "s3cret-token-1234")
    before = row_counts(db)
    with StubServer() as stub:
        spec = tmp_path / "shared.toml"
        spec.write_text(tiny_spec(steps=SECRET_STEP.replace("{url}", stub.base_url)))
        assert main(["grid", str(spec), "--db", str(db)]) == 2
        assert ("[steps] judge would send the key in $FWSAPP_TEST_SECRET; a spec does not choose which secret leaves "
                "this machine: confirm it with --api-key-env FWSAPP_TEST_SECRET.") in capsys.readouterr().err
        assert main(["grid", str(spec), "--api-key-env", "OPENAI_API_KEY", "--db", str(db)]) == 2
        assert "(not OPENAI_API_KEY)" in capsys.readouterr().err
        assert stub.requests == [] and stub.headers_seen == []  # nothing was sent, nothing generated
    assert row_counts(db) == before
    far = tmp_path / "far.toml"
    far.write_text(tiny_spec(steps=SECRET_STEP.replace("{url}", "http://203.0.113.5:8000/v1")))
    assert main(["grid", str(far), "--api-key-env", "FWSAPP_TEST_SECRET", "--dry-run", "--db", str(db)]) == 0
    assert ("The judge key in $FWSAPP_TEST_SECRET goes to http://203.0.113.5:8000/v1, which is not this machine."
            in capsys.readouterr().err)


@pytest.mark.parametrize("dataset", ["/etc/passwd", "../../../etc/hostname", "cache/fwsapp.duckdb", 5])
def test_an_uploaded_spec_names_only_shipped_or_uploaded_datasets(dataset):
    from fwsapp.orchestration.grid import SpecError, load_spec

    text = tiny_spec(grid=f"[grid.datasets]\nqa = {json.dumps(dataset)}")
    with pytest.raises(SpecError) as refused:
        load_spec("upload.toml", text)
    assert ("may name only the shipped data" in str(refused.value) or "must be a file path" in str(refused.value))
    assert "root:" not in str(refused.value)  # no line of the file it named
    shipped = tiny_spec(grid='[grid.datasets]\nqa = "data/demo_qa.json"')
    assert load_spec("upload.toml", shipped).runs[0].dataset.endswith("data/demo_qa.json")


@pytest.mark.parametrize("grid, method, steps, expected", [
    ("[grid.datasets]\nqa = 5", "", "", "[grid.datasets] qa must be a file path (a string), not 5."),
    ("", "params = { delta = { a = 1 } }", "", "KGW: delta={'a': 1} is not a number"),
    ("", "params = { delta = [[1.0, 2.0]] }", "", "KGW: delta=[1.0, 2.0] is not a number"),
    ("", "params = { delta = true }", "", "KGW: delta=True must be a number, not true or false."),
    ("", "params = { prefix_length = 1.5 }", "", "KGW: prefix_length=1.5 must be a whole number."),
    ("", "params = { delta = [] }", "", "delta is an empty sweep"),
    ("", "", 'analyze = { recognizer = ["mesh"] }', "[steps] analyze recognizer must be one of trained, mesh"),
    ("", "", 'analyze = { threshold = "0.5" }', "[steps] analyze threshold must be a number at least 0 and at most 1"),
    ("", "", "analyze = { threshold = 1.5 }", "threshold must be a number at least 0 and at most 1, not 1.5."),
    # A grid's runs are generated, their entropies their own model's: the key was read and never used.
    ("", "", 'analyze = { entropy_model = "m" }', "[steps] analyze has no key 'entropy_model'"),
    ("", "", 'judge = { backend = "local", concurrency = "8" }', "concurrency must be a whole number of at least 1"),
    ("", "", 'judge = { backend = "local", concurrency = 0 }', "concurrency must be a whole number of at least 1"),
    ("", "", 'judge = { backend = "local", max_attempts = 0 }', "max_attempts must be a whole number of at least 1"),
    ("", "", 'judge = { backend = "local", budget = "1" }', "[steps] judge budget must be a number at least 0"),
    ("", "", 'judge = { backend = "local", budget = 1 }', "[steps] judge: A budget of $1 cannot be kept with"),
    ("", "", 'judge = { backend = "local", swap = "no" }', "[steps] judge swap must be true or false, not 'no'."),
    ("", "", 'judge = { backend = "local", timeout = -1 }', "[steps] judge timeout must be a number above 0"),
    ("", "", 'judge = { backend = ["local"] }', "[steps] judge backend must be one of"),
    ("", "", 'judge = { backend = "compatible", model = "m" }', "needs base_url and model"),
    ("", "", 'judge = { backend = "openai", base_url = "http://127.0.0.1:9/v1" }', "The openai judge backend takes no base URL"),
    ('[grid.datasets]\nsummarization = "missing.json"', "", "", "names summarization, which is not in [grid] tasks"),
    ("seeds = [1099511627776]", "", "", "[grid] seeds must be a whole number from 0 to 2,147,483,647"),
    ("", "", 'attack = [{ name = "typo", seed = -1 }]', "[steps] attack 1 seed must be a whole number from 0"),
    ("seeds = [" + ", ".join(map(str, range(1000))) + "]", "params = { delta = [" + ", ".join(
        f"{0.1 + i / 100:.2f}" for i in range(1000)) + "] }", "", "makes 1,000,000 runs, more than 10,000"),
])
def test_every_spec_value_is_checked_before_any_work(tmp_path, db, capsys, grid, method, steps, expected):
    """Issue 38: each of these reached the code as it was (a traceback), or passed the dry run and failed after
    generation. Each is now one line, from the dry run as from the run, with nothing stored changed."""
    import time

    spec = tmp_path / "hostile.toml"
    spec.write_text(tiny_spec(steps=steps, grid=grid, method=method))
    before = row_counts(db)
    for dry_run in (["--dry-run"], []):
        started = time.perf_counter()
        assert main(["grid", str(spec), *dry_run, "--db", str(db)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and expected in err[0], err
        assert time.perf_counter() - started < 10
    assert row_counts(db) == before


def test_one_setting_is_one_run_and_a_byte_order_mark_is_no_error(tmp_path, capsys):
    """`delta = 2`, `2.0` and `--param delta=2` are one run id; [2.0, 2.0, 2] is one run; a spec saved with a BOM
    loads, as dataset files do."""
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.orchestration.grid import load_spec
    from fwsapp.watermark.methods import parse_params

    spec = tmp_path / "bom.toml"
    spec.write_text("\ufeff" + tiny_spec(method="params = { delta = [2.0, 2.0, 2] }"),
                    encoding="utf-8")
    [run] = load_spec(spec).runs
    assert run.run_id() == RunConfig(task="qa", method="KGW", params=parse_params("KGW", ["delta=2"]), n=1,
                                     max_new_tokens=4).run_id()
