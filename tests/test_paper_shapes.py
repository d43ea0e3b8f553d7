"""The paper's three model shapes (tiny random weights, real tokenizers) through the CLI and the app's jobs.

Each shape generates with every method (DetectGPT with a stand-in mask filler); each watermark is detected again from
its texts alone with the tokenizer named as a user names it (`mistral-v1`, `llama-3`, or the model folder) and agrees
per text with the scores taken while generating; it scores perplexity as its own oracle, gets entropies from
`analyze`, and judges as the `local` backend although it has no chat template.
"""
from __future__ import annotations

from functools import lru_cache
import time

import pandas as pd
import pytest

from fwsapp.watermark import methods
from fwsapp.cli import main
from fwsapp.models import load_model
from fwsapp.store import Store

from tests.paper_shapes import SHAPES, build, stand_in_filler

TOKENIZER = {"meditron": None, "biomistral": "mistral-v1", "jsl": "llama-3"}  # None: the model folder itself


@pytest.fixture(scope="session")
def shape_folders(tmp_path_factory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("shapes")
    return {shape: str(build(shape, root / shape)) for shape in SHAPES}


@lru_cache(maxsize=None)
def shape_model(folder: str):
    """Each shape's model, loaded once for its cases: three tiny models, and a worker's cases interleave shapes."""
    return load_model(folder)


def load_each_shape_once(monkeypatch) -> None:
    """Every later `load_model` of this test takes the shape's model loaded once (`shape_model`)."""
    monkeypatch.setattr("fwsapp.models.load_model", lambda name, **placement: shape_model(name))


def last_line(capsys) -> str:
    return capsys.readouterr().out.strip().splitlines()[-1]


def agreement(store: Store, run_id: str, set_id: str, lm) -> pd.DataFrame:
    """Per generated text, the score re-detected from its text beside the run's detector applied to the ids the
    model generated, scored alone as re-detection scores a text (the prompt seeds nothing).

    Re-detection single-spaces the words as MarkLLM does, so the first word loses the space before it: Llama 3's
    BPE then encodes it as other ids ("fit" for " fit"), while sentencepiece's dummy prefix keeps it. The expected
    ids therefore start with the first token's text encoded without that space; every later id is the model's."""
    from fwsapp.watermark.factory import create

    run = store.run(run_id)
    watermark = create(run["method"], lm.vocab_size, run["params"], lm=lm)
    rows = [(row.sample_idx, kind, list(getattr(row, f"{kind}_ids")))
            for row in store.generations(run_id).itertuples() for kind in ("unwatermarked", "watermarked")
            if getattr(row, f"{kind}_ids") is not None]
    def unspaced_start(ids: list[int]) -> list[int]:
        return lm.tokenizer(lm.tokenizer.decode(ids[:1]).lstrip(), add_special_tokens=False)["input_ids"] + ids[1:]

    found = watermark.detect_many([(unspaced_start(ids), ()) for _, _, ids in rows])
    generated = pd.DataFrame({"sample_idx": [row[0] for row in rows], "text_kind": [row[1] for row in rows],
                              "score_generated": [result.score for result in found]})
    again = store.redetections([set_id])[["sample_idx", "text_kind", "score"]].rename(columns={"score": "score_from_text"})
    return generated.merge(again, on=["sample_idx", "text_kind"])


@pytest.mark.parametrize("method", methods.METHODS.names())
@pytest.mark.parametrize("shape", SHAPES)
def test_each_method_generates_and_is_detected_again_from_the_text(shape, method, shape_folders, tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr("fwsapp.watermark.posthoc.load_t5_filler", lambda: stand_in_filler)
    load_each_shape_once(monkeypatch)
    info = methods.info(method)
    folder, db = shape_folders[shape], str(tmp_path / "shape.duckdb")
    test_params = [argument for key, value in info.test_params.items() for argument in ("--param", f"{key}={value}")]
    assert main(["generate", "--task", "qa", "--model", folder, "--method", method, "--n", "2",
                 "--max-new-tokens", "20", "--batch-size", "2", "--db", db, *test_params]) == 0
    run_id = last_line(capsys)
    if info.post_hoc:  # no key to re-detect: its scores are the model's, taken at generation
        store = Store(db, read_only=True)
        scores = store.detections([run_id]).score
        store.close()
        assert len(scores) == 4 and scores.notna().all()
        return
    tokenizer = folder if info.detector_needs_model(info.defaults) or TOKENIZER[shape] is None else TOKENIZER[shape]
    assert main(["detect", "--run", run_id, "--tokenizer", tokenizer, "--db", db]) == 0
    set_id = capsys.readouterr().out.split("detection set ")[1].split()[0]  # the line that names it, not the last
    store = Store(db, read_only=True)
    compared = agreement(store, run_id, set_id, shape_model(folder))
    scores = store.detections([run_id]).groupby("text_kind").score.mean()
    store.close()
    assert len(compared) >= 2
    assert compared.score_from_text.to_numpy() == pytest.approx(compared.score_generated.to_numpy(), abs=1e-6)
    if method == "KGW":  # the watermark is there, not only reproduced: random tiny weights write repetitive text, whose
        # repeated (context, token) pairs spread an unwatermarked z (the mean of two read 2.01 in one CI run, 1.57 here)
        assert scores["watermarked"] > max(2, scores["unwatermarked"] + 1)


@pytest.mark.parametrize("shape", SHAPES)
def test_score_analyze_and_the_local_judge_on_each_shape(shape, shape_folders, tmp_path, capsys, monkeypatch):
    folder, db = shape_folders[shape], str(tmp_path / "shape.duckdb")
    assert main(["generate", "--task", "qa", "--model", folder, "--method", "KGW", "--n", "2",
                 "--max-new-tokens", "12", "--db", db, "--dtype", "fp32", "--device", "cpu"]) == 0
    run_id = last_line(capsys)
    load_each_shape_once(monkeypatch)  # the generate above loaded the shape as a command does
    assert main(["score", "--run", run_id, "--metrics", "ppl", "--db", db]) == 0
    assert main(["analyze", "--run", run_id, "--recognizer", "mesh", "--db", db]) == 0
    assert "entropies of 2 texts stored" in capsys.readouterr().out
    assert main(["judge", "--run", run_id, "--backend", "local", "--judge-model", folder, "--db", db]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    store = Store(db, read_only=True)
    perplexities = store.metrics([run_id]).query("metric == 'ppl'")
    entropies = store.token_entropies([run_id])
    judged = store.judgments([run_id])
    store.close()
    assert len(perplexities) == 4 and (perplexities.value > 1).all()
    assert len(entropies) > 0 and entropies.entropy.between(0, 12).all()
    assert len(judged) == 2  # a base model answers in a plain prompt format; its verdict may not parse


def test_a_folder_without_weights_and_an_unknown_id_offline_are_one_line(shape_folders, tmp_path, capsys, monkeypatch):
    import shutil

    bare = tmp_path / "bare"
    shutil.copytree(shape_folders["biomistral"], bare, ignore=shutil.ignore_patterns("*.safetensors"))
    db = tmp_path / "db.duckdb"
    assert main(["generate", "--task", "qa", "--model", str(bare), "--method", "KGW", "--db", str(db)]) == 2
    assert "has a config.json but no weights" in capsys.readouterr().err
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["generate", "--task", "qa", "--model", "BioMistral/BioMistral-7B", "--method", "KGW", "--db", str(db)]) == 2
    error = capsys.readouterr().err
    assert "not in the Hugging Face cache and HF_HUB_OFFLINE is set" in error and len(error.strip().splitlines()) == 1
    assert main(["generate", "--task", "qa", "--method", "KGW", "--device", "cuda:3", "--db", str(db)]) == 2
    assert "--device cuda:3" in capsys.readouterr().err
    assert not db.exists()  # nothing was half-written: no database was even opened


def test_a_model_that_would_not_fit_is_refused_before_loading(shape_folders, monkeypatch):
    from fwsapp import models

    monkeypatch.setattr(models, "free_memory", lambda device: 1e6)
    with pytest.raises(models.ModelLoadError, match=r"would not fit: it needs about .* GiB on cpu in fp32"):
        models.load_model(shape_folders["jsl"])  # 8.2M parameters × 4 bytes × 1.2 > 1 MB


@pytest.mark.parametrize("shape", SHAPES)
def test_the_apps_background_jobs_run_each_shape(shape, shape_folders, tmp_path):
    from functools import lru_cache

    from fwsapp.generation.run_config import RunConfig
    from fwsapp.orchestration.jobs import JobManager
    from fwsapp.models import load_model

    store = Store(tmp_path / "app.duckdb")
    manager = JobManager(store, lru_cache(maxsize=None)(load_model))

    def finished(job):
        deadline = time.monotonic() + 120
        while not job.finished and time.monotonic() < deadline:
            time.sleep(0.1)
        assert job.status == "done", job.message
        return job

    config = RunConfig(task="qa", method="SWEET", model=shape_folders[shape], n=2, max_new_tokens=12, batch_size=2)
    finished(manager.start_generation(config))
    run_id = config.run_id()
    finished(manager.start_redetect(run_id, "SWEET", {}, shape_folders[shape]))
    finished(manager.start_scoring([run_id], ("ppl",), None, None))
    finished(manager.start_analysis([run_id], None, recognizer="mesh"))
    [set_id] = store.detection_sets([run_id]).set_id
    compared = agreement(store, run_id, set_id, manager.model_loader(shape_folders[shape]))
    assert compared.score_from_text.to_numpy() == pytest.approx(compared.score_generated.to_numpy(), abs=1e-6)
    assert len(store.metrics([run_id]).query("metric == 'ppl'")) == 4
    assert len(store.token_entropies([run_id])) > 0
    store.close()
