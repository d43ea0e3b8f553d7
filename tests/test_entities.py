"""Disease entities: recognition, the introduced and hallucinated rules, and a run's analysis."""
import numpy as np
import pytest

from fwsapp.entities.introduced import (
    analyze_run,
    introduced_entities,
    judge_introduced,
    names_to_judge,
    record_verdict,
    undo_verdict,
    verdict_agreement,
    with_mesh_headings,
)
from fwsapp.results.entity_table import entity_summary, shown_summary
from fwsapp.entities.recognizers.base import STOPLIST, Entity
from fwsapp.entities.recognizers import load_recognizer
from fwsapp.entities.entropy import bin_shares, token_spans


@pytest.fixture(scope="module")
def mesh():
    return load_recognizer("mesh")


@pytest.fixture(scope="module")
def encoder():
    from fwsapp.models.encoder import load_encoder

    return load_encoder()


def names(entities):
    return [entity.text for entity in entities]


def test_mesh_recognizer_finds_disease_names_case_insensitively_longest_first(mesh):
    text = ("Plantar Fasciitis often troubles runners; diabetes mellitus and Breast Cancer need screening. "
            "Type 2 diabetes mellitus is common.")
    found = names(mesh.find(text))
    assert found == ["Plantar Fasciitis", "diabetes mellitus", "Breast Cancer", "Type 2 diabetes mellitus"]
    spans = mesh.find(text)
    assert text[spans[0].start:spans[0].end] == "Plantar Fasciitis"


def test_mesh_recognizer_skips_stoplisted_generic_words(mesh):
    assert {"injury", "pain", "disease", "syndrome"} <= STOPLIST
    assert names(mesh.find("The injury caused pain; the disease and the syndrome worsened.")) == []
    assert names(mesh.find("Iron deficiency anaemia and coeliac disease")) == ["Iron deficiency anaemia", "coeliac disease"]


def test_introduced_is_a_normalised_name_absent_from_the_reference():
    reference = [Entity("Breast cancer", 0, 13), Entity("gout", 20, 24)]
    generated = [Entity("breast  Cancer", 0, 14), Entity("asthma", 30, 36), Entity("Gout", 40, 44)]
    assert names(introduced_entities(generated, reference)) == ["asthma"]


def test_hallucinated_means_no_reference_entity_is_similar_enough():
    introduced = [Entity("tumour", 0, 6), Entity("fracture", 10, 18)]
    reference = [Entity("neoplasm", 0, 8), Entity("asthma", 10, 16)]
    unit = lambda v: np.asarray(v, float) / np.linalg.norm(v)  # noqa: E731
    introduced_vectors = np.stack([unit([1, 0.2, 0]), unit([0, 0, 1])])
    reference_vectors = np.stack([unit([1, 0, 0]), unit([0, 1, 0])])
    judged = judge_introduced(introduced, introduced_vectors, reference, reference_vectors, threshold=0.6)
    assert [(item.entity.text, item.closest_reference, item.hallucinated) for item in judged] == [
        ("tumour", "neoplasm", False), ("fracture", "neoplasm", True)]
    assert judged[0].similarity == pytest.approx(1 / np.sqrt(1.04))
    alone = judge_introduced(introduced, introduced_vectors, [], np.zeros((0, 3)))
    assert all(item.hallucinated and item.closest_reference is None for item in alone)


def test_bin_shares_and_token_spans(lm):
    assert bin_shares([0.5, 1.0, 2.0, 5.0]) == {"low": 50.0, "mid": 25.0, "high": 25.0}
    ids = lm.tokenizer("Gout is painful.", add_special_tokens=False)["input_ids"]
    spans = token_spans(lm.tokenizer, ids)
    assert spans[0][0] == 0 and spans[-1][1] == len("Gout is painful.")


def test_a_share_of_unsupported_mentions_needs_enough_mentions_in_table_7_and_the_report():
    """Table 7's unsupported share is a rate over mentions: one mention read 100 %, and its increase over the other
    side as a finding. Below the small-sample rule's minimum it says so, with the count, on the Entities page's table and
    in the report's."""
    import pandas as pd

    from fwsapp.results.report import entities_block
    from fwsapp.results.tables import entities_table

    runs = pd.DataFrame([{"run_id": "r", "method": "KGW", "task": "qa", "model": "m", "params": "{}", "imported": False}])
    analyses = pd.DataFrame([{"run_id": "r", "sample_idx": index, "config": "mesh;enc;sim<0.6", "unwatermarked_tokens": 50,
                              "watermarked_tokens": 50} for index in range(6)])
    mention = {"run_id": "r", "config": "mesh;enc;sim<0.6", "introduced": True, "token_indices": [1], "entity": "x",
               "normalized": "x"}
    entities = pd.DataFrame([{**mention, "sample_idx": index % 6, "text_kind": "watermarked", "hallucinated": index < 3}
                             for index in range(12)] + [{**mention, "sample_idx": 0, "text_kind": "unwatermarked",
                                                         "hallucinated": True}])
    numbers = entity_summary(entities, analyses, runs)
    summary = shown_summary(numbers).iloc[0]
    assert summary["unsupported by the reference % (watermarked)"] == 25.0  # 3 of 12
    assert summary["unsupported by the reference % (unwatermarked)"] == "not enough data (n = 1)"  # not 100
    assert summary["unsupported by the reference %: increase"] == "not enough data (n = 1)"  # not -75
    assert summary["introduced per text: increase"] == pytest.approx(12 / 6 - 1 / 6)
    assert numbers.iloc[0]["unsupported by the reference %: increase"] == -75.0  # the numbers are kept, with their count
    block = entities_block("r", entities, analyses, runs, pd.DataFrame(columns=["run_id", "text_kind", "entropy",
                                                                               "entropy_model"]))
    assert block["hallucination_rate"] == {"watermarked": 25.0, "unwatermarked": 100.0}
    assert block["mentions"] == {"watermarked": 12, "unwatermarked": 1}
    named = {"model": "m", "task": "qa", "method": "KGW", "settings": "defaults", "entities": block}
    table = entities_table({"runs": [named]}).iloc[0]
    assert table.index[-1] == "Recognizer"  # its long label after the numbers, which it pushed off the Report page
    assert table["Unsupported % (watermarked)"] == 25.0
    assert table["Unsupported % (unwatermarked)"] == "not enough data (n = 1)"


def test_a_runs_analysis_is_stored_once_and_summarised(lm, store, mesh, encoder):
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs

    rows = [{"prompt": "What causes gout?", "natural_text": "Gout is caused by uric acid; obesity raises the risk.",
             "unwatermarked_text": "Gout comes from uric acid crystals, and obesity raises the risk.",
             "watermarked_text": "Gout follows tuberculosis and leukemia, and obesity raises the risk."}]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    assert analyze_run(store, run_id, mesh, encoder) == 1
    assert analyze_run(store, run_id, mesh, encoder) == 0
    found = store.entities([run_id])
    marked = found[found.text_kind == "watermarked"].set_index("entity")
    assert set(marked.index) == {"Gout", "tuberculosis", "leukemia", "obesity"}
    assert bool(marked.loc["tuberculosis", "introduced"]) and not bool(marked.loc["Gout", "introduced"])
    summary = entity_summary(found, store.entity_analyses([run_id]), store.runs()).iloc[0]
    assert summary["introduced per text (watermarked)"] == 2 and summary["introduced per text (unwatermarked)"] == 0
    assert summary["introduced per text: increase"] == 2
    hallucinated = bool(marked.loc["tuberculosis", "hallucinated"])
    [tuberculosis] = [name for name in names_to_judge(with_mesh_headings(found), "watermarked") if name.shown == "tuberculosis"]
    record_verdict(store, "Dr C", run_id, 0, tuberculosis, "hallucinated")
    counts, stats = verdict_agreement(store)
    # One verdict is far below the minimum for a rate: the count is kept, the precision is not given.
    assert stats["verdicts"] == 1 and stats["flagged"] == int(hallucinated) and stats["precision"] is None
    with pytest.raises(ValueError, match="Enter your name"):
        record_verdict(store, " ", run_id, 0, tuberculosis, "correct")


def test_verdicts_are_counted_per_name_as_clinicians_give_them(lm, store, mesh, encoder):
    """A name with three mentions is one verdict, and one undo removes one, not three."""
    import json

    from fwsapp.orchestration.importer import LogFile, import_logs

    rows = [{"prompt": "What causes gout?", "natural_text": "Gout is caused by uric acid.",
             "unwatermarked_text": "Gout comes from uric acid.",
             "watermarked_text": "Tuberculosis, then tuberculosis again, and leukemia; tuberculosis is common."}]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    analyze_run(store, run_id, mesh, encoder)
    names = {name.shown.lower(): name for name in names_to_judge(with_mesh_headings(store.entities([run_id])), "watermarked")}
    assert len(names["tuberculosis"].starts) == 3
    for rater in ("Dr A", "Dr B"):
        record_verdict(store, rater, run_id, 0, names["tuberculosis"], "hallucinated")
        record_verdict(store, rater, run_id, 0, names["leukemia"], "correct")
    assert verdict_agreement(store)[1]["verdicts"] == 4
    undo_verdict(store, "Dr A", run_id, 0, names["tuberculosis"])
    counts, stats = verdict_agreement(store)
    assert stats["verdicts"] == 3 and int(counts.to_numpy().sum()) == 3


def test_the_apps_analysis_job_takes_the_threshold_the_cli_takes(store):
    """One pipeline step behind both: the job's threshold reaches the stored analysis, and progress counts samples."""
    import json
    import time

    from fwsapp.orchestration.importer import LogFile, import_logs
    from fwsapp.orchestration.jobs import JobManager

    rows = [{"prompt": f"Q{i}?", "natural_text": "Gout is caused by uric acid.",
             "unwatermarked_text": "Gout comes from uric acid.", "watermarked_text": "Gout follows leukemia."}
            for i in range(3)]
    run_id = import_logs(store, method="KGW", model="m", task_name="qa", generations=LogFile("g.json", json.dumps(rows).encode()))
    manager = JobManager(store, model_loader=lambda name: pytest.fail("an imported run loads no model by default"))
    job = manager.start_analysis([run_id], None, threshold=0.35)
    for _ in range(600):
        if job.finished:
            break
        time.sleep(0.1)
    assert job.status == "done", job.message
    assert (job.done, job.total) == (3, 3)
    # one run, said so: the label and the result count it in agreement with its noun
    assert job.label == "Analysing 1 run" and job.message.startswith("Analysed 1 run with ")
    assert set(store.entities([run_id]).config) == {f"{store.entity_analyses([run_id]).config[0]}"}
    assert store.entity_analyses([run_id]).config[0].endswith("sim<0.35")
    with pytest.raises(ValueError, match="between 0 and 1"):
        from fwsapp.orchestration import pipeline

        pipeline.analyze(store, [run_id], manager.model_loader, threshold=1.5)


def test_a_run_over_the_same_prompts_reuses_the_stored_reference_entropies(store, lm, monkeypatch):
    from fwsapp.entities import entropy
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig

    first, second = (run_generation(RunConfig(task="qa", method="KGW", n=2, max_new_tokens=6, batch_size=2,
                                              params=params), store, lm) for params in ({}, {"delta": 1.0}))
    assert entropy.compute_entropies(store, first, lm) == 2
    monkeypatch.setattr(entropy, "teacher_forced", lambda *args, **kwargs: pytest.fail("recomputed a stored reference"))
    assert entropy.compute_entropies(store, second, lm) == 2
    assert entropy.compute_entropies(store, second, lm) == 0  # a repeated command changes nothing
    assert store.sample_entropies(second, 1, lm.name) == store.sample_entropies(first, 1, lm.name)


def test_a_reference_that_names_no_disease_is_said_so_and_sorted_after_compared_samples():
    import pandas as pd

    from fwsapp.entities.introduced import NameToJudge, entity_sample_label, samples_by_hallucination

    lonely = NameToJudge("watermarked", "gout", "gout", (0,), (4,), 1, 0.0, reference_names_one=False)
    assert lonely.rule() == "unsupported: the reference names no disease"
    compared = NameToJudge("watermarked", "gout", "gout", (0, 9), (4, 13), 1, 0.31)
    assert compared.rule() == "1 of 2 unsupported by the reference (lowest similarity 0.31)"

    def row(sample, kind, introduced, hallucinated, closest):
        return {"run_id": "r", "sample_idx": sample, "text_kind": kind, "entity": "x", "introduced": introduced,
                "hallucinated": hallucinated, "closest_reference": closest}

    entities = pd.DataFrame([row(0, "watermarked", True, True, None), row(0, "watermarked", True, True, None),
                             row(1, "reference", False, False, None), row(1, "watermarked", True, True, "asthma")])
    analyses = pd.DataFrame({"run_id": "r", "sample_idx": [0, 1], "method": "KGW", "task": "qa"})
    ranking = samples_by_hallucination(entities, analyses)
    assert ranking.sample_idx.tolist() == [1, 0]  # two unsupported for want of a reference come after one compared
    assert entity_sample_label(ranking.iloc[1]).endswith("2 introduced; the reference names no disease")


def test_the_example_data_comes_with_its_analysis_by_the_current_recognizer(store):
    """Entities and Entropy have content as soon as the example data is loaded; the shipped analysis is the default
    recognizer's as it is now (rebuild it with `python -m fwsapp.orchestration.examples` when the recognizer changes)."""
    from fwsapp.entities.introduced import recognizer_of
    from fwsapp.orchestration.examples import load_examples
    from fwsapp.models import EMBEDDED_MODEL
    from fwsapp.entities.recognizers import recognizer_label

    run_ids = load_examples(store)
    analyses = store.entity_analyses(run_ids)
    assert len(analyses) == 600 and set(analyses.config.map(recognizer_of)) == {recognizer_label()}
    entropies = store.rows("SELECT DISTINCT model, text_kind FROM entropies")
    assert {model for model, _ in entropies} == {EMBEDDED_MODEL}
    assert {kind for _, kind in entropies} == {"reference", "unwatermarked", "watermarked"}
    counts = {table: len(getattr(store, table)(run_ids)) for table in ("entities", "entity_analyses")}
    revision = store.revision()
    assert load_examples(store) == run_ids and store.revision() == revision  # loading again writes nothing
    assert {table: len(getattr(store, table)(run_ids)) for table in counts} == counts
