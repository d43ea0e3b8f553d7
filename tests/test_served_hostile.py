"""Issue 58, items 2, 3, 18 and 19: a served run against servers on loopback that never answer, fail on one answer while
the others hang, or send empty answers; and the tokenizer a served run was given, kept with it.

The server here is a bare OpenAI-compatible completions endpoint (no model): what is under test is what fwsapp does
with its answers, not the watermark, so `mistral-v1` (shipped, loaded in a second) is the served model's tokenizer."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fwsapp.cli import main
from fwsapp.store import Store
from tests.conftest import PROJECT

MODEL = "served-7b"


class HostileServer:
    """/v1/models lists MODEL; /v1/completions answers each request as `mode(number, body)` says: a dict to send, or
    None to hold the request open (a server that accepted it and never answers) until the test ends."""

    def __init__(self, mode, models: tuple[str, ...] = (MODEL,)):
        self.mode, self.models = mode, models
        self.requests: list[dict] = []
        self.released = threading.Event()
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._send({"object": "list", "data": [{"id": name, "object": "model"} for name in server.models]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    number = len(server.requests)
                    server.requests.append(body)
                reply = server.mode(number, body)
                if reply is None:
                    server.released.wait(60)
                    return
                self._send(reply)

            def _send(self, reply: dict | bytes):
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html" if isinstance(reply, bytes) else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/v1"


@contextmanager
def hostile(mode, models: tuple[str, ...] = (MODEL,)):
    server = HostileServer(mode, models)
    thread = threading.Thread(target=server.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.released.set()
        server.http.shutdown()
        server.http.server_close()


def mistral_ids(text: str) -> list[int]:
    from fwsapp.models.tokenizers import load_tokenizer

    return load_tokenizer("mistral-v1").encode(text)


def completion(text: str, token_ids: list[int] | None = None) -> dict:
    """A completion as vLLM sends it, its token ids the text's own unless others are given."""
    token_ids = mistral_ids(text) if token_ids is None else token_ids
    return {"id": "c", "object": "text_completion", "created": 0, "model": MODEL,
            "choices": [{"index": 0, "text": text, "finish_reason": "length", "token_ids": token_ids,
                         "prompt_token_ids": [1, 2, 3]}]}


def generate_args(url: str, db, n: int = 4, extra: tuple = ()) -> list[str]:
    return ["generate", "--server", url, "--task", "qa", "--method", "gumbel", "--param", "key=5", "--tokenizer",
            "mistral-v1", "--n", str(n), "--max-new-tokens", "8", "--batch-size", str(n), "--db", str(db), *extra]


def only_run(db) -> dict:
    store = Store(db, read_only=True)
    try:
        [run_id] = store.runs().run_id
        return store.run(run_id)
    finally:
        store.close()


# -- item 19: the first final error stops the job at once, the requests in flight aborted --------------------------------
def test_a_final_reply_error_stops_the_job_at_once_though_other_requests_hang(tmp_path, capsys):
    def mode(number, body):  # the first answer is chat-shaped (no text), every other request hangs
        return {"choices": [{"index": 0, "message": {"content": "hi"}, "text": None}]} if number == 0 else None

    with hostile(mode) as server:
        started = time.monotonic()
        assert main(generate_args(server.url, tmp_path / "s.duckdb", extra=("--concurrency", "4"))) == 2
        elapsed = time.monotonic() - started
    assert elapsed < 15, elapsed  # not the request timeout of the requests left hanging
    assert "a reply whose text is not text" in capsys.readouterr().err
    run = only_run(tmp_path / "s.duckdb")
    assert run["status"] == "failed"


# -- item 18: a silent server is given up in bounded time, and SIGTERM ends the job within seconds ----------------------
def test_a_silent_server_is_given_up_after_the_timeout_the_user_sets(tmp_path, capsys):
    with hostile(lambda number, body: None) as server:
        started = time.monotonic()
        assert main(generate_args(server.url, tmp_path / "t.duckdb", n=1,
                                  extra=("--timeout", "1", "--attempts", "2"))) == 2
        elapsed = time.monotonic() - started
    assert elapsed < 12, elapsed
    error = capsys.readouterr().err
    assert "gave up after 2 attempts; last: timeout" in error
    assert only_run(tmp_path / "t.duckdb")["status"] == "failed"


@pytest.mark.slow
def test_sigterm_ends_a_served_job_whose_server_never_answers_within_seconds(tmp_path):
    db = tmp_path / "silent.duckdb"
    with hostile(lambda number, body: None) as server:
        process = subprocess.Popen([sys.executable, "-m", "fwsapp", *generate_args(server.url, db)], cwd=PROJECT,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not server.requests and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.2)
        assert server.requests, process.communicate(timeout=5)
        process.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        _, err = process.communicate(timeout=20)
        assert time.monotonic() - stopped < 8
    assert process.returncode != 0 and "Traceback" not in err, err
    run = only_run(db)
    assert run["status"] == "cancelled" and "resume" in run["status_reason"]


# -- item 3: empty answers are counted, stored without a score and left out of the rates --------------------------------
def test_empty_served_answers_are_counted_as_not_scorable_and_left_out_of_detection_rates(tmp_path, capsys):
    def mode(number, body):
        if body["prompt"].startswith(("What is", "How")) and body.get("watermarking", True) is False:
            return completion("", [])
        return completion(" a clear answer about it, in short")

    db = tmp_path / "e.duckdb"
    with hostile(mode) as server:
        assert main(generate_args(server.url, db)) == 0
    out = capsys.readouterr()
    run = only_run(db)
    store = Store(db, read_only=True)
    scores = store.detections([run["run_id"]])
    empty = scores[scores.num_tokens_scored == 0]
    assert len(empty) >= 1 and empty.score.isna().all()  # stored, not scored p = 1.0 as a negative
    assert f"{len(empty)} of 8 answers came back empty or of one token" in out.err
    from fwsapp.results.report import detection_comparison

    comparison = detection_comparison(store.runs(), scores)
    assert comparison.loc[0, "not scorable"] == len(empty)
    assert comparison.loc[0, "n negatives"] == 4 - len(empty)
    store.close()


# -- item 2: the tokenizer given once is kept with the run -------------------------------------------------------------
def test_a_served_run_keeps_its_tokenizer_for_every_later_step(tmp_path, capsys):
    db = tmp_path / "k.duckdb"
    with hostile(lambda number, body: completion(" an answer about it")) as server:
        assert main(generate_args(server.url, db, n=2)) == 0
    run = only_run(db)
    assert run["tokenizer"] == "mistral-v1" and run["config"]["tokenizer"] == "mistral-v1"
    store = Store(db, read_only=True)
    assert store.runs().tokenizer.tolist() == ["mistral-v1"]
    store.close()
    capsys.readouterr()
    # Re-detection names no tokenizer: the run's own is used, not the served model's name (no such tokenizer here).
    assert main(["detect", "--run", run["run_id"], "--db", str(db)]) == 0
    assert "mistral-v1" in capsys.readouterr().out
    from fwsapp.quality.perplexity import perplexity_oracle

    assert perplexity_oracle(run, None) is None  # no model of the server's is loaded here unless one is named


# -- item 1: the Detect page of a served run draws its token view from the stored ids, and a failing section is a line ---
def test_the_detect_page_shows_a_served_runs_tokens_without_its_model_and_a_failing_section_is_one_line(
        app_db, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from fwsapp.models import ModelLoadError

    with hostile(lambda number, body: completion(" an answer about it")) as server:
        assert main(generate_args(server.url, app_db, n=2)) == 0

    def no_model_here(name="smollm2-135m-instruct"):
        raise ModelLoadError(f"Could not load the model '{name}': the Hugging Face Hub did not answer within 30 s.")

    monkeypatch.setattr("fwsapp.ui.queries.model", no_model_here)
    monkeypatch.setattr("fwsapp.ui.resources.model", no_model_here)
    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120)
    app.run()
    app.switch_page("pages/detect.py").run()
    assert not app.exception
    # Detected from the engine's ids with the run's own tokenizer (mistral-v1), no model loaded.
    assert any(re.fullmatch(r"Score \S+ over 4 tokens\.", caption.value) for caption in app.caption), [
        caption.value for caption in app.caption]
    # The detector for any text needs the embedded model, which this test took away: one line, and the page goes on.
    app.text_area[0].set_value("Type 2 diabetes is managed with diet and metformin.").run()
    next(button for button in app.button if button.label == "Detect").click().run()
    assert not app.exception
    [error] = [error.value for error in app.error]
    assert error.startswith("The detector for any text&#58;") or error.startswith("The detector for any text:"), error
    assert "Hugging Face Hub did not answer" in error.replace("&#32;", " ")


# -- item 30: what a server that is not one, or lists thousands of models, or sends megabytes, gets said ---------------
def test_a_server_listing_thousands_of_models_is_named_in_one_short_line(tmp_path, capsys):
    with hostile(lambda number, body: None, models=tuple(f"model-{index}" for index in range(5000))) as server:
        assert main(generate_args(server.url, tmp_path / "m.duckdb")) == 2
    error = capsys.readouterr().err
    assert "model-0, model-1" in error and "and 4,990 more" in error and len(error) < 1000


def test_a_web_page_for_an_answer_is_named_as_such_and_a_huge_reply_is_not_retried(tmp_path, capsys):
    page = b"<!DOCTYPE html><html><head><title>Login</title></head><body>Sign in</body></html>"
    with hostile(lambda number, body: page) as server:
        assert main(generate_args(server.url, tmp_path / "h.duckdb")) == 2
    assert "not JSON but text beginning '<!DOCTYPE html>" in capsys.readouterr().err
    with hostile(lambda number, body: b"x" * (5 * 1024 * 1024)) as server:
        assert main(generate_args(server.url, tmp_path / "o.duckdb", n=1)) == 2
        asked = [json.dumps(body, sort_keys=True) for body in server.requests]
    error = capsys.readouterr().err
    assert "a reply of more than 4,194,304 bytes" in error and "gave up after" not in error
    # Not retried: no request sent twice. The answer's two requests (with and without the watermark) both reach the
    # server, or on a loaded machine the second is aborted before it does, by the first reply's final fault.
    assert 1 <= len(asked) <= 2 and len(set(asked)) == len(asked)


# -- item 9: a forgery of a method that cannot be stolen is refused on the form, before the click -----------------------
def test_the_robustness_form_refuses_spoofing_a_gumbel_run_before_the_click(app_db):
    from streamlit.testing.v1 import AppTest

    with hostile(lambda number, body: completion(" an answer about it")) as server:
        assert main(generate_args(server.url, app_db, n=2)) == 0
    app = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120)
    app.run()
    app.switch_page("pages/robustness.py").run()
    app.selectbox(key="attack-name").set_value("spoofing").run()
    assert not app.exception
    assert any("spoofing" in error.value or "steal" in error.value for error in app.error), [e.value for e in app.error]
    button = next(button for button in app.button if button.label == "Attack and detect")
    assert button.disabled and not any("resume" in error.value for error in app.error)


# -- item 25: text and ids that disagree are counted and said ------------------------------------------------------------
def test_answers_whose_text_is_not_what_their_ids_decode_to_are_counted_per_run(tmp_path, capsys):
    def mode(number, body):  # the watermarked answers' text swapped by a "proxy"; the opted-out ones left alone
        answer = completion(" metformin 500 mg twice daily")
        if body.get("watermarking", True) is not False:
            answer["choices"][0]["text"] = " insulin 50 units at night"
        return answer

    with hostile(mode) as server:
        assert main(generate_args(server.url, tmp_path / "d.duckdb", n=3)) == 0
    error = capsys.readouterr().err
    assert "3 answers' text is not what their token ids decode to" in error


# -- item 4: the removal baseline of a served run says it was read again from text, and how many ids changed -----------
def test_the_removal_baseline_of_a_served_run_says_how_many_texts_get_other_ids_from_text(tmp_path):
    from fwsapp.orchestration import pipeline
    from fwsapp.robustness.attack_sets import summary_frame
    from fwsapp.results.robustness_table import baseline_notes, labelled

    import sentencepiece

    from fwsapp.models import package_folder
    from fwsapp.models.tokenizers import load_tokenizer

    pieces = sentencepiece.SentencePieceProcessor(
        model_file=str(package_folder("mistral_common") / "data" / "tokenizer.model.v1"))
    text = " the patient took metformin daily"
    # "patient" as an engine may split it, in two tokens: the same text, other ids than reading it gives.
    split_otherwise = [pieces.piece_to_id(piece) for piece in
                       ("▁the", "▁pat", "ient", "▁took", "▁met", "form", "in", "▁daily")]
    assert load_tokenizer("mistral-v1").decode(split_otherwise) == text.strip()
    assert mistral_ids(text) != split_otherwise

    def mode(number, body):  # every watermarked answer split the engine's way, the opted-out ones as the text reads
        return completion(text, split_otherwise if body.get("watermarking", True) is not False else None)

    db = tmp_path / "r.duckdb"
    with hostile(mode) as server:
        assert main(generate_args(server.url, db, n=2)) == 0
    store = Store(db)
    [run_id] = store.runs().run_id
    pipeline.attack(store, [run_id], None, attack="word-deletion", params={"ratio": 0.2}, measure=False)
    frame = labelled(summary_frame(store), store.runs())
    [(label, note)] = baseline_notes(frame).items()
    assert label == frame.run.iloc[0] and note == ("read again from text with mistral-v1: 2 of 2 texts get other ids "
                                                   "than the engine sent (the Detect page reads the engine's)")
    store.close()


# -- item 6: each served answer keeps its own seconds, not the batch's share ------------------------------------------
def test_each_served_answer_keeps_its_own_seconds(tmp_path):
    slow_prompt = []

    def mode(number, body):
        slow_prompt[:] = slow_prompt or [body["prompt"]]
        if body["prompt"] == slow_prompt[0]:
            time.sleep(0.6)
        return completion(" an answer about it")

    db = tmp_path / "t.duckdb"
    with hostile(mode) as server:
        assert main(generate_args(server.url, db, n=2, extra=("--concurrency", "4"))) == 0
    rows = Store(db, read_only=True).generations(only_run(db)["run_id"]).set_index("prompt")
    slow, fast = rows.loc[slow_prompt[0]], rows.drop(index=slow_prompt[0]).iloc[0]
    assert slow.watermarked_seconds >= 0.6 and slow.unwatermarked_seconds >= 0.6
    assert fast.watermarked_seconds < 0.4 and fast.unwatermarked_seconds < 0.4

