"""Issue 60, items 1 and 2: the detection service answers as vLLM's reference detection server does, for every
watermark, with a three-state verdict and an evidence record that validates against its published schema, and never
shows the key.

vLLM's reference server (vLLM 0.33, examples/basic/online_serving/watermark_detection_server.py) is not in the vllm
wheel: `reference_server` below is its contract, a FastAPI app whose POST /detect encodes the text without special
tokens and answers the four fields of `GumbelWatermarkDetector.detect`, here vLLM's own detector (tests/vllm_oracle.py).
"""
from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time

import httpx
import jsonschema
import numpy as np
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import BaseModel

from fwsapp.detection.verdicts import MinimumLength, TextDetector
from fwsapp.models.tokenizers import load_tokenizer
from fwsapp.service.detection import MAX_BATCH, MAX_BODY_BYTES, DetectionRunner, RateLimit, create_app
from fwsapp.watermark import methods
from tests.conftest import PROJECT, free_port
from tests.vllm_oracle import vllm_watermarking

KEY = "987654321987"  # the deployment's key: it must appear in no response and no log
KEY_VARIABLE = "FWSAPP_TEST_DEPLOYED_KEY"
SCHEMA = json.loads((PROJECT / "docs" / "evidence-record.schema.json").read_text())
WORDS = ("the patient should take the dose with food and water each day to reduce pain fever and swelling while "
         "blood pressure and heart rate are checked by a doctor or nurse at home or in the clinic after surgery for "
         "infection diabetes asthma cancer stroke kidney liver lung skin bone muscle joint eye ear nose throat").split()


@pytest.fixture(scope="module")
def llama3():
    return load_tokenizer("llama-3")


@pytest.fixture
def deployed_key(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    return f"${KEY_VARIABLE}"


def gumbel_watermarked_ids(tokenizer, key: int, length: int = 60, width: int = 4, prefix: list[int] = ()) -> list[int]:
    """`prefix`, then the token ids a Gumbel watermark under `key` would pick where the model is indifferent among
    common words: at each position the candidate whose keyed uniform is largest (Gumbel-max sampling of a uniform
    distribution)."""
    prf = vllm_watermarking().PhiloxPRF(key)
    import torch

    candidates = sorted({ids[0] for ids in (tokenizer.encode(" " + word) for word in WORDS) if len(ids) == 1})
    chosen = list(prefix)
    for _ in range(length):
        context = ([-1] * width + chosen)[-width:]
        uniforms = prf.uniform(torch.tensor([context]), torch.tensor([candidates]))[0]
        chosen.append(candidates[int(uniforms.argmax())])
    return chosen


def human_ids(tokenizer, seed: int, length: int = 60) -> list[int]:
    rng = np.random.default_rng(seed)
    return tokenizer.encode(" ".join(rng.choice(WORDS, length)))


class ReferenceRequest(BaseModel):
    text: str


def reference_server(tokenizer, key: int) -> FastAPI:
    """vLLM's reference detection server's contract over vLLM's own Gumbel detector (its defaults: context width 4,
    p-value threshold 0.01, Philox, repeated contexts scored once)."""
    detector = vllm_watermarking().GumbelWatermarkDetector(key=key, context_width=4, p_value_threshold=0.01)
    app = FastAPI()

    @app.post("/detect")
    def detect(request: ReferenceRequest) -> dict:
        result = detector.detect(tokenizer.encode(request.text, add_special_tokens=False))
        return {"score": result.score, "p_value": result.p_value, "num_scored_tokens": result.num_scored_tokens,
                "is_watermarked": result.is_watermarked}

    return app


def test_a_client_of_vllms_reference_server_gets_the_same_four_fields_from_fwsapps(llama3, deployed_key):
    from fwsapp.models.tokenizers import llama_3_huggingface

    vllm_tokenizer = llama_3_huggingface()
    theirs = TestClient(reference_server(vllm_tokenizer, int(KEY)))
    ours = TestClient(create_app(TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3)))
    texts = [llama3.decode(gumbel_watermarked_ids(llama3, int(KEY))), llama3.decode(human_ids(llama3, 1)),
             llama3.decode(gumbel_watermarked_ids(llama3, int(KEY) + 1)), "Take 500 mg twice daily.", "", "   "]
    watermarked = []
    for text in texts:
        expected = theirs.post("/detect", json={"text": text}).json()
        answer = ours.post("/detect", json={"text": text}).json()
        assert {field: answer[field] for field in expected} == expected, text
        watermarked.append(answer["is_watermarked"])
    assert watermarked == [True, False, False, False, False, False]


def test_token_ids_a_batch_and_three_verdicts_with_evidence_that_validates_and_holds_no_key(llama3, deployed_key):
    detector = TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3, minimum=MinimumLength(40, "given"))
    client = TestClient(create_app(detector))
    marked, human = gumbel_watermarked_ids(llama3, int(KEY)), human_ids(llama3, 2)
    items = [{"token_ids": marked}, {"token_ids": human}, {"token_ids": human[:10]}, {"token_ids": marked[:12]}]
    response = client.post("/detect/batch", json={"items": items})
    assert response.status_code == 200 and KEY not in response.text
    results = response.json()["results"]
    assert [result["verdict"] for result in results] == ["watermarked", "not_watermarked", "too_short", "watermarked"]
    single = client.post("/detect", json={"token_ids": marked}).json()
    assert single == results[0]  # one text alone or in a batch: the same answer
    for result in results:
        jsonschema.validate(result["evidence"], SCHEMA)
    evidence = results[0]["evidence"]
    assert evidence["algorithm"] == "vLLM-Gumbel" and evidence["context_width"] == 4
    assert evidence["deduplication"] == "single_turn" and evidence["tokenizer"] == "llama-3"
    assert set(evidence["key_fingerprints"]) == {"key"} and "key" not in evidence["parameters"]
    assert evidence["keyed_draw"]["reference"].startswith("vLLM 0.33.0")
    assert evidence["min_tokens"] == {"tokens": 40, "basis": "given"}


def test_each_answer_says_how_long_its_detection_took(llama3, deployed_key, monkeypatch):
    """Server-Timing (W3C): the detection's own milliseconds, one text's or a batch's, so a deployer can tell the
    detector's time from the network's and the service's."""
    detector = TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3)
    detect = detector.verdict_of_text

    def slow(text):  # a detection that takes at least 50 ms
        time.sleep(0.05)
        return detect(text)

    monkeypatch.setattr(detector, "verdict_of_text", slow)
    client = TestClient(create_app(detector))

    def detection_ms(response) -> float:
        assert response.status_code == 200
        return float(re.fullmatch(r"detect;dur=(\d+\.\d{3})", response.headers["server-timing"]).group(1))

    text = llama3.decode(gumbel_watermarked_ids(llama3, int(KEY)))
    began = time.perf_counter()
    one = detection_ms(client.post("/detect", json={"text": text}))
    assert 50 <= one < 1000 * (time.perf_counter() - began)
    assert 150 <= detection_ms(client.post("/detect/batch", json={"items": [{"text": text}] * 3}))
    assert detection_ms(client.post("/detect", json={"token_ids": llama3.encode(text)})) < 50  # not slowed
    assert "server-timing" not in client.post("/detect", json={}).headers  # refused: nothing detected


@pytest.mark.parametrize("method", ["KGW", "SynthID", "EXP", "Unigram"])
def test_every_watermark_that_detects_from_text_answers_with_a_valid_record(llama3, deployed_key, method):
    key_param = methods.info(method).secret_params[0]
    client = TestClient(create_app(TextDetector(method, {key_param: deployed_key}, llama3)))
    answer = client.post("/detect", json={"text": "Metformin lowers blood sugar in type 2 diabetes."}).json()
    assert {"score", "p_value", "num_scored_tokens", "is_watermarked"} <= set(answer) and KEY not in json.dumps(answer)
    jsonschema.validate(answer["evidence"], SCHEMA)
    assert answer["evidence"]["algorithm"] == method and not answer["is_watermarked"]
    # Ten tokens, and no run's lengths given: too short to tell, not "not_watermarked" (even an answer whose every token
    # is green would not pass KGW's z > 4 before 17 tokens).
    assert answer["num_scored_tokens"] < 25 and answer["verdict"] == "too_short"
    assert answer["evidence"]["min_tokens"]["tokens"] == 25 and "not calibrated" in answer["evidence"]["min_tokens"]["basis"]


@pytest.mark.parametrize("method", [name for name in methods.watermark_names()
                                    if not methods.info(name).needs_model and methods.info(name).unit == "token"])
def test_a_reader_who_sets_each_records_score_against_its_threshold_reaches_its_verdict(llama3, deployed_key, method):
    """SynthID's records gave its z as the score beside a threshold of mean g > 0.52: a reference whose mean g was 0.514
    (not watermarked) read score 0.64. The score is what the threshold reads, or the p-value is where it reads one."""
    info = methods.info(method)
    detector = TextDetector(method, {**info.test_params, info.secret_params[0]: deployed_key}, llama3)
    threshold = detector.watermark.params[info.threshold_param]
    texts = np.random.default_rng(0).integers(1000, 30000, size=(20, 60))
    for token_ids in texts.tolist():
        record = detector.verdict_of_ids(token_ids).evidence
        assert record["threshold"] == {info.threshold_param: threshold}
        read = record["p_value"] if info.score_label == "p" else record["score"]
        assert record["is_watermarked"] == info.is_watermarked(read, detector.watermark.params), record
        if info.score_label != "p":
            assert record["score"] == detector.watermark.detect(token_ids).score


def test_refusals_are_clear_4xx_never_5xx(llama3, deployed_key):
    detector = TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3)
    client = TestClient(create_app(detector, token="t" * 8 + "Q7pX2mZk9vR4wL6sN1bJ3hF8dG5cT0yA"))
    authorised = {"Authorization": "Bearer " + "t" * 8 + "Q7pX2mZk9vR4wL6sN1bJ3hF8dG5cT0yA"}
    assert client.post("/detect", json={"text": "x"}).status_code == 401
    assert client.post("/detect", json={"text": "x"}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/detect", json={"text": "x"}, headers=authorised).status_code == 200
    cases = [
        ({"text": "x", "token_ids": [1]}, 422, "either text or token_ids"),
        ({}, 422, "either text or token_ids"),
        ({"token_ids": [llama3.vocab_size]}, 422, "outside llama-3's vocabulary"),
        ({"text": 5}, 422, "string"),
        ({"text": "x", "extra": 1}, 422, "Extra inputs"),
    ]
    for body, status, message in cases:
        response = client.post("/detect", json=body, headers=authorised)
        assert response.status_code == status and message in response.text, body
    assert client.post("/detect/batch", json={"items": [{"text": "x"}] * (MAX_BATCH + 1)},
                       headers=authorised).status_code == 422
    oversized = client.post("/detect", content=b"{" + b" " * MAX_BODY_BYTES + b"}", headers=authorised)
    assert oversized.status_code == 413 and "over" in oversized.json()["detail"]
    assert client.post("/detect", content=b"not json", headers=authorised).status_code == 422
    # A lone surrogate is valid JSON but no character: refused as a string that is not one, and the refusal, which
    # echoes the input, is still written (as UTF-8 it could not be: a 500 before).
    for body in (b'{"text": "\\ud800 fever"}', b'{"items": [{"text": "ok"}, {"text": "\\udfff"}]}'):
        refused = client.post("/detect/batch" if b"items" in body else "/detect", content=body,
                              headers={**authorised, "Content-Type": "application/json"})
        assert refused.status_code == 422 and refused.json()["detail"][0]["type"] == "string_unicode", refused.text


def test_a_client_over_its_rate_is_refused_with_429(llama3, deployed_key):
    client = TestClient(create_app(TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3), rate_limit="3/minute"))
    statuses = [client.post("/detect", json={"text": "x"}).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = client.post("/detect", json={"text": "x"})
    assert "slow down" in refused.json()["detail"] and 1 <= int(refused.headers["Retry-After"]) <= 60


def test_a_quick_detection_runs_on_the_event_loop_a_slow_one_and_one_behind_a_busy_thread_in_the_thread(monkeypatch):
    """Item 7 within item 1's rule: handing a 200-token text's detection to the thread costs a fifth of detecting it,
    so one expected to take under INLINE_SECONDS runs on the loop; anything else, and anything that arrives while
    the thread is busy (so answers keep their order, even when the request that sent that work has gone), runs in the
    detection thread."""
    # A budget of 100 ms (5 ms served) and a slow detection of 500 ms: a busy machine's pauses change nothing here.
    monkeypatch.setattr("fwsapp.service.detection.INLINE_SECONDS", 0.1)
    runner, finished, running = DetectionRunner(), [], threading.Event()

    def where(label: str = "", pause: float = 0.0, until: threading.Event | None = None) -> str:
        if until is not None:
            running.set()
            assert until.wait(30)
        if pause:
            time.sleep(pause)
        finished.append(label)
        return threading.current_thread().name

    async def detected(*args) -> str:  # where the detection ran (the runner also answers how long it took)
        return (await runner.detect(*args))[0]

    async def busy_thread(label: str, release: threading.Event) -> asyncio.Future:
        running.clear()
        held = asyncio.ensure_future(detected(label, 1, where, label, 0.0, release))  # a unit not yet timed
        while not running.is_set():  # under way there, not only queued
            await asyncio.sleep(0.001)
        return held

    async def scenario():
        loop, thread = threading.current_thread().name, "fwsapp-detection"
        assert (await detected("characters", 1, where)).startswith(thread)  # not yet timed
        assert await detected("characters", 1, where) == loop
        assert (await detected("token_ids", 1, where)).startswith(thread)  # each unit is timed apart
        assert await detected("token_ids", 1, where) == loop
        assert (await detected("token_ids", 10**9, where)).startswith(thread)  # a thousand times the budget
        assert await detected("characters", 1, where, "", 0.5) == loop  # expected quick, it took 500 ms:
        assert await detected("characters", 1, where) == loop  # one pause among quick ones moves nothing
        for _ in range(2):
            assert await detected("characters", 1, where, "", 0.5) == loop
        assert (await detected("characters", 1, where)).startswith(thread)  # half were slow: not quick any more
        assert (await runner.in_thread(where)).startswith(thread)  # a batch

        release = threading.Event()
        held = await busy_thread("held", release)
        behind = asyncio.ensure_future(detected("token_ids", 1, where, "behind"))  # quick, but queued
        await asyncio.sleep(0.05)
        assert not held.done() and not behind.done()
        release.set()
        assert (await behind).startswith(thread) and (await held).startswith(thread)
        assert finished[-2:] == ["held", "behind"]

        release = threading.Event()
        gone = await busy_thread("gone", release)
        gone.cancel()  # its client hung up; its detection goes on
        behind = asyncio.ensure_future(detected("token_ids", 1, where, "behind"))
        await asyncio.sleep(0.05)
        assert not behind.done()
        release.set()
        assert (await behind).startswith(thread) and finished[-2:] == ["gone", "behind"]

    asyncio.run(scenario())
    runner.thread.shutdown()


def test_the_service_answers_while_a_long_detection_runs(llama3, deployed_key):
    """Detection must not block the event loop: a long text's detection, held until /health has answered, lets it."""
    detector = TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3)
    long_text, health_answered = llama3.decode(human_ids(llama3, 4, 2000)), threading.Event()
    verdict_of_text = detector.verdict_of_text

    def held(text):
        if text == long_text:
            assert health_answered.wait(30), "/health was not answered while a detection ran"
        return verdict_of_text(text)

    detector.verdict_of_text = held

    async def scenario():
        transport = httpx.ASGITransport(app=create_app(detector))
        async with httpx.AsyncClient(transport=transport, base_url="http://fwsapp") as client:
            detection = asyncio.ensure_future(client.post("/detect", json={"text": long_text}))
            assert (await client.get("/health")).status_code == 200
            assert not detection.done()
            health_answered.set()
            return (await detection).json()

    answer = asyncio.run(scenario())
    assert answer["num_scored_tokens"] > 1000 and answer["verdict"] == "not_watermarked"


def test_the_openapi_schema_declares_vllms_fields():
    from fwsapp.service.detection import DetectionResponse

    required = DetectionResponse.model_json_schema()["required"]
    assert required[:4] == ["score", "p_value", "num_scored_tokens", "is_watermarked"]


@pytest.fixture
def nothing_loads(monkeypatch):
    """A model or tokenizer loaded fails the test: what is refused is refused before."""
    from fwsapp import models
    from fwsapp.models import tokenizers

    def loading(*args, **kwargs):
        raise AssertionError("a model or tokenizer was loaded before the arguments were checked")

    monkeypatch.setattr(models, "load_model", loading)
    monkeypatch.setattr(tokenizers, "load_tokenizer", loading)


@pytest.mark.parametrize("method", methods.post_hoc_names())
def test_serve_detection_refuses_a_post_hoc_detector_before_loading_anything(method, nothing_loads, capsys):
    """LogRank and its kin give no watermark verdict; the refusal came after the embedded model had loaded."""
    from fwsapp.cli import main

    assert main(["serve-detection", "--method", method]) == 2
    assert "post-hoc detector with no key" in capsys.readouterr().err


@pytest.mark.parametrize("rate, message", [("abc", "'abc' is not a rate"),
                                           ("0/second", "'0/second' lets no request through")])
def test_serve_detection_refuses_a_rate_limit_that_is_none_or_lets_nothing_through(rate, message, nothing_loads,
                                                                                 monkeypatch, capsys):
    """"0/second" was served: every request answered 429."""
    from fwsapp.cli import main

    monkeypatch.setenv(KEY_VARIABLE, KEY)
    command = ["serve-detection", "--method", "vLLM-Gumbel", "--param", f"key=${KEY_VARIABLE}", "--rate-limit", rate]
    assert main(command) == 2
    assert f"--rate-limit {message}" in capsys.readouterr().err
    with pytest.raises(ValueError, match=message):
        RateLimit(FastAPI(), rate)


@pytest.mark.parametrize("options, unused", [(["--model", "m", "--tokenizer", "llama-3"], "--model is unused"),
                                             (["--device", "cuda:1"], "--device is unused"),
                                             (["--device", "cpu", "--dtype", "fp32"], "--device and --dtype are unused")])
def test_serve_detection_refuses_loading_options_its_detector_does_not_read(options, unused, nothing_loads,
                                                                             monkeypatch, capsys):
    """vLLM-Gumbel detects from the tokens alone: --model beside --tokenizer, --device and --dtype were ignored."""
    from fwsapp.cli import main

    monkeypatch.setenv(KEY_VARIABLE, KEY)
    assert main(["serve-detection", "--method", "vLLM-Gumbel", "--param", f"key=${KEY_VARIABLE}", *options]) == 2
    err = capsys.readouterr().err
    assert "vLLM-Gumbel's detector reads no model, so none is loaded: " + unused in err and KEY not in err


def test_serve_detection_reads_lengths_only_from_a_run_of_its_parameters(tmp_path, nothing_loads, monkeypatch, capsys):
    """A KGW run of γ = 0.5 set the too-short line of a service detecting at γ = 0.25, as "calibrated" on that run; and
    --db without --lengths-from was read by nothing, without a word."""
    from fwsapp.cli import main
    from tests.conftest import imported_qa_db

    db = str(tmp_path / "runs.duckdb")
    run_id = imported_qa_db(db, 2)  # KGW, delta 2, gamma 0.5, no scores by length
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    served = ["serve-detection", "--method", "KGW", "--param", f"hash_key=${KEY_VARIABLE}"]
    assert main([*served, "--param", "gamma=0.25", "--lengths-from", run_id, "--db", db]) == 2
    assert (f"Run {run_id}'s lengths were measured under gamma=0.5, not gamma=0.25: give the run's values with --param"
            in capsys.readouterr().err)
    # Another key and another verdict threshold are the same lengths: the run is read, and lacks its curves.
    assert main([*served, "--param", "z_threshold=5", "--lengths-from", run_id, "--db", db]) == 2
    assert f"Run {run_id} has no scores by length" in capsys.readouterr().err
    assert main([*served, "--db", db]) == 2
    assert "--db names the database --lengths-from reads its run from" in capsys.readouterr().err


@pytest.mark.model  # starts the service as users do: a process on a port
def test_serve_detection_serves_on_loopback_refuses_off_it_without_a_token_and_never_logs_the_key(tmp_path, llama3):
    environment = {**os.environ, KEY_VARIABLE: KEY, "PYTHONPATH": str(PROJECT)}
    environment.pop("FWSAPP_ADMIN_TOKEN", None)
    command = [sys.executable, "-m", "fwsapp", "serve-detection", "--method", "vLLM-Gumbel",
               "--param", f"key=${KEY_VARIABLE}", "--tokenizer", "llama-3"]
    refused = subprocess.run([*command, "--host", "0.0.0.0"], env=environment, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode == 2 and "FWSAPP_ADMIN_TOKEN" in refused.stderr
    assert "could detect with the deployment's key" in refused.stderr and "leave --host out" in refused.stderr
    literal = subprocess.run([*command[:7], "key=12345", "--tokenizer", "llama-3"], env=environment,
                             capture_output=True, text=True, timeout=120)
    assert literal.returncode == 2 and "from the environment only" in literal.stderr

    port = free_port()
    log = tmp_path / "service.log"
    with open(log, "w") as output:
        process = subprocess.Popen([*command, "--port", str(port)], env=environment, stdout=output,
                                   stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.5)
        marked = llama3.decode(gumbel_watermarked_ids(llama3, int(KEY)))
        answer = httpx.post(f"{url}/detect", json={"text": marked}, timeout=30).json()
        assert answer["is_watermarked"] and answer["verdict"] == "watermarked"
        assert "/detect" in httpx.get(f"{url}/openapi.json", timeout=10).json()["paths"]
    finally:
        process.terminate()
        process.wait(timeout=20)
    assert KEY not in log.read_text() and "vLLM-Gumbel" in log.read_text()


@pytest.mark.parametrize("method", ["KGW", "SynthID", "vLLM-Gumbel"])
def test_answers_the_embedded_model_wrote_are_detected_through_the_service(lm, deployed_key, method):
    """The watermarked answer and its unwatermarked twin, as the model wrote them under the deployed key, sent as text."""
    from fwsapp.generation.playground import try_prompt
    from fwsapp.models.tokenizers import from_huggingface

    key_param = methods.info(method).secret_params[0]
    params = {key_param: deployed_key}
    trial = try_prompt(lm, "What are the symptoms of type 2 diabetes, and how is it treated?", method, params,
                       max_new_tokens=96, seed=3)
    client = TestClient(create_app(TextDetector(method, params, from_huggingface(lm.name, lm.tokenizer))))
    answers = {kind: client.post("/detect", json={"text": trial.text(kind)}).json()
               for kind in ("watermarked", "unwatermarked")}
    assert answers["watermarked"]["verdict"] == "watermarked", answers["watermarked"]
    assert answers["unwatermarked"]["verdict"] == "not_watermarked", answers["unwatermarked"]
    for answer in answers.values():
        jsonschema.validate(answer["evidence"], SCHEMA)
        assert KEY not in json.dumps(answer)


def test_schema_driven_fuzzing_finds_no_server_error(llama3, deployed_key):
    """schemathesis draws requests from the served OpenAPI schema, valid and not: none may end in a 5xx."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis.checks import not_a_server_error

    app = create_app(TextDetector("vLLM-Gumbel", {"key": deployed_key}, llama3), rate_limit="100000/second")
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures, statuses = [], []
    for operation in schema.get_all_operations():
        # A GET has nothing to send wrong: only its valid request.
        modes = schemathesis.GenerationMode if operation.ok().method.upper() == "POST" else [schemathesis.GenerationMode.POSITIVE]
        for mode in modes:
            @settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            @given(operation.ok().as_strategy(mode))
            def check(case):
                response = case.call()
                statuses.append(response.status_code)
                try:
                    case.validate_response(response, checks=(not_a_server_error,))
                except Exception as error:  # noqa: BLE001  (collected: every operation is fuzzed before failing)
                    failures.append((case.path, response.status_code, str(error)[:200]))

            check()
    assert failures == []
    assert len(statuses) >= 150 and {200, 422} <= set(statuses)  # both valid and invalid requests were sent
