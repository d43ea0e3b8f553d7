"""The detection service: an ASGI app (FastAPI) a client of vLLM's reference detection server uses unchanged.

- `POST /detect` takes `{"text": ...}` as vLLM's server does (or `{"token_ids": [...]}`) and answers its four fields,
  `score`, `p_value`, `num_scored_tokens`, `is_watermarked`, plus a three-state `verdict` and an `evidence` record
  (fwsapp.detection.verdicts);
- `POST /detect/batch` takes `{"items": [...]}`, up to MAX_BATCH requests, and answers `{"results": [...]}` in order;
- `GET /health`, and the OpenAPI schema at `/openapi.json` (FastAPI's, with its pages at `/docs`).

Detection is CPU-bound, so its endpoints are plain functions: FastAPI runs them in its thread pool and the event loop
keeps answering. With a bearer token set (the app's admin token, `FWSAPP_ADMIN_TOKEN`) every detection asks for it;
off loopback one is required. Requests are limited in size (MAX_BODY_BYTES, MAX_TEXT_CHARACTERS, MAX_TOKEN_IDS,
MAX_BATCH) and rate (slowapi, per client address); each refusal is a 4xx with a `detail` saying what to change.
"""
from __future__ import annotations

from typing import Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, model_validator
from slowapi import Limiter
from slowapi.errors import RateLimitExceeded
from slowapi.middleware import SlowAPIASGIMiddleware
from slowapi.util import get_remote_address

import fwsapp
from fwsapp.detection.verdicts import VERDICTS, TextDetector
from fwsapp.human.access import is_admin_token

MAX_TEXT_CHARACTERS = 200_000
MAX_TOKEN_IDS = 100_000
MAX_BATCH = 256
MAX_BODY_BYTES = 8 * 2**20
DEFAULT_RATE_LIMIT = "120/second"


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
    p_value: float | None = Field(description="the p-value; null for a score with no nominal distribution")
    num_scored_tokens: int
    is_watermarked: bool = Field(description="at the method's own threshold")
    verdict: Literal[VERDICTS] = Field(description="watermarked, not_watermarked, or too_short to tell")
    evidence: dict = Field(description="the evidence record (docs/evidence-record.schema.json)")


class BatchResponse(BaseModel):
    results: list[DetectionResponse]


class BodySizeLimit:
    """Refuses a request body over `limit` bytes with 413, before it is read whole. Written here because Starlette and
    FastAPI have no such limit of their own (uvicorn limits only the headers)."""

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


def create_app(detector: TextDetector, token: str | None = None, rate_limit: str = DEFAULT_RATE_LIMIT) -> FastAPI:
    """The service of one detector; `token`: the bearer token every detection must present (None: none asked)."""
    app = FastAPI(title="fwsapp detection", version=fwsapp.__version__,
                  description=f"Watermark detection with {detector.info.name}, answering as vLLM's reference detection "
                              "server does, with a three-state verdict and an evidence record.")
    limiter = Limiter(key_func=get_remote_address, default_limits=[rate_limit])
    app.state.limiter = limiter
    app.add_middleware(SlowAPIASGIMiddleware)  # pure ASGI: Starlette's BaseHTTPMiddleware costs a millisecond a request
    app.add_middleware(BodySizeLimit, limit=MAX_BODY_BYTES)
    bearer = Depends(HTTPBearer(auto_error=False))

    @app.exception_handler(RateLimitExceeded)
    def too_many(request: Request, error: RateLimitExceeded):
        return JSONResponse({"detail": f"Too many requests ({error.detail}): slow down, or send texts in batches to "
                                       "/detect/batch."}, status_code=429)

    # A coroutine, as /health is: a plain function would cost each request a second hop through the thread pool.
    async def authorised(credentials: HTTPAuthorizationCredentials | None = bearer) -> None:
        if token is None:
            return
        if credentials is None or not is_admin_token(credentials.credentials, token):
            raise HTTPException(401, "This service asks for its bearer token: send `Authorization: Bearer <token>`.",
                                headers={"WWW-Authenticate": "Bearer"})

    def answer(request: DetectionRequest) -> dict:
        try:
            verdict = detector.verdict_of_text(request.text) if request.text is not None \
                else detector.verdict_of_ids(request.token_ids)
        except ValueError as error:
            raise HTTPException(422, str(error)) from None
        return verdict.as_dict()

    # The answers are built by TextVerdict, so they are sent as they are: validating them again against the response
    # model (which still documents them in the OpenAPI schema) would cost more than detecting a short text.
    @app.post("/detect", response_model=DetectionResponse, dependencies=[Depends(authorised)])
    def detect(request: DetectionRequest) -> JSONResponse:
        return JSONResponse(answer(request))

    @app.post("/detect/batch", response_model=BatchResponse, dependencies=[Depends(authorised)])
    def detect_batch(request: BatchRequest) -> JSONResponse:
        return JSONResponse({"results": [answer(item) for item in request.items]})

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "method": detector.info.name, "tokenizer": detector.tokenizer.name,
                "fwsapp_version": fwsapp.__version__}

    return app
