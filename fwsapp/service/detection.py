"""The detection service: an ASGI app (FastAPI) a client of vLLM's reference detection server uses unchanged.

- `POST /detect` takes `{"text": ...}` as vLLM's server does (or `{"token_ids": [...]}`) and answers its four fields,
  `score`, `p_value`, `num_scored_tokens`, `is_watermarked`, plus a three-state `verdict` and an `evidence` record
  (fwsapp.detection.verdicts);
- `POST /detect/batch` takes `{"items": [...]}`, up to MAX_BATCH requests, and answers `{"results": [...]}` in order;
- `GET /health`, and the OpenAPI schema at `/openapi.json` (FastAPI's, with its pages at `/docs`).

Each detection's answer says in its `Server-Timing` header (W3C Server Timing: `detect;dur=0.812`, milliseconds) how
long the detection itself took, so a deployer can tell the detector's time from the network's and the service's.

Detection is CPU-bound, so a detection that takes time runs in the service's one detection thread and the event loop
keeps answering (`DetectionRunner`): one thread, because the detector answers one text at a time under its lock, so
requests queue there in order rather than in a pool of threads waiting on the lock. With a bearer token set (the app's
admin token, `FWSAPP_ADMIN_TOKEN`) every detection asks for it; off loopback one is required. Requests are limited in
size (fwsapp/service/limits.py) and rate (the `limits` library, per client address); each refusal is a 4xx with a
`detail` saying what to change.
"""
from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import Literal

import limits
from fastapi import Depends, FastAPI, HTTPException
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import FixedWindowRateLimiter
from pydantic import BaseModel, ConfigDict, Field, model_validator

import fwsapp
from fwsapp.detection.verdicts import VERDICTS, TextDetector
from fwsapp.human.access import is_admin_token
from fwsapp.service.limits import DEFAULT_RATE_LIMIT, MAX_BATCH, MAX_BODY_BYTES, MAX_TEXT_CHARACTERS, MAX_TOKEN_IDS

# A detection expected to take less runs on the event loop (DetectionRunner): a 200-token text's Gumbel detection is
# 1 ms here quiet and 3.5 ms with the host busy, when the hop to the thread grows too; detections are serialised
# anyway, so holding the loop this long delays only requests that detect nothing (asyncio warns of a callback at 100 ms).
INLINE_SECONDS = 0.005
RATE_FLOOR = 256  # characters or token ids: a tiny input's fixed costs count as if it were this long


class DetectionRequest(BaseModel):
    """One text, or its token ids under the service's tokenizer."""

    model_config = ConfigDict(extra="forbid")
    text: str | None = Field(None, max_length=MAX_TEXT_CHARACTERS, description="the text, tokenised without special "
                             "tokens as vLLM's reference server does")
    token_ids: list[int] | None = Field(None, max_length=MAX_TOKEN_IDS, description="the generated token ids instead")

    @model_validator(mode="after")
    def one_of_text_or_ids(self):
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("send either text or token_ids, not both and not neither")
        return self


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    items: list[DetectionRequest] = Field(..., min_length=1, max_length=MAX_BATCH)


class DetectionResponse(BaseModel):
    """vLLM's reference server's four fields, then fwsapp's."""

    score: float = Field(description="the test statistic, larger when watermarked (vLLM-Gumbel: the sum of evidence)")
    p_value: float | None = Field(description="the p-value (SynthID's: the normal tail of its z); null for a score with no "
                                              "nominal distribution")
    num_scored_tokens: int
    is_watermarked: bool = Field(description="at the method's own threshold")
    verdict: Literal[VERDICTS] = Field(description="watermarked, not_watermarked, or too_short to tell")
    evidence: dict = Field(description="the evidence record (docs/evidence-record.schema.json)")


class BatchResponse(BaseModel):
    results: list[DetectionResponse]


class BodySizeLimit:
    """Refuses a request body over `limit` bytes with 413, before it is read whole. Written here because FastAPI's own
    `max_body_size` answers a body declared too large with a plain "Content Too Large" that no handler can replace, and
    a refusal here says what to send instead."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await self._refuse(scope, receive, send)
        received = 0

        async def counted_receive():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > self.limit:
                raise _TooLarge
            return message

        try:
            await self.app(scope, counted_receive, send)
        except _TooLarge:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope, receive, send):
        response = JSONResponse({"detail": f"The request body is over {self.limit:,} bytes: send fewer or shorter "
                                           f"texts (at most {MAX_BATCH} per batch)."}, status_code=413)
        await response(scope, receive, send)


class _TooLarge(Exception):
    pass


class EscapedJSONResponse(JSONResponse):
    """JSON with every character past ASCII escaped. A refused request's input is echoed in the refusal, and an input
    may hold a lone surrogate (valid JSON, but no character), which UTF-8 cannot encode: FastAPI's own refusal then
    failed with a 500."""

    def render(self, content) -> bytes:
        return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def checked_rate(rate: str):
    """`rate` as `limits` reads it (`120/second`), at least one request in its window: "0/second" refused every
    request."""
    try:
        item = limits.parse(rate)
    except ValueError:
        raise ValueError(f"--rate-limit {rate!r} is not a rate: write it as 120/second or 1000/minute.") from None
    if item.amount < 1:
        raise ValueError(f"--rate-limit {rate!r} lets no request through: allow at least 1 in its window.")
    return item


class RateLimit:
    """Refuses a client address over `rate` requests (`120/second`, `limits`'s notation) with 429 and a Retry-After.
    A pure ASGI middleware over `limits`, the library slowapi wraps: slowapi's own middleware inspects the route's
    signature on every request, which cost 0.2 ms a request, a seventh of detecting a 200-token text. The counts are
    `limits`'s asyncio storage, which expires them in a task of the event loop: its threaded storage started a timer
    thread every few requests (a third of the service's own time per request)."""

    def __init__(self, app, rate: str):
        self.app, self.rate = app, checked_rate(rate)
        self.limiter = FixedWindowRateLimiter(MemoryStorage())

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            client = scope["client"][0] if scope.get("client") else "unknown"
            if not await self.limiter.hit(self.rate, client):
                reset = (await self.limiter.get_window_stats(self.rate, client)).reset_time
                response = JSONResponse({"detail": f"Too many requests (over {self.rate}): slow down, or send texts in "
                                                   "batches to /detect/batch."}, status_code=429,
                                        headers={"Retry-After": str(max(1, math.ceil(reset - time.time())))})
                return await response(scope, receive, send)
        await self.app(scope, receive, send)


def timed(function, *args):
    began = time.perf_counter()
    return function(*args), time.perf_counter() - began


def server_timing(seconds: float) -> dict[str, str]:
    """The `Server-Timing` header of an answer whose detections took `seconds`."""
    return {"Server-Timing": f"detect;dur={1000 * seconds:.3f}"}


class DetectionRunner:
    """Where a detection runs. Handing it to the detection thread and back costs about 0.2 ms on this 2-core machine
    (waking the thread, then the event loop), a fifth of detecting a 200-token text with vLLM-Gumbel. So a detection
    expected to take under INLINE_SECONDS, from the detector's median time per character (or token id) over its last
    8 detections, runs on the event loop itself, which it holds no longer than a request's parsing would; one expected
    to take longer, one of a detector not yet timed, a batch, and any detection that arrives while the thread is busy
    run in the thread. The last keeps answers in order and means the loop never waits on the detector's lock.
    The median, not the slowest: on a shared machine one detection in a few is paused for milliseconds, and with the
    slowest a single pause sent the next eight detections through the thread (a quarter of them, measured)."""

    def __init__(self):
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="fwsapp-detection")
        # The thread's latest work. One thread takes its work in order, so it is idle once that is done, even when
        # the request that sent it has gone (a client that hung up does not stop a detection under way).
        self.latest: Future | None = None
        self.rates: dict[str, deque[float]] = {}  # seconds per character (text) or per token id, the last 8 detections

    @property
    def idle(self) -> bool:
        return self.latest is None or self.latest.done()

    def expected_seconds(self, unit: str, size: int) -> float:
        rates = self.rates.get(unit)
        return statistics.median(rates) * max(size, RATE_FLOOR) if rates else math.inf

    async def detect(self, unit: str, size: int, function, *args) -> tuple[object, float]:
        """`function(*args)`, a detection of `size` characters or token ids (`unit`), on the loop or in the thread;
        its result and the seconds it took."""
        if self.idle and self.expected_seconds(unit, size) <= INLINE_SECONDS:
            result, seconds = timed(function, *args)
        else:
            result, seconds = await self.in_thread(timed, function, *args)
        self.rates.setdefault(unit, deque(maxlen=8)).append(seconds / max(size, RATE_FLOOR))
        return result, seconds

    async def in_thread(self, function, *args):
        self.latest = self.thread.submit(function, *args)
        return await asyncio.wrap_future(self.latest)


def create_app(detector: TextDetector, token: str | None = None, rate_limit: str = DEFAULT_RATE_LIMIT) -> FastAPI:
    """The service of one detector; `token`: the bearer token every detection must present (None: none asked)."""
    runner = DetectionRunner()

    @asynccontextmanager
    async def lifespan(app):
        yield
        runner.thread.shutdown(cancel_futures=True)

    app = FastAPI(title="fwsapp detection", version=fwsapp.__version__, lifespan=lifespan,
                  description=f"Watermark detection with {detector.info.name}, answering as vLLM's reference detection "
                              "server does, with a three-state verdict and an evidence record.")
    # Pure ASGI middleware: Starlette's BaseHTTPMiddleware costs a millisecond a request.
    app.add_middleware(RateLimit, rate=rate_limit)
    app.add_middleware(BodySizeLimit, limit=MAX_BODY_BYTES)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request, error: RequestValidationError) -> EscapedJSONResponse:
        """FastAPI's own 422, written escaped (EscapedJSONResponse)."""
        return EscapedJSONResponse({"detail": jsonable_encoder(error.errors())}, status_code=422)

    bearer = Depends(HTTPBearer(auto_error=False))

    # A coroutine, as /health is: a plain function would cost each request a second hop through the thread pool.
    async def authorised(credentials: HTTPAuthorizationCredentials | None = bearer) -> None:
        if credentials is None or not is_admin_token(credentials.credentials, token):
            raise HTTPException(401, "This service asks for its bearer token: send `Authorization: Bearer <token>`.",
                                headers={"WWW-Authenticate": "Bearer"})

    # With no token asked, a detection depends on nothing: FastAPI's dependency solving cost a tenth of a millisecond.
    guarded = [Depends(authorised)] if token is not None else []

    def answer(request: DetectionRequest) -> dict:
        try:
            verdict = detector.verdict_of_text(request.text) if request.text is not None \
                else detector.verdict_of_ids(request.token_ids)
        except ValueError as error:
            raise HTTPException(422, str(error)) from None
        return verdict.as_dict()

    # The answers are built by TextVerdict, so they are sent as they are: validating them again against the response
    # model (which still documents them in the OpenAPI schema) would cost more than detecting a short text.
    @app.post("/detect", response_model=DetectionResponse, dependencies=guarded)
    async def detect(request: DetectionRequest) -> JSONResponse:
        unit, size = ("characters", len(request.text)) if request.text is not None \
            else ("token_ids", len(request.token_ids))
        result, seconds = await runner.detect(unit, size, answer, request)
        return JSONResponse(result, headers=server_timing(seconds))

    @app.post("/detect/batch", response_model=BatchResponse, dependencies=guarded)
    async def detect_batch(request: BatchRequest) -> JSONResponse:
        results, seconds = await runner.in_thread(timed, lambda: [answer(item) for item in request.items])
        return JSONResponse({"results": results}, headers=server_timing(seconds))

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "method": detector.info.name, "tokenizer": detector.tokenizer.name,
                "fwsapp_version": fwsapp.__version__}

    return app
