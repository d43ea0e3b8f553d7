import os
import signal
import subprocess
import sys
import time

import pytest

from fwsapp.models.teacher_forcing import token_entropy
from fwsapp.generation.generate import run_generation
from fwsapp.generation.run_config import RunConfig
from fwsapp.results.report import build_report
from fwsapp.store import Store
from tests.conftest import PROJECT

SMALL = dict(task="summarization", method="kgw", n=3, max_new_tokens=12, batch_size=2, seed=3)


def test_qa_demo_run_separates_watermarked_from_unwatermarked(qa_run):
    store, config, run_id = qa_run
    entry = next(run for run in build_report(store)["runs"] if run["run_id"] == run_id)
    assert entry["n"] == 4 and entry["imported"] is False and entry["method"] == "KGW"
    assert entry["detection"]["mean_score"]["watermarked"] > 4
    assert entry["detection"]["mean_score"]["unwatermarked"] < 2
    assert entry["detection"]["auroc"] == 1.0
    assert entry["quality"] is None and entry["judge"] is None
    # Entropies are recorded while generating, so their bins are known; entities need `analyze` first.
    bins = entry["entities"]["entropy_bins"]
    assert sum(bins["watermarked"].values()) == pytest.approx(100) and bins["reference"]["low"] is None
    assert entry["entities"]["introduced_per_text"] == {"watermarked": None, "unwatermarked": None}


def test_stored_rows_hold_ids_entropies_and_text(qa_run):
    store, config, run_id = qa_run
    rows = store.generations(run_id)
    assert len(rows) == 4
    for row in rows.itertuples():
        assert len(row.watermarked_ids) == len(row.watermarked_entropy) == 64  # min_new_tokens = max_new_tokens
        assert row.watermarked_text and row.unwatermarked_text and row.reference
        assert all(value >= 0 for value in row.unwatermarked_entropy)
    scores = store.detections([run_id])
    assert set(scores.num_tokens_scored) == {64}  # generated tokens only, never the prompt


def test_running_the_same_config_twice_adds_no_rows(qa_run, lm):
    store, config, run_id = qa_run
    before = (store.count("generations", run_id), store.count("detections", run_id))
    assert run_generation(RunConfig(**{**config.__dict__}), store, lm) == run_id
    assert (store.count("generations", run_id), store.count("detections", run_id)) == before


def test_a_crashed_run_resumes_to_the_same_texts_as_an_uninterrupted_one(lm, tmp_path):
    class Crash(Exception):
        pass

    def crash_after_first_batch(done, total, note=""):
        if done == 2:  # the first batch of two is stored; crash inside the second
            raise Crash

    crashed = Store(tmp_path / "crashed.duckdb")
    with pytest.raises(Crash):
        run_generation(RunConfig(**SMALL), crashed, lm, progress=crash_after_first_batch)
    run_id = RunConfig(**SMALL).run_id()
    assert crashed.count("generations", run_id) == 2
    # An error inside the job marks the run failed with it (a killed process, below, leaves it running).
    assert (crashed.run(run_id)["status"], crashed.run(run_id)["status_reason"]) == ("failed", "Crash")
    run_generation(RunConfig(**SMALL), crashed, lm)
    assert crashed.run(run_id)["status"] == "done"

    clean = Store(tmp_path / "clean.duckdb")
    run_generation(RunConfig(**SMALL), clean, lm)
    columns = ["sample_idx", "watermarked_text", "unwatermarked_text"]
    assert crashed.generations(run_id)[columns].equals(clean.generations(run_id)[columns])


def test_a_different_seed_gives_a_different_run(lm):
    assert RunConfig(**SMALL).run_id() != RunConfig(**{**SMALL, "seed": 4}).run_id()
    assert RunConfig(**SMALL).run_id() == RunConfig(**{**SMALL, "method": "KGW"}).run_id()


@pytest.mark.model  # the command it starts loads the embedded model
def test_sigkill_mid_run_then_rerun_ends_with_exactly_n_samples(tmp_path):
    db = tmp_path / "killed.duckdb"
    command = [sys.executable, "-m", "fwsapp", "generate", "--task", "qa", "--method", "KGW", "--n", "4",
               "--max-new-tokens", "12", "--batch-size", "1", "--seed", "11", "--db", str(db)]
    log_path = tmp_path / "progress.log"
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=log, text=True)
        deadline = time.time() + 240
        while time.time() < deadline and "2/4" not in log_path.read_text():
            time.sleep(0.2)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
    assert "2/4" in log_path.read_text(), "the job never reached the second sample"

    finished = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    run_id = finished.stdout.strip()
    store = Store(db)
    assert store.count("generations", run_id) == 4
    assert store.count("detections", run_id) == 8
    assert sorted(store.generations(run_id).sample_idx) == [0, 1, 2, 3]


def test_entropy_of_a_known_distribution():
    import math

    import torch

    uniform = torch.zeros(1, 8)
    assert token_entropy(uniform).item() == pytest.approx(math.log(8))
    two = torch.tensor([[0.0, 0.0, -math.inf, -math.inf]])
    assert token_entropy(two).item() == pytest.approx(math.log(2))


def test_a_prompt_longer_than_the_context_is_cut_from_the_left_with_a_warning(lm, store, tmp_path, monkeypatch):
    import json

    import pytest

    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig

    dataset = tmp_path / "long.json"
    monkeypatch.setattr(lm.model.config, "max_position_embeddings", 256)  # a small context keeps the test fast
    long_prompt = " ".join(["gout"] * 2000) + " What is gout?"
    dataset.write_text(json.dumps([{"prompt": long_prompt, "reference": "Arthritis."}]))
    config = RunConfig(task="qa", method="KGW", dataset=str(dataset), n=1, max_new_tokens=4, batch_size=1)
    with pytest.warns(UserWarning, match=r"sample 0: the prompt has [\d,]+ tokens, more than the [\d,]+ that fit"):
        run_id = run_generation(config, store, lm)
    assert store.count("generations", run_id) == 1


def test_a_second_method_on_the_same_prompts_reuses_the_unwatermarked_batches(lm, store, monkeypatch):
    import fwsapp.generation.generate as generate

    first = run_generation(RunConfig(task="qa", method="KGW", n=4, max_new_tokens=8, batch_size=2, seed=7), store, lm)
    calls = []
    original = generate.generate_batch
    monkeypatch.setattr(generate, "generate_batch",
                        lambda *args, **kwargs: calls.append(args[4]) or original(*args, **kwargs))
    second = run_generation(RunConfig(task="qa", method="Unigram", n=3, max_new_tokens=8, batch_size=2, seed=7), store, lm)
    assert len(calls) == 2  # the two watermarked batches only
    kgw, unigram = store.generations(first), store.generations(second)
    assert unigram.unwatermarked_text.tolist() == kgw.unwatermarked_text.tolist()[:3]
    assert [list(ids) for ids in unigram.unwatermarked_ids] == [list(ids) for ids in kgw.unwatermarked_ids[:3]]
    scores = store.detections([second])
    assert scores[scores.text_kind == "unwatermarked"].detector.eq("Unigram").all()  # scored by its own detector
    other_seed = run_generation(RunConfig(task="qa", method="Unigram", n=2, max_new_tokens=8, batch_size=2, seed=8),
                                store, lm)
    assert len(calls) == 4  # a different seed shares nothing
    assert store.generations(other_seed).unwatermarked_text.tolist() != kgw.unwatermarked_text.tolist()[:2]
