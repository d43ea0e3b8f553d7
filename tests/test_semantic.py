"""Issue 49: the semantic watermarks (SemStamp, k-SemStamp) and the forgery by watermark stealing.

SemStamp's regions and keyed valid regions are held against MarkLLM's SemStamp code (its recipe written out below:
markllm 0.1.5 predates SemStamp, and its later SemStamp imports nearpy and sentence-transformers, which this machine
lacks); the detector's z over sentences against the hand count; rejection sampling keeps the first candidate the
watermark accepts, in draw order, and records its rejections. The forger learns a planted green token, and its bad
inputs are one line with nothing stored."""
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from fwsapp.generation.sentences import CANDIDATES, Candidates
from fwsapp.data.loaders import DEMO, load_dataset
from fwsapp.robustness.attacks.spoofing import StolenWatermark
from fwsapp.watermark import methods
from fwsapp.watermark.factory import create
from fwsapp.watermark.semantic import sentence_spans
from fwsapp.watermark.semstamp import SemStamp

WIDTH = 384


class LookupEncoder:
    """An encoder stand-in: each text's unit-length embedding from a table (random for a text it does not hold)."""

    def __init__(self, table: dict[str, np.ndarray]):
        self.table = table
        self.model = SimpleNamespace(config=SimpleNamespace(hidden_size=WIDTH))

    def encode(self, texts: list[str]) -> np.ndarray:
        rows = [self.table.get(text.strip(), np.random.default_rng(len(text)).normal(size=WIDTH)) for text in texts]
        return np.stack([row / np.linalg.norm(row) for row in rows])


class Characters:
    """A tokenizer stand-in: one token per character."""

    name, vocab_size = "characters", 256

    @staticmethod
    def decode(ids: list[int]) -> str:
        return "".join(map(chr, ids))


def semstamp(encoder, **params):
    return SemStamp(256, tokenizer=Characters(), encoder=encoder, **params)


def markllm_region(embedding: np.ndarray, dimension: int) -> int:
    """MarkLLM's SemStamp hash: nearpy's RandomBinaryProjections('rbp_perm', d, rand_seed=1234) on the embedding."""
    np.random.seed(1234)
    normals = np.random.randn(dimension, embedding.size)
    return int("".join("1" if projection > 0.0 else "0" for projection in normals @ embedding), 2)


def markllm_accept_mask(seed: int, regions: int, gamma: float, prime: int) -> list[int]:
    """MarkLLM's SemStamp valid regions after a sentence whose hash is `seed` (k-SemStamp's get_cluster_mask alike)."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(prime * seed)
    return torch.randperm(regions, device="cpu", generator=generator)[:int(regions * gamma)].tolist()


@pytest.mark.parametrize("dimension", [3, 5])
def test_semstamp_regions_and_valid_regions_are_markllms(dimension):
    watermark = semstamp(LookupEncoder({}), lsh_dim=dimension)
    embeddings = np.random.default_rng(dimension).normal(size=(200, WIDTH))
    regions, _ = watermark.placed(embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True))
    assert regions.tolist() == [markllm_region(row, dimension) for row in embeddings]
    for region in range(2 ** dimension):
        assert watermark.valid_regions(region) == set(markllm_accept_mask(region, 2 ** dimension, 0.25, 15485863))


def test_k_semstamp_places_a_sentence_at_its_nearest_centroid_and_keys_clusters_as_the_original():
    from fwsapp.watermark.k_semstamp import KSemStamp

    watermark = KSemStamp(256, tokenizer=Characters(), encoder=LookupEncoder({}), k=4, margin=0.1,
                          fitted={"centroids": np.eye(4, WIDTH).tolist()})
    rows = np.zeros((2, WIDTH))
    rows[0, [0, 1]] = [0.8, 0.6]  # cosine distances 0.2 and 0.4 to centroids 0 and 1: clear by 0.2
    rows[1, [2, 3]] = [0.71, 0.70]  # nearly as near to centroid 3 as to 2: inside the margin
    regions, clear = watermark.placed(rows / np.linalg.norm(rows, axis=1, keepdims=True))
    assert regions.tolist() == [0, 2] and clear.tolist() == [True, False]
    for region in range(4):
        assert watermark.valid_regions(region) == set(markllm_accept_mask(region, 4, 0.25, 15485863))


def test_the_margin_keeps_only_sentences_clear_of_every_hyperplane():
    watermark = semstamp(LookupEncoder({}), margin=0.05)
    normal = watermark.normals[0] / np.linalg.norm(watermark.normals[0])
    rng = np.random.default_rng(0)
    away = rng.normal(size=WIDTH)
    on_plane = away - (away @ normal) * normal  # cosine 0 with the first normal
    rows = np.stack([on_plane / np.linalg.norm(on_plane), away / np.linalg.norm(away)])
    cosines = np.abs(rows @ watermark.normals.T / np.linalg.norm(watermark.normals, axis=1))
    assert watermark.placed(rows)[1].tolist() == [False, bool(cosines[1].min() >= 0.05)]


def chained_text(watermark, sentences: int, valid: bool) -> tuple[str, dict[str, np.ndarray]]:
    """A text of `sentences` sentences, each embedded in a region its predecessor keys valid (or invalid)."""
    rng = np.random.default_rng(1)
    table, text, previous = {}, [], None
    for index in range(sentences):
        while True:
            vector = rng.normal(size=WIDTH)
            region = int(watermark.placed(vector[None] / np.linalg.norm(vector))[0][0])
            if previous is None or (region in watermark.valid_regions(previous)) == valid:
                break
        sentence = f"Sentence number {index} is here."
        table[sentence], previous = vector, region
        text.append(sentence)
    return " ".join(text), table


@pytest.mark.parametrize("valid", [True, False])
def test_the_detector_counts_sentences_in_valid_regions_and_flags_each_on_its_last_token(valid):
    text, table = chained_text(semstamp(LookupEncoder({})), 9, valid)
    watermark = semstamp(LookupEncoder(table))
    detection = watermark.detect([ord(character) for character in text])
    green = 8 if valid else 0
    z = (green - 0.25 * 8) / np.sqrt(8 * 0.25 * 0.75)
    # p is the exact binomial tail of 8 sentences at γ 0.25: 0.25⁸ when all are valid, 1 when none is.
    assert detection.num_tokens_scored == 8 and detection.score == pytest.approx(z)
    assert detection.p == pytest.approx(0.25 ** 8 if valid else 1.0)
    ends = [end - 1 for _, end in sentence_spans(text)]
    assert [index for index, flag in enumerate(detection.token_flags) if flag >= 0] == ends[1:]  # the first only keys
    assert all(detection.token_flags[end] == int(valid) for end in ends[1:])


def test_rejection_sampling_keeps_the_first_accepted_candidate_in_draw_order():
    tokenizer = SimpleNamespace(decode=lambda tokens, skip_special_tokens=True: " ".join(map(str, tokens)))
    verdicts = {"1": True, "2": False, "3": True}
    candidates = Candidates(tokenizer, 0, {0}, lambda texts: [(7, verdicts.get(text, False)) for text in texts],
                            keep_any_from=CANDIDATES)
    rows = [[row + 1, 0] if row + 1 in (2, 3) else [row + 1] for row in range(CANDIDATES)]  # 2 and 3 ended (EOS)
    candidates.close(list(range(CANDIDATES)), rows, at_limit=False)
    assert candidates.choice() is None  # row 1 is still open: it would come first
    candidates.close([0], rows, at_limit=True)
    assert candidates.choice() == 0
    verdicts["1"] = False
    late = Candidates(tokenizer, 0, {0}, lambda texts: [(7, verdicts.get(text, False)) for text in texts], CANDIDATES)
    late.close(list(range(CANDIDATES)), rows, at_limit=True)
    assert late.choice() == 2 and late.ended[2] == ([3], True, 7, True)  # rows 0 and 1 rejected: two rejections
    spent = Candidates(tokenizer, 0, {0}, lambda texts: [(7, False) for _ in texts], keep_any_from=1)
    spent.close(list(range(CANDIDATES)), rows, at_limit=True)
    assert spent.choice() == 1  # the rejections used up: the next candidate is kept whatever its region


@pytest.mark.model
def test_a_semstamp_run_records_each_answers_rejections_and_its_detection_reads_the_text_again(lm, store):
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models.tokenizers import from_huggingface

    run_id = run_generation(RunConfig(task="qa", method="SemStamp", n=1, max_new_tokens=16, batch_size=1, seed=3,
                                     params={"max_rejections": 1}), store, lm)
    rows = store.generations(run_id)
    assert (rows.watermarked_rejections >= 0).all() and (rows.watermarked_seconds > 0).all()
    assert rows.unwatermarked_text.notna().all()  # the unwatermarked answers are generated as for any method
    watermark = create("SemStamp", lm.vocab_size, tokenizer=from_huggingface("embedded", lm.tokenizer))
    stored = store.detections([run_id]).query("text_kind == 'watermarked'").set_index("sample_idx").score
    for row in rows.itertuples():
        again = watermark.detect(lm.tokenizer(row.watermarked_text, add_special_tokens=False)["input_ids"])
        assert again.score == pytest.approx(stored[row.sample_idx], abs=1e-9)


def test_semstamps_rejections_are_bounded_before_any_work():
    from fwsapp.generation.run_config import RunConfig

    with pytest.raises(ValueError, match=r"max_rejections=1000000000000 is out of range; it must be in \[0, 10,000\]"):
        RunConfig(task="qa", method="SemStamp", params={"max_rejections": 10**12})
    with pytest.raises(ValueError, match=r"max_seconds=0.0 is out of range"):
        RunConfig(task="qa", method="SemStamp", params={"max_seconds": 0})


@pytest.mark.model
def test_a_semstamp_answer_that_cannot_find_its_regions_ends_at_its_time_bound(lm, store):
    """Issue 58, item 26: 10,000 rejections allowed, one valid region in 65,536 (2^16 × 0.001 rounds to 65): without
    the time bound the answer would draw for hours; with one second it ends, and its time says it ran out."""
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig

    started = time.perf_counter()
    run_id = run_generation(RunConfig(task="qa", method="SemStamp", n=1, max_new_tokens=8, batch_size=1, seed=3,
                                      params={"max_rejections": 10_000, "lsh_dim": 16, "gamma": 0.001,
                                              "max_seconds": 1.0}), store, lm)
    assert time.perf_counter() - started < 60
    [row] = store.generations(run_id).itertuples()
    assert row.watermarked_seconds >= 1.0 and row.watermarked_rejections > 0 and row.watermarked_text


@pytest.mark.model
def test_a_k_semstamp_run_fits_its_clusters_on_its_own_references_and_keeps_them_for_every_detection(lm, store,
                                                                                                     tmp_path):
    import json

    from fwsapp.detection.redetect import redetect
    from fwsapp.generation.generate import run_generation
    from fwsapp.generation.run_config import RunConfig
    from fwsapp.models.tokenizers import from_huggingface
    from fwsapp.watermark.k_semstamp import KSemStamp

    # A dataset of summaries, unlike the shipped QA answers that the `domain` default fits on; its first reference is
    # long, for a z over many sentences when the references are detected again.
    qa = load_dataset("qa", DEMO)
    long_reference = " ".join(sample.reference for sample in qa[:3])
    references = [long_reference] + [sample.reference for sample in load_dataset("summarization", DEMO)[:11]]
    dataset = tmp_path / "own.json"
    dataset.write_text(json.dumps([{"prompt": sample.prompt, "reference": reference}
                                   for sample, reference in zip(qa, references)]))
    config = RunConfig(task="qa", method="k-SemStamp", dataset=str(dataset), n=1, max_new_tokens=16, batch_size=1,
                       seed=3, params={"k": 4, "max_rejections": 1})
    run_id = run_generation(config, store, lm)
    fitted = store.run_fit(run_id)
    assert fitted == json.loads(json.dumps(KSemStamp.fit(references, KSemStamp.checked_params({"k": 4}))))
    assert fitted["references"] == 12 and fitted["sentences"] > 12
    assert run_generation(config, store, lm) == run_id and store.run_fit(run_id) == fitted  # a rerun refits nothing

    dataset.unlink()  # the key is kept with the run: detection needs no dataset
    tokenizer = from_huggingface("embedded", lm.tokenizer)
    set_id = redetect(store, run_id, "k-SemStamp", {"k": 4}, tokenizer, lm=lm)
    stored = store.detections([run_id]).set_index(["sample_idx", "text_kind"]).score
    again = store.redetections([set_id]).set_index(["sample_idx", "text_kind"]).score
    assert len(stored) == 2 and again.loc[stored.index].to_dict() == pytest.approx(stored.to_dict(), abs=1e-9)
    reference_ids = tokenizer.encode(long_reference)
    own = KSemStamp(lm.vocab_size, tokenizer=tokenizer, k=4, fitted=fitted).detect(reference_ids).score
    shipped = KSemStamp(lm.vocab_size, tokenizer=tokenizer, k=4).detect(reference_ids).score  # the QA domain's clusters
    assert again[(0, "reference")] == pytest.approx(own, abs=1e-9) and own != pytest.approx(shipped, abs=1e-6)
    with pytest.raises(ValueError, match=r"^This run's k-SemStamp clusters were fitted with k=4, .* detect with k=4\.$"):
        redetect(store, run_id, "k-SemStamp", {"k": 5}, tokenizer, lm=lm)
    store.delete_run(run_id)
    assert store.run_fit(run_id) is None


def test_the_forger_learns_the_token_the_watermark_favours_after_a_context():
    rng = np.random.default_rng(0)
    plain = [rng.integers(10, 20, 60).tolist() for _ in range(40)]
    marked = [[token if previous != 11 else 15 for previous, token in zip([0] + text, text)] for text in plain]
    stolen = StolenWatermark(marked, plain, width=1, min_count=2, clip=2.0)
    boosts = stolen.boosts((11,))
    assert max(boosts, key=boosts.get) == 15 and boosts[15] == 1.0
    assert all(token != 12 for token in boosts)  # rarer after 11 when watermarked: not learned
    assert StolenWatermark(marked[:1], plain[:1], width=1, min_count=1000, clip=2.0).boosts((11,)) == {}


def test_a_forgery_of_a_method_without_a_seeded_list_or_with_too_few_answers_is_one_line():
    from fwsapp.robustness.attack_sets import forgery_problem, forgery_split
    from fwsapp.robustness.attacks import ATTACKS

    entry = ATTACKS["spoofing"]
    answers = pd.DataFrame({"sample_idx": range(5), "watermarked_text": ["w"] * 5, "unwatermarked_text": ["u"] * 5})
    with pytest.raises(ValueError, match=r"^r1: SemStamp has no green list seeded by the tokens before each position, "
                                         r"which spoofing learns; it forges KGW, SWEET"):
        forgery_problem({"run_id": "r1", "method": "SemStamp"}, answers, entry, entry.checked_params({}))
    with pytest.raises(ValueError, match=r"^r2 has 5 watermarked answers .* with observed=5 needs more"):
        forgery_problem({"run_id": "r2", "method": "KGW"}, answers, entry, entry.checked_params({"observed": 5}))
    observed, forged = forgery_split(answers, 3, 32, seed=0)
    assert len(observed) == 3 and len(forged) == 2 and not set(observed.sample_idx) & set(forged.sample_idx)
    assert forgery_split(answers, 3, 32, seed=0)[1].sample_idx.tolist() == forged.sample_idx.tolist()


@pytest.mark.model
def test_spoofing_a_run_forges_answers_to_unobserved_prompts_and_the_page_shows_them_beside_removal(qa_run, lm, tmp_path,
                                                                                                 app_db):
    from streamlit.testing.v1 import AppTest

    from fwsapp.orchestration import pipeline
    from fwsapp.robustness.attack_sets import summaries
    from fwsapp.store import Store
    from tests.conftest import copy_store
    from tests.test_pages import APP

    source, _, run_id = qa_run
    copy_store(source, app_db)
    store = Store(app_db)
    revision = store.revision()
    with pytest.raises(ValueError, match="needs more, one prompt at least left to forge an answer to"):
        pipeline.attack(store, [run_id], lambda name: lm, attack="spoofing", params={"observed": 4})
    assert store.revision() == revision and store.attack_sets([run_id]).empty
    params = {"observed": 2, "forgeries": 2, "strength": 8.0}
    # Issue 58, item 7: progress counts the forgeries asked for and moves with each; a cancel is honoured between
    # answers, with what was forged kept and the count true; the same command resumes.
    import threading

    cancel, reported = threading.Event(), []

    def progress(done, total, note=""):
        reported.append((done, total))
        if done >= 1:
            cancel.set()

    assert pipeline.attack(store, [run_id], lambda name: lm, progress, cancel, attack="spoofing", params=params,
                           seed=1) == []
    assert reported[:2] == [(0, 2), (1, 2)] and reported[-1] == (1, 2)
    [attack_set] = store.attack_sets([run_id]).attack_set_id
    assert len(store.attacked_texts([attack_set])) == 1
    pipeline.attack(store, [run_id], lambda name: lm, attack="spoofing", params=params, seed=1)
    [attack_set] = store.attack_sets([run_id]).attack_set_id
    forged = store.attacked_texts([attack_set])
    generations = store.generations(run_id).set_index("sample_idx")
    assert len(forged) == 2 and all(text != generations.watermarked_text[index] for index, text
                                    in zip(forged.sample_idx, forged.text))
    assert forged.note.str.contains("biased").all()
    row = next(row for row in summaries(store, [run_id]) if row["attack"] == "spoofing")
    assert row["texts"] == 2 and 0 <= row["still_detected"] <= 1
    revision = store.revision()
    pipeline.attack(store, [run_id], lambda name: lm, attack="spoofing", params=params, seed=1)
    assert store.revision() == revision  # a repeated command changes nothing
    store.close()
    app = AppTest.from_file(APP, default_timeout=120)
    app.run()
    app.switch_page("pages/robustness.py").run()
    assert not app.exception
    assert "Forgery: answers written to pass for watermarked" in [header.value for header in app.subheader]


def test_a_grid_spec_sweeps_the_observed_answers_of_a_forgery_and_refuses_a_bad_value_in_one_line():
    from fwsapp.orchestration.grid import SpecError, load_spec

    spec = """
[grid]
models = ["smollm2"]
tasks = ["qa"]
n = 4
[[method]]
name = "KGW"
[steps]
attack = [{ name = "spoofing", params = { observed = [1, 2], forgeries = 2 } }]
"""
    steps = load_spec("forgery.toml", spec).steps.attack
    assert [dict(step.params)["observed"] for step in steps] == [1, 2] and {step.name for step in steps} == {"spoofing"}
    with pytest.raises(SpecError, match=r"^forgery.toml: \[steps\] attack 1: .*observed"):
        load_spec("forgery.toml", spec.replace("[1, 2]", "0"))


def test_a_synthid_text_too_short_for_an_ngram_has_a_curve_by_length():
    """A paraphrase four tokens long (the bench met one) is detected again with its score after every token."""
    from fwsapp.detection.length import prefix_statistics

    watermark = create("SynthID", 256)
    detection = watermark.detect([5, 6, 7, 8])
    assert detection.score == 0.5 and prefix_statistics("SynthID", watermark.params, detection) == [0.0] * 4


@pytest.mark.parametrize("method", [entry.name for entry in methods.METHODS if entry.unit == "sentence"])
def test_a_sentence_watermarks_verdict_is_too_short_only_under_the_sentences_any_marked_text_needs(method):
    """A detection service gave `too_short` to a SemStamp text of 17 scored sentences, none valid: the rule of thumb
    of 25 scored tokens was read as 25 sentences, more than an answer holds. Its uncalibrated minimum is the fewest
    sentences at which a text whose every sentence is marked passes its threshold: 4 at z > 3 and γ 0.25 (3 give
    z 3.0 exactly)."""
    from fwsapp.detection.verdicts import MinimumLength, verdict_fields
    from fwsapp.watermark.base import Detection

    declared = methods.info(method)
    minimum = MinimumLength.uncalibrated(declared, {})
    assert minimum.tokens == 4 and "sentences" in minimum.basis
    assert MinimumLength.uncalibrated(declared, {"z_threshold": 2.0}).tokens == 2  # √(2 · 3) = 2.45 > 2
    assert MinimumLength.uncalibrated(methods.info("KGW"), {}).tokens == 25  # a watermark of tokens keeps its rule
    service = SimpleNamespace(info=declared, is_watermarked=lambda detection: False)
    verdict = lambda sentences: verdict_fields(service, Detection(-0.7, sentences, z=-0.7), minimum)["verdict"]  # noqa: E731
    assert verdict(17) == "not_watermarked" and verdict(3) == "too_short"
    from fwsapp.cli.detect import verdict_counts

    counts = verdict_counts([{"text_kind": "watermarked", "evidence": {
        "verdict": "too_short", "algorithm": method, "min_tokens": {"tokens": minimum.tokens, "basis": minimum.basis}}}])
    assert counts.startswith("watermarked: 1 too_short (too short: under 4 scored sentences, not calibrated")


def test_a_sentence_watermarks_minimum_is_not_read_from_lengths_measured_in_tokens():
    from fwsapp.detection.verdicts import MinimumLength

    store = SimpleNamespace(run=lambda run_id: {"method": "SemStamp", "params": {}})
    with pytest.raises(ValueError, match="SemStamp scores sentences, and a run's lengths are measured in tokens"):
        MinimumLength.from_run(store, "r1", "SemStamp", methods.info("SemStamp").checked_params({}))
