"""Quality metrics, each against its reference implementation or a hand-checked value."""
import json
import math

import pytest
import torch
from rouge_score import rouge_scorer

from fwsapp.data.tasks import strip_prompt
from fwsapp.quality import f1, perplexity, rouge
from fwsapp.quality.scoring import QualityResources, quality_block, read_values, score_run
from fwsapp.quality.registry import default_metrics


def test_rouge_matches_rouge_score_without_stemming():
    outputs = ["the cat sat on the mat", "patients with gout need allopurinol", "running runners run"]
    references = ["the cat was on the mat", "gout patients may need allopurinol long term", "the runner runs"]
    ours = rouge.rouge(outputs, references)
    scorer = rouge_scorer.RougeScorer(["rouge2", "rougeL"], use_stemmer=False)
    for index, (output, reference) in enumerate(zip(outputs, references)):
        expected = scorer.score(reference, output)
        assert ours["rouge2"][index] == expected["rouge2"].fmeasure
        assert ours["rougeL"][index] == expected["rougeL"].fmeasure
    assert ours["rouge2"][0] == pytest.approx(0.6)  # 3 of 5 bigrams on each side
    assert ours["rougeL"][2] == 0.0  # no stemming: run/runs/runners do not match


def test_rouge_l_from_rapidfuzzs_subsequence_is_rouge_scores_to_the_last_digit_on_real_answers():
    from fwsapp.orchestration.examples import EXAMPLE_SETS

    folder, model, _ = EXAMPLE_SETS[0]
    rows = json.loads((folder / f"KGW-g0.5-d2-{model}-MEQS.generations.json").read_text())[:150]
    outputs = [row[side] for row in rows for side in ("watermarked_text", "unwatermarked_text")] + ["", "a b"]
    references = [row["natural_text"] for row in rows for _ in range(2)] + ["a b", ""]
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    expected = [scorer.score(reference, output)["rougeL"].fmeasure for output, reference in zip(outputs, references)]
    assert rouge.rouge(outputs, references)["rougeL"] == expected
    assert 0 < min(expected[:-2]) and max(expected) < 1  # real answers, none empty or copied


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("The Eiffel Tower", "eiffel tower", 1.0),  # case, article
        ("Denver Broncos!", "Denver Broncos", 1.0),  # punctuation
        ("in the year 1990", "1990", 0.5),  # precision 1/3... after articles: in year 1990 -> P=1/3, R=1
        ("gout", "acute gout", 2 * 1 * 0.5 / 1.5),
        ("", "", 1.0),
        ("something", "", 0.0),
        ("aspirin", "paracetamol", 0.0),
    ],
)
def test_token_f1_squad_style(prediction, reference, expected):
    assert f1.token_f1(prediction, reference) == pytest.approx(expected)


def test_prompt_is_removed_before_metrics():
    assert strip_prompt("What is gout? Gout is arthritis.", "What is gout?") == "Gout is arthritis."
    assert strip_prompt("Gout is arthritis.", "What is gout?") == "Gout is arthritis."
    assert strip_prompt("What is gout?", "") == "What is gout?"


def test_perplexity_equals_a_direct_torch_computation(lm):
    prompt, text = "Gout is a form of", " arthritis caused by uric acid crystals in the joints."
    prompt_ids, text_ids = perplexity.encode_pair(lm, prompt, text)
    other = perplexity.encode_pair(lm, "Asthma", " is a long-term condition of the airways.")
    ours = perplexity.perplexity(lm, [(prompt_ids, text_ids), other], batch_size=2)  # padded batch
    ids = torch.tensor([prompt_ids + text_ids])
    labels = ids.clone()
    labels[0, : len(prompt_ids)] = -100  # the prompt conditions but is not scored
    with torch.inference_mode():
        loss = lm.model(input_ids=ids, labels=labels).loss
    assert ours[0] == pytest.approx(math.exp(loss.item()), rel=1e-4)
    assert perplexity.perplexity(lm, [(prompt_ids, [])]) == [None]


def test_score_computes_everything_once_and_names_the_stand_in_honestly(qa_run, lm, tmp_path):
    import shutil

    from fwsapp.store import Store

    source, config, run_id = qa_run
    source.row("CHECKPOINT")
    shutil.copy(source.path, tmp_path / "score.duckdb")
    store = Store(tmp_path / "score.duckdb")
    resources = QualityResources(model_loader=lambda name: lm)
    first = score_run(store, run_id, resources)
    # Sample × metric values, as the plan and the progress count them, whatever rows each stores (ROUGE's four).
    assert first == {"ppl": 4, "simcse": 4, "simcse_reference": 4, "rouge": 4, "f1": 4, "factuality": 4}
    second = score_run(store, run_id, resources)
    assert set(second.values()) == {0} and set(second) == set(default_metrics())
    block = quality_block(read_values(store, [run_id]))
    # SimCSE compares the watermarked text with the unwatermarked one: the latter has no value of its own.
    assert block["simcse"]["unwatermarked"] is None and -1 <= block["simcse"]["watermarked"] <= 1
    assert all(-1 <= block["simcse_reference"][kind] <= 1 for kind in ("watermarked", "unwatermarked"))
    assert block["ppl"]["watermarked"] > 1
    assert block["factuality"]["name"] == "Disease-entity support (offline stand-in)"
    assert "AlignScore" not in block["factuality"]["name"]
    assert block["configs"]["ppl"] == "oracle=smollm2-135m-instruct"


def test_unknown_metric_is_refused(store):
    with pytest.raises(ValueError, match="Unknown metric bleu"):
        score_run(store, "any", QualityResources(model_loader=None), ("bleu",))


def test_progress_counts_the_values_to_compute_not_those_stored_or_skipped(tmp_path):
    """An import stores ROUGE and token F1 at once. Scored again with perplexity (skipped: an imported run, no oracle),
    F1 (all stored) and ROUGE (half its samples' values gone), progress counts the 16 samples ROUGE computes: a rate
    and the time left then read the work itself, where instant jumps over stored or skipped work made them absurd."""
    from fwsapp.orchestration import pipeline
    from fwsapp.quality.base import CHUNK
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "half.duckdb", 2 * CHUNK)
    store = Store(tmp_path / "half.duckdb")
    store.row("DELETE FROM metrics WHERE metric IN ('rouge2', 'rougeL') AND sample_idx >= ?", [CHUNK])
    reported = []
    counts = pipeline.score(store, [run_id], None, lambda done, total, note="": reported.append((done, total)),
                            metrics=("ppl", "f1", "rouge"))
    assert counts == {run_id: {"ppl": None, "f1": 0, "rouge": CHUNK}}  # 16 samples' ROUGE-2 and -L, both texts
    assert reported[:2] == [(0, 0)] * 2  # the plan's phases, before the work is counted
    reported = reported[2:]
    assert reported[0] == (0, CHUNK) and reported[-1] == (CHUNK, CHUNK) and {total for _, total in reported} == {CHUNK}
    assert all(later >= earlier for (earlier, _), (later, _) in zip(reported, reported[1:]))
    store.close()


def test_an_oracle_that_cannot_load_is_refused_before_any_progress_or_value(tmp_path):
    """`score --oracle /nonexistent` loaded the oracle only when perplexity's turn came, after the progress bar had
    started (and, with other metrics first, after their values were written): a parameter is checked before work."""
    from fwsapp.models import ModelLoadError
    from fwsapp.orchestration import pipeline
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "oracle.duckdb", 4)
    store = Store(tmp_path / "oracle.duckdb")
    store.row("DELETE FROM metrics")
    asked, reported = [], []

    def unloadable(name):
        asked.append(name)
        raise ModelLoadError(f"Could not load the model '{name}'.")

    with pytest.raises(ModelLoadError, match="/nonexistent"):
        pipeline.score(store, [run_id], unloadable, lambda done, total, note="": reported.append(total),
                       metrics=("rouge", "ppl"), oracle="/nonexistent")
    assert asked == ["/nonexistent"] and set(reported) == {0}  # the phases alone: no work counted, so no bar
    assert store.row("SELECT count(*) FROM metrics")[0] == 0
    store.close()


def test_a_cancel_is_heard_between_chunks_of_a_metric_and_what_was_done_stays(tmp_path):
    import threading

    from fwsapp.quality.base import CHUNK
    from fwsapp.quality.scoring import QualityResources, score_run
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "cancel.duckdb", 3 * CHUNK)
    store = Store(tmp_path / "cancel.duckdb")
    store.row("DELETE FROM metrics")  # the import computed its text metrics at once: compute them again here
    cancel = threading.Event()

    def stop_after_a_chunk(done, total, note=""):
        if done >= CHUNK:
            cancel.set()

    counts = score_run(store, run_id, QualityResources(model_loader=None), ("rouge",), stop_after_a_chunk, cancel)
    assert counts == {"rouge": CHUNK}  # one chunk of samples
    assert len(store.metrics([run_id])) == CHUNK * 2 * 2  # each text's ROUGE-2 and ROUGE-L, kept
    assert score_run(store, run_id, QualityResources(model_loader=None), ("rouge",)) == {"rouge": 2 * CHUNK}
    store.close()


def test_the_values_a_job_says_it_computed_are_those_it_offered_and_counted(tmp_path):
    """The Quality page offered "1,224 values" of Factuality, counted 1,224 in its progress, and said when done that it
    had "Computed 2448 Factuality values": the rows stored (both texts), not the values it had offered."""
    from fwsapp.orchestration import pipeline
    from fwsapp.quality.registry import METRICS
    from fwsapp.quality.scoring import computed_values, missing_work
    from fwsapp.store import Store
    from tests.conftest import imported_qa_db

    run_id = imported_qa_db(tmp_path / "offer.duckdb", 1100)
    store = Store(tmp_path / "offer.duckdb")
    store.row("DELETE FROM metrics")
    offered = missing_work(store, [run_id], ("rouge", "f1"))
    totals = []
    counts = pipeline.score(store, [run_id], None, lambda done, total, note="": totals.append(total),
                            metrics=("rouge", "f1"))[run_id]
    store.close()
    assert offered.values == 2200 == max(totals) == sum(counts.values())  # 1,100 samples × 2 metrics
    assert computed_values(counts, lambda metric: METRICS[metric].label) == "computed 1,100 ROUGE-2/L, 1,100 Token F1 values"
