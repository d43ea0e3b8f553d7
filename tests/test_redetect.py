"""Reading the watermarks users have: CUDA green lists, the paper's tokenizers, and re-detection.

The paper's published KGW z-scores are GPU output (MarkLLM on CUDA): re-detecting its logs with the
emulated CUDA generator must give every one of them back.
"""
import csv
import json
import time

import numpy as np
import pytest
import torch

from fwsapp.cli import main
from fwsapp.orchestration.importer import LogFile, import_logs
from fwsapp.detection.redetect import redetect, scored_texts, set_summaries
from fwsapp.store import Store
from fwsapp.models.tokenizers import load_tokenizer
from fwsapp.watermark import cuda_rng
from fwsapp.watermark.factory import create
from fwsapp.watermark.rng import VocabularyShuffle
from tests.conftest import PROJECT, SHARED_DATA

PAPER = SHARED_DATA / "paper"
needs_paper_logs = pytest.mark.skipif(not PAPER.exists(), reason="../shared/data/paper is not beside the project")
TASKS = {"completion": "HQA", "qa": "HQA2", "summarization": "MEQS"}


def import_paper(store, model, task):
    stem = PAPER / f"KGW-g0.5-d2-{model}-{TASKS[task]}"
    return import_logs(store, method="KGW", model=model, task_name=task,
                       generations=LogFile.from_path(f"{stem}.generations.json"),
                       detection=LogFile.from_path(f"{stem}.detection.json"))


# -- the emulated CUDA generator -------------------------------------------------------------------

@pytest.mark.parametrize("n, seed, blocks", [(100, 3, None), (32000, 0, 3), (49152, 15485863, None), (128256, 7, 492)])
def test_emulated_randperm_is_a_permutation_and_its_shortcuts_agree(n, seed, blocks):
    permutation = cuda_rng.randperm(n, seed, blocks)
    assert np.array_equal(np.sort(permutation), np.arange(n))
    mask = cuda_rng.green_mask(n, seed, n // 2, blocks)
    assert mask.sum() == n // 2 and mask[permutation[: n // 2]].all()
    for token in (0, n // 3, n - 1):
        assert permutation[cuda_rng.rank(n, seed, token, blocks)] == token


@pytest.mark.parametrize("n, blocks", [(700, 2), (32000, None), (128256, 492)])
def test_a_tokens_own_key_settles_its_side_of_the_boundary_as_the_whole_permutation_does(n, blocks):
    settled = 0
    for seed in (1, 15485863, 2**40 + 5):
        position = np.empty(n, dtype=np.int64)
        position[cuda_rng.randperm(n, seed, blocks)] = np.arange(n)
        for limit in (n // 4, n // 2, n - 1):
            for token in range(0, n, max(1, n // 400)):
                below = cuda_rng.rank_below_by_key(n, seed, token, limit, blocks)
                if below is not None:
                    settled += 1
                    assert below == (position[token] < limit), (seed, limit, token)
    # Only keys near the boundary stay unsettled: a band of about ±√(35/n) of the range.
    assert settled > 0.5 * 9 * min(n, 400 + 1)


def test_equal_keys_are_shuffled_as_the_island_kernel_does():
    # 32,000 elements on 3 blocks, seed 0: one pair of equal keys, which the island shuffle must resolve.
    keys, _ = cuda_rng._keys(32000, 0, 3)
    ordered = np.sort(keys)
    assert (np.diff(ordered) == 0).sum() == 1
    assert np.array_equal(np.sort(cuda_rng.randperm(32000, 0, 3)), np.arange(32000))


def test_known_cuda_permutations():
    """First and last entries of CUDA randperm, as the paper's GPU logs confirm them (see below)."""
    assert cuda_rng.randperm(32000, 15485863)[:8].tolist() == [26322, 9324, 23465, 6074, 21699, 2578, 5273, 29255]
    assert cuda_rng.randperm(128256, 15485863)[:4].tolist() == [36673, 3559, 88721, 81312]
    assert cuda_rng.randperm(128256, 15485863, 492)[-4:].tolist() == [123724, 81107, 110238, 14441]
    assert [cuda_rng.key_bits(n) for n in (100, 20000, 32000, 128256)] == [16, 31, 33, 37]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU to compare with the real generator")
@pytest.mark.parametrize("n", [1000, 30000, 32000, 49152, 128256])
def test_emulation_equals_torch_randperm_on_cuda(n):
    generator = torch.Generator(device="cuda")
    for seed in (0, 15485863, 2**33 + 5):
        expected = torch.randperm(n, generator=generator.manual_seed(seed), device="cuda").cpu().numpy()
        assert np.array_equal(cuda_rng.randperm(n, seed), expected)


def test_rng_choice_and_its_checks():
    assert not np.array_equal(VocabularyShuffle(1000, "cuda").permutation(5), VocabularyShuffle(1000, "cpu").permutation(5))
    cpu = torch.randperm(1000, generator=torch.Generator().manual_seed(5)).numpy()
    assert np.array_equal(VocabularyShuffle(1000, "cpu").permutation(5), cpu)
    with pytest.raises(ValueError, match="rng='gpu' is out of range; it must be one of cuda, cpu"):
        create("KGW", 1000, {"rng": "gpu"})
    with pytest.raises(ValueError, match="cuda_blocks"):
        create("KGW", 1000, {"cuda_blocks": -1})


def test_generation_and_detection_share_the_cuda_lists(lm):
    """The processor biases exactly the list the detector counts, under the default (CUDA) generator."""
    watermark = create("KGW", lm.vocab_size)
    assert watermark.params["rng"] == "cuda"
    biased = watermark.logits_processor()(torch.tensor([[11, 42]]), torch.zeros(1, lm.vocab_size))
    green = set(torch.nonzero(biased[0]).flatten().tolist())
    flags = watermark.detect(sorted(green)[:5] + [next(t for t in range(lm.vocab_size) if t not in green)], [42])
    assert flags.token_flags[0] == 1 and flags.token_flags[-1] == 0


def test_green_lists_are_drawn_once_per_process_and_their_cache_is_bounded_by_memory(monkeypatch):
    from fwsapp.watermark import kgw
    from fwsapp.watermark.rng import VocabularyShuffle

    cache = kgw.GreenListCache(max_bytes=3 * (32000 // 8))  # three lists of 32,000 bits
    drawn = []
    draw = VocabularyShuffle.green_mask
    monkeypatch.setattr(VocabularyShuffle, "green_mask", lambda self, seed, size: drawn.append(seed) or draw(self, seed, size))
    lists = kgw.GreenLists(32000, 0.5, 15485863, 1, rng="cpu", cache=cache)
    for seed in range(10):
        lists.packed(seed)
    assert [key[-1] for key in cache._lists] == [7, 8, 9] and drawn == list(range(10))
    # Another detector at another δ draws none of the lists the first drew; another γ is another list.
    again = create("KGW", 32000, {"rng": "cpu", "delta": 4.0}).green_lists
    again._cache = cache  # the process's cache, as `lists` has it
    assert np.array_equal(again.packed(9), lists.packed(9)) and drawn == list(range(10))
    half = kgw.GreenLists(32000, 0.25, 15485863, 1, rng="cpu", cache=cache)
    assert not np.array_equal(half.packed(9), lists.packed(9)) and drawn == [*range(10), 9]


# -- tokenizers ------------------------------------------------------------------------------------

def test_paper_tokenizers_load_offline():
    mistral = load_tokenizer("mistral-v1")
    assert mistral.vocab_size == 32000
    # sentencepiece itself keeps a double space as its own piece, as MarkLLM's Mistral tokenizer did.
    assert mistral.encode("Hello  world") != mistral.encode("Hello world")
    llama = load_tokenizer("llama-3")
    assert llama.vocab_size == 128256
    assert llama.encode("Type 2 diabetes mellitus.") == [941, 220, 17, 20335, 54448, 36891, 13]


@needs_paper_logs
def test_ids_are_the_tokenizers_own_on_the_papers_answers_even_after_a_padded_call():
    """A fast tokenizer's texts, one at a time or in a batch, are encoded by its backend directly: the ids must be
    transformers' own, text by text, and a padded call in between (generation's, on a model's tokenizer) must not pad
    them."""
    from fwsapp.models.tokenizers import from_huggingface, llama_3_huggingface

    answers = json.loads((PAPER / "KGW-g0.5-d2-jsl-HQA2.generations.json").read_text())
    texts = [row[kind] for row in answers[:40] for kind in ("watermarked_text", "natural_text")] + ["", " ", "a\n\n b"]
    hugging_face = llama_3_huggingface()
    hugging_face.pad_token = "<|end_of_text|>"
    tokenizer = from_huggingface("llama-3", hugging_face)
    own = [hugging_face(text, add_special_tokens=False)["input_ids"] for text in texts]
    assert tokenizer.encode_many(texts) == own
    assert [tokenizer.encode(text) for text in texts] == own
    hugging_face(["a"], padding="max_length", max_length=1024)  # pads one text as it pads a batch
    assert [tokenizer.encode(text) for text in texts] == own
    hugging_face(["a", "a longer text"], padding=True)
    assert tokenizer.encode_many(texts) == own
    assert tokenizer.encode_many(texts) == own  # and again, once transformers' call has reset the padding


def test_a_hub_that_accepts_and_never_answers_is_one_line_within_its_deadline(monkeypatch):
    """huggingface_hub 2 asks with no timeout at all: a silent mirror hung `detect` for good (issue 48, item 19)."""
    import socket

    from huggingface_hub import constants

    from fwsapp import models

    silent = socket.create_server(("127.0.0.1", 0))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    monkeypatch.setattr(models, "HUB_TIMEOUT_S", 1)
    started = time.monotonic()
    with silent, pytest.raises(models.ModelLoadError, match=r"did not answer within 1 s \(ReadTimeout\)"):
        load_tokenizer("no-such-org/no-such-model")
    assert time.monotonic() - started < 10


def test_a_hub_that_cannot_be_reached_is_said_so_not_called_slow(monkeypatch):
    """Offline, the connection is refused at once; the message said the Hub "did not answer within 30 s"."""
    import socket

    from huggingface_hub import constants

    from fwsapp import models

    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(models.ModelLoadError, match=r"the Hugging Face Hub could not be reached \(ConnectError\)"):
        load_tokenizer("no-such-org/no-such-model")


# -- the paper's published scores ----------------------------------------------------------------------

@needs_paper_logs
@pytest.mark.parametrize("model, task, blocks", [
    ("biomistral", "completion", 0), ("biomistral", "qa", 0), ("biomistral", "summarization", 0),
    ("jsl", "completion", 0), ("jsl", "qa", 0), ("jsl", "summarization", 492),
])
def test_redetecting_the_paper_logs_reproduces_every_published_z_score(tmp_path, model, task, blocks):
    store = Store(tmp_path / "paper.duckdb")
    run_id = import_paper(store, model, task)
    published = store.detections([run_id])
    tokenizer = load_tokenizer({"biomistral": "mistral-v1", "jsl": "llama-3"}[model])
    set_id = redetect(store, run_id, "KGW", {"cuda_blocks": blocks}, tokenizer)
    ours = store.redetections([set_id])
    merged = published.merge(ours, on=["sample_idx", "text_kind"], suffixes=("_published", ""))
    # Every published score, watermarked and reference, paired with its own text and reproduced.
    assert len(merged) == len(published) and set(published.text_kind) == {"watermarked", "reference"}
    assert np.max(np.abs(merged.score - merged.score_published)) < 1e-6
    summary = set_summaries(store, [run_id])[run_id][0]
    assert summary["agreement"]["n"] == len(published) and summary["agreement"]["max_abs_diff"] < 1e-6
    if task == "qa":
        # The CPU generator, today's MarkLLM on a CPU, does not read these GPU watermarks (checked on 20 texts of one
        # task per model: each of its 128,256-entry permutations costs Llama 3's a millisecond a token, and all 400
        # texts took 42 s).
        cpu = create("KGW", tokenizer.vocab_size, {"rng": "cpu"})
        texts = {index: text for index, kind, text in scored_texts(store.generations(run_id)) if kind == "watermarked"}
        chosen = merged[merged.text_kind == "watermarked"].head(20)
        read = cpu.detect_many([(tokenizer.encode(texts[index]), ()) for index in chosen.sample_idx])
        assert np.max(np.abs(np.array([found.score for found in read]) - chosen.score_published.to_numpy())) > 1


@needs_paper_logs
def test_import_pairs_scores_by_skipping_the_texts_markllm_skipped(tmp_path):
    store = Store(tmp_path / "paper.duckdb")
    run_id = import_paper(store, "biomistral", "summarization")  # 199 watermarked scores for 200 texts
    scores = store.detections([run_id])
    watermarked = scores[scores.text_kind == "watermarked"]
    assert len(watermarked) == 199 and 144 not in set(watermarked.sample_idx)  # row 144's output is only its prompt
    assert store.generations(run_id).watermarked_text[144] == ""
    assert len(scores[scores.text_kind == "reference"]) == 200
    assert import_paper(store, "biomistral", "summarization") == run_id  # the same files again: no change
    assert store.count("detections", run_id) == 399


@needs_paper_logs
def test_a_log_scored_under_other_settings_is_said_so_and_the_settings_given_at_import_reach_its_attacks(tmp_path,
                                                                                                       capsys,
                                                                                                       monkeypatch):
    """The paper's jsl summarization log was made on an RTX 3090-class GPU (492 CUDA blocks). Imported without that,
    detection said "reproduced within 4.1" and an attack was read against other green lists (clean TPR 0.05, as if
    the watermark were gone); imported with `--param cuda_blocks=492`, detection and attacks read the log's lists."""
    from fwsapp.robustness.attack_sets import CLEAN, summaries

    stem = "KGW-g0.5-d2-jsl-MEQS"  # its first 20 answers (the 21st is empty), the names kept: they say γ and δ
    generations = json.loads((PAPER / f"{stem}.generations.json").read_text())[:20]
    scores = {kind: values[:20] for kind, values in
              json.loads((PAPER / f"{stem}.detection.json").read_text()).items()}
    (tmp_path / f"{stem}.generations.json").write_text(json.dumps(generations))
    (tmp_path / f"{stem}.detection.json").write_text(json.dumps(scores))
    db = str(tmp_path / "jsl.duckdb")
    logs = ["--method", "KGW", "--model", "jsl", "--task", "summarization", "--db", db,
            "--generations", str(tmp_path / f"{stem}.generations.json"),
            "--detection", str(tmp_path / f"{stem}.detection.json")]

    def run_through(*args) -> str:
        capsys.readouterr()
        assert main(list(args)) == 0
        return capsys.readouterr().out

    plain = run_through("import", *logs).strip()
    found = run_through("detect", "--run", plain, "--db", db)
    assert "the imported scores NOT reproduced: " in found and "import the log again with those --param" in found
    assert "NOT reproduced" in run_through("attack", "--run", plain, "--attack", "word-deletion", "--db", db)
    # Under settings of one's own choosing the scores are expected to differ: no advice.
    found = run_through("detect", "--run", plain, "--param", "gamma=0.25", "--db", db)
    assert "NOT reproduced" in found and "--param" not in found

    given = run_through("import", *logs, "--param", "cuda_blocks=492").strip()
    assert given != plain and Store(db, read_only=True).run(given)["params"]["cuda_blocks"] == 492
    assert "the imported scores of 40 texts reproduced exactly" in run_through("detect", "--run", given, "--db", db)
    attacked = run_through("attack", "--run", given, "--attack", "word-deletion", "--db", db)
    assert "NOT reproduced" not in attacked
    baselines = {row["run_id"]: row for row in summaries(Store(db, read_only=True)) if row["attack_label"] == CLEAN}
    assert baselines[given]["baseline_note"] is None and baselines[given]["auroc"] > 0.7  # the paper: 0.786 on all 200
    assert baselines[plain]["baseline_note"].startswith("the imported scores NOT reproduced")
    assert baselines[plain]["auroc"] < baselines[given]["auroc"]
    robustness = run_through("report", "--format", "markdown", "--db", db).split("## Robustness")[1]
    assert robustness.count("NOT reproduced") == 2  # the plain run's clean row and its attack's, in a Baseline note
    # The Detect page says it above its detection sets, of the one run whose settings are not its log's.
    from tests.conftest import shown
    from tests.test_pages import page_app

    monkeypatch.setenv("FWSAPP_DB", db)
    warnings = [shown(warning.value) for warning in page_app("detect").warning if "NOT reproduced" in warning.value]
    assert len(warnings) == 1 and plain in warnings[0] and "import the log again" in warnings[0]
    # And the Robustness page above its figures, where the end of a row's label was cut off in the table.
    robustness = page_app("robustness")
    warnings = [shown(warning.value) for warning in robustness.warning if "NOT reproduced" in warning.value]
    assert len(warnings) == 1 and "imported, delta=2, gamma=0.5" in warnings[0]
    assert not any("NOT reproduced" in str(label) for frame in robustness.dataframe for label in frame.value.index)


# -- the command ---------------------------------------------------------------------------------------

def test_detect_command_writes_the_csv_and_a_rerun_computes_nothing(qa_run, tmp_path, capsys):
    import shutil

    store, _, run_id = qa_run
    store.row("CHECKPOINT")
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(store.path, db)
    out = tmp_path / "scores.csv"
    args = ["detect", "--run", run_id, "--tokenizer", "smollm2-135m-instruct", "--out", str(out), "--force", "--db", db]
    assert main(args) == 0
    with open(out) as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["sample_idx", "text", "score", "num_tokens_scored"]
    assert {row["text"] for row in rows} == {"watermarked", "unwatermarked", "reference"} and len(rows) == 12
    # Generated with the run's parameters (rng=cuda, emulated) and its prompt as context; scored alone, as
    # MarkLLM scores a text, the watermark shows; under the CPU generator's lists it does not.
    watermarked = [float(row["score"]) for row in rows if row["text"] == "watermarked"]
    assert sum(watermarked) / len(watermarked) > 4
    assert main(["detect", "--run", run_id, "--tokenizer", "smollm2-135m-instruct", "--param", "rng=cpu",
                 "--out", str(out), "--force", "--db", db]) == 0
    with open(out) as handle:
        assert max(float(row["score"]) for row in csv.DictReader(handle) if row["text"] == "watermarked") < 2.5
    revision = Store(db).revision()
    assert main(args) == 0
    assert Store(db).revision() == revision
    capsys.readouterr()
    assert main(["report", "--db", db, "--format", "json"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    cuda, cpu = run["redetections"]
    assert cuda["method"] == "KGW" and cuda["tokenizer"] == "smollm2-135m-instruct" and cuda["auroc"] == 1.0
    assert cuda["params"]["rng"] == "cuda" and cpu["params"]["rng"] == "cpu"
    assert cuda["agreement"] is None  # a generated run: nothing imported to agree with
    assert main(["detect", "--run", run_id, "--param", "gamma=2", "--db", db]) == 2
    assert "gamma" in capsys.readouterr().err


def test_detect_evidence_gives_every_text_a_valid_record_kept_for_the_export_and_fills_an_older_sets(qa_run, tmp_path,
                                                                                                         capsys):
    import shutil

    import jsonschema

    from fwsapp.results.export import run_table
    from fwsapp.watermark.methods import info

    store, _, run_id = qa_run
    store.row("CHECKPOINT")
    db = str(tmp_path / "copy.duckdb")
    shutil.copy(store.path, db)
    copy = Store(db)
    set_id = redetect(copy, run_id, "KGW", {}, load_tokenizer("smollm2-135m-instruct"))
    scores = copy.redetections([set_id])
    copy.row("UPDATE redetections SET evidence = NULL")  # a set scored before evidence records were kept
    assert run_table(copy, run_id).evidence_watermarked.isna().all()
    out = tmp_path / "evidence.jsonl"
    assert main(["detect", "--run", run_id, "--evidence", "--out", str(out), "--db", db]) == 0
    assert "reference: 4 not_watermarked; unwatermarked: 4 not_watermarked" in capsys.readouterr().out
    lines = out.read_text().splitlines()
    assert len(lines) == 12
    schema = json.loads((PROJECT / "docs" / "evidence-record.schema.json").read_text())
    key = str(info("KGW").defaults["hash_key"])
    for line in lines:
        assert key not in line
        record = json.loads(line)
        jsonschema.validate(record["evidence"], schema)
        evidence = record["evidence"]
        assert evidence["is_watermarked"] == (evidence["verdict"] == "watermarked")
    verdicts = [(json.loads(line)["text_kind"], json.loads(line)["evidence"]["verdict"]) for line in lines]
    assert verdicts.count(("watermarked", "watermarked")) >= 3 and \
        sum(verdict == "watermarked" for kind, verdict in verdicts if kind != "watermarked") == 0
    after = Store(db).redetections([set_id])
    assert after.drop(columns="evidence").equals(scores.drop(columns="evidence"))  # completed, not scored again
    exported = run_table(Store(db), run_id)
    assert [json.loads(value) for value in exported.evidence_watermarked] == \
        [json.loads(line)["evidence"] for line in lines if json.loads(line)["text_kind"] == "watermarked"]
    assert main(["detect", "--run", run_id, "--evidence", "--window", "16", "--db", db]) == 2
    assert "drop --window" in capsys.readouterr().err


def test_a_one_token_text_gets_no_score_and_every_other_score_stays_with_its_own_text(qa_run, tmp_path):
    import shutil

    store, _, run_id = qa_run
    store.row("CHECKPOINT")
    tokenizer = load_tokenizer("smollm2-135m-instruct")
    assert len(tokenizer.encode("Yes")) == 1
    scored = {}
    for name in ("as generated", "one short"):
        shutil.copy(store.path, tmp_path / f"{name}.duckdb")
        copy = Store(tmp_path / f"{name}.duckdb")
        if name == "one short":
            copy.row("UPDATE generations SET watermarked_text = 'Yes' WHERE run_id = ? AND sample_idx = 1",
                                  [run_id])
        set_id = redetect(copy, run_id, "KGW", {}, tokenizer)
        scored[name] = copy.redetections([set_id]).set_index(["sample_idx", "text_kind"])
    short = scored["one short"].loc[(1, "watermarked")]
    assert np.isnan(short.score) and short.num_tokens_scored == 0
    # The short text sits mid-batch; the texts after it keep their own scores, z and p.
    columns = ["score", "z", "p", "num_tokens_scored"]
    others = scored["as generated"].drop(index=(1, "watermarked"))[columns]
    assert len(others) == 11 and others[["score", "z", "num_tokens_scored"]].notna().all().all()
    assert others.equals(scored["one short"].drop(index=(1, "watermarked"))[columns])


def test_runs_stored_before_the_rng_parameter_keep_the_cpu_lists(tmp_path):
    from tests.conftest import database_at_schema

    path = tmp_path / "v4.duckdb"
    connection = database_at_schema(path, 4)
    for run_id, method, imported in (("old", "KGW", False), ("exp", "EXP-edit", False), ("imp", "KGW", True)):
        connection.execute("INSERT INTO runs VALUES (?, ?, '{}', 'm', 'qa', ?, '{\"gamma\": 0.5}', 1, 1, ?, "
                           "'higher', 'done', now())", [run_id, run_id, method, imported])
    connection.close()
    store = Store(path)
    assert store.run("old")["params"] == {"gamma": 0.5, "rng": "cpu"}
    assert store.run("exp")["params"] == {"gamma": 0.5} and store.run("imp")["params"] == {"gamma": 0.5}


def test_exp_edit_reads_markllms_key_sequence_and_aligns_every_token():
    """MarkLLM's ξ comes from its pure-Python Mersenne twister (the test oracle, loaded from its file: the
    package itself needs a Cython build); xi=markllm draws the same numbers, as float32 like MarkLLM's."""
    import importlib.util

    spec = importlib.util.find_spec("markllm")
    if spec is None:
        pytest.skip("markllm==0.1.5 is the test oracle")
    from pathlib import Path

    path = Path(spec.submodule_search_locations[0]) / "watermark" / "exp_edit" / "mersenne.py"
    module_spec = importlib.util.spec_from_file_location("markllm_mersenne", path)
    mersenne = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(mersenne)
    from fwsapp.watermark.exp_edit import key_sequence

    oracle = mersenne.MersenneRNG(42)
    expected = np.array([oracle.rand() for _ in range(3 * 500)], dtype=np.float32).reshape(3, 500)
    assert np.array_equal(key_sequence(42, 3, 500, "markllm"), expected)
    watermark = create("EXP-edit", 500, {"xi": "markllm", "align": "all", "sequence_length": 5, "n_runs": 3,
                                         "pseudo_length": 3})
    assert watermark.detect(list(range(12))).num_tokens_scored == 12
    first = create("EXP-edit", 500, {"sequence_length": 5, "n_runs": 3, "pseudo_length": 3})
    assert first.detect(list(range(12))).num_tokens_scored == 5


@pytest.mark.model
def test_a_detector_that_reads_a_model_loads_the_runs_own_not_its_tokenizers_name(lm, tmp_path):
    """A SWEET run of BioMistral-7B, detected again (detect, the Detect page, an attack's detection) or audited: its
    entropy gate loaded the model named by the run's tokenizer, "mistral-v1", which is no model, so the detection
    failed; the run's own model reads its texts."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.orchestration import pipeline

    store = Store(tmp_path / "sweet.duckdb")
    run_id = run_generation(RunConfig(task="qa", method="SWEET", n=2, max_new_tokens=12, batch_size=2, seed=3),
                            store, lm)
    model = "BioMistral/BioMistral-7B"  # as stored on a GPU server: its texts tokenised by mistral-v1
    with store.transaction() as cursor:
        cursor.execute("UPDATE runs SET model = ? WHERE run_id = ?", [model, run_id])
    asked = []

    def loader(name):
        asked.append(name)
        return lm  # its vocabulary holds mistral-v1's ids

    [found] = pipeline.detect(store, [run_id], loader)
    assert asked == [model] and found.tokenizer == "mistral-v1"
    pipeline.audit_keys(store, run_id, loader, 2)
    pipeline.detect(store, [run_id], loader, tokenizer="mistral-v1")  # its own, named (the Detect page's form does)
    assert asked == [model, model, model]
    pipeline.detect(store, [run_id], loader, tokenizer=lm.name)  # a tokenizer named: the model of that name
    assert asked[-1] == lm.name
    store.close()


def test_a_detection_set_of_a_generated_run_says_it_has_no_imported_score_to_compare_with():
    """The Detect page's detection sets of generated runs read "None" under "max |Δ| vs imported"."""
    from fwsapp.results.report import redetection_comparison

    entry = {"set_id": "det-1", "method": "KGW", "tokenizer": "t", "params": {"gamma": 0.25}, "deduplicate": False,
             "auroc": 1.0, "tpr_at_fpr": {}, "texts_scored": 8, "negatives": 8, "agreement": None}
    imported = {**entry, "set_id": "det-2", "agreement": {"n": 8, "max_abs_diff": 0.0, "differing": 0}}
    table = redetection_comparison({"generated": [entry], "imported": [imported]})
    assert table["max |Δ| vs imported"].tolist() == ["no imported score", 0.0]
