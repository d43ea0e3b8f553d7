"""A small OpenAI-compatible chat server on 127.0.0.1 that adds latency and fails on demand.

`plan` maps a marker (any substring of the request body, e.g. a sample's prompt) to a list of modes
used by successive matching requests; other requests get `default`. Modes:
  valid      a verdict in the paper's format, with token usage
  429        rate limited, with Retry-After
  500        a server error
  hang       no answer until well after the client's timeout
  truncated  a body cut off mid-JSON (Content-Length larger than what is sent)
  noscores   a reasoned reply with no [[A]]/[[B]] scores
  rewrite    the text after the request's instruction (its last paragraph) with every "the" made "a": a paraphrase
  empty      an empty reply
Hostile modes (a server that misbehaves):
  trickle    a valid reply sent one byte every half second
  endless    a chunked reply that never ends
  huge       a reply of 64 MB
  retry-inf  429 with Retry-After: inf (retry-big: 100000, retry-e300: 1e300)
  object     a reply whose content is a JSON object, not text (number: a number)
A request with `response_format` (a JSON schema) is answered as a constraining server answers it: a JSON verdict,
whatever the mode's text would have been; with `structured=False` the stub is a server without that option, and
refuses such a request with 400.
"""
from __future__ import annotations

import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VALID_VERDICT = "A is clear and accurate; B drifts off topic.\n\n```\n[[A]]: [4, 4, 5]\n[[B]]: [3, 2, 2]\n```"
STRUCTURED_VERDICT = json.dumps({"explanation": "A is clear and accurate; B drifts off topic.", "A": [4, 4, 5],
                                 "B": [3, 2, 2]})


class StubServer:
    def __init__(self, latency: float = 0.0, default: str = "valid", retry_after: float = 0.2, hang_seconds: float = 5.0,
                 structured: bool = True):
        self.latency = latency
        self.structured = structured
        self.default = default
        self.retry_after = retry_after
        self.hang_seconds = hang_seconds
        self.plan: dict[str, list[str]] = {}
        self.served = Counter()
        self.requests: list[dict] = []
        self.headers_seen: list[dict] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> "StubServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _mode(self, body: str) -> str:
        with self._lock:
            for marker, modes in self.plan.items():
                if marker in body and modes:
                    return modes.pop(0)
            return self.default

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # keep test output clean
                pass

            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length).decode()
                with stub._lock:
                    stub.requests.append(request := json.loads(body))
                    stub.headers_seen.append(dict(self.headers))
                if "response_format" in request and not stub.structured:  # refused before any mode is used
                    with stub._lock:
                        stub.served["400"] += 1
                    return self._json(400, {"error": {"message": "response_format is not supported",
                                                      "type": "invalid_request_error"}})
                mode = stub._mode(body)
                with stub._lock:
                    stub.served[mode] += 1
                time.sleep(stub.latency)
                if mode == "hang":
                    time.sleep(stub.hang_seconds)
                    return self._json(200, _completion(VALID_VERDICT))
                if mode in HOSTILE:
                    return HOSTILE[mode](self)
                if mode == "429":
                    return self._json(429, {"error": {"message": "slow down", "type": "rate_limit"}},
                                      {"Retry-After": str(stub.retry_after)})
                if mode == "500":
                    return self._json(500, {"error": {"message": "boom", "type": "server_error"}})
                if mode == "truncated":
                    data = json.dumps(_completion(VALID_VERDICT)).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if "response_format" in request:
                    return self._json(200, _completion(STRUCTURED_VERDICT))
                if mode == "rewrite":
                    text = request["messages"][-1]["content"].split("\n\n")[-1]
                    return self._json(200, _completion(" ".join("a" if word.lower() == "the" else word
                                                                for word in text.split())))
                if mode == "empty":
                    return self._json(200, _completion(""))
                if mode == "noscores":
                    return self._json(200, _completion("Both answers are reasonable; A is slightly better."))
                return self._json(200, _completion(VALID_VERDICT))

            def _json(self, status: int, payload: dict, headers: dict | None = None):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client gave up (a timeout): nothing to do
                    pass

        return Handler


def _trickle(handler) -> None:
    data = json.dumps(_completion(VALID_VERDICT)).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    for byte in data:
        try:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
        except OSError:  # the client gave up
            return
        time.sleep(0.5)


def _endless(handler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    chunk = b" " * 1024
    deadline = time.monotonic() + 300  # bounded, as every test server's loop is
    while time.monotonic() < deadline:
        try:
            handler.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            handler.wfile.flush()
        except OSError:
            return
        time.sleep(0.05)


def _huge(handler) -> None:
    text = "x" * (64 * 1024 * 1024)
    handler._json(200, _completion(text))


def _retry(value: str):
    return lambda handler: handler._json(429, {"error": {"message": "slow down", "type": "rate_limit"}},
                                         {"Retry-After": value})


def _content(value):
    def reply(handler):
        completion = _completion("")
        completion["choices"][0]["message"]["content"] = value
        handler._json(200, completion)
    return reply


HOSTILE = {"trickle": _trickle, "endless": _endless, "huge": _huge, "retry-inf": _retry("inf"),
           "retry-big": _retry("100000"), "retry-e300": _retry("1e300"), "object": _content({"a": 1}),
           "number": _content(42)}


def _completion(text: str) -> dict:
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()), "model": "stub-judge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 500, "completion_tokens": 120, "total_tokens": 620},
    }


def plan_by_sample(store, run_id: str) -> dict[int, str]:
    """Each sample's prompt, usable as a plan marker (prompts are unique in the test runs)."""
    return {int(row.sample_idx): row.prompt for row in store.generations(run_id).itertuples()}
