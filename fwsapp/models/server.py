"""A model behind an OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio, OpenAI itself), reached with the
openai SDK: a client whose every reply is bounded in time and size, its faults sorted into those worth a retry and the
rest, and the retries with backoff. The judge and generation through a serving engine both talk to servers this way.
"""
from __future__ import annotations

import logging
import math
import random
import threading
import time
from contextlib import contextmanager
from typing import Callable, TypeVar

log = logging.getLogger(__name__)

# A reply is read whole within the request's timeout (the SDK's own timeout is per socket read, so a server trickling
# bytes, or sending without end, would hold a request for ever), and is at most this large: a verdict, a rewrite or an
# answer with its token ids is a few kilobytes.
MAX_REPLY_BYTES = 4 * 1024 * 1024
# A server's Retry-After is obeyed up to this many seconds (it may say 100000, inf or 1e300).
MAX_RETRY_AFTER = 60.0

Reply = TypeVar("Reply")


class ServerError(RuntimeError):
    """A fault that retrying will not fix (bad key, unknown model, refused request)."""


class TransientServerError(ServerError):
    """A fault worth retrying: 429, 5xx, a timeout, a dropped, truncated or unreadable response."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def bounded_http_client(deadline: float, max_bytes: int = MAX_REPLY_BYTES):
    """An httpx client whose every response must arrive whole within `deadline` seconds of the request and within
    `max_bytes`, for the openai SDK (`http_client`)."""
    import httpx

    class Bounded(httpx.SyncByteStream):
        def __init__(self, stream, started: float):
            self.stream, self.started = stream, started

        def __iter__(self):
            read = 0
            for chunk in self.stream:
                read += len(chunk)
                if time.monotonic() - self.started > deadline:
                    raise httpx.ReadTimeout(f"no complete reply within {deadline:g} s")
                if read > max_bytes:
                    raise httpx.ReadError(f"a reply of more than {max_bytes:,} bytes")
                yield chunk

        def close(self):
            self.stream.close()

    class BoundedTransport(httpx.HTTPTransport):
        def handle_request(self, request):
            started = time.monotonic()
            response = super().handle_request(request)
            response.stream = Bounded(response.stream, started)
            return response

    return httpx.Client(transport=BoundedTransport(), timeout=httpx.Timeout(deadline))


@contextmanager
def faults_sorted(final: type[ServerError] = ServerError, transient: type[TransientServerError] = TransientServerError):
    """Within the block, an SDK call's failure becomes `transient` (worth a retry) or `final`, in one line. A refused
    request (400) is raised as it is: what it means is the caller's to say."""
    import openai

    try:
        yield
    except openai.BadRequestError:
        raise
    except openai.RateLimitError as error:
        raise transient(f"429 rate limited: {short(error)}", _retry_after(error)) from None
    except openai.InternalServerError as error:
        raise transient(f"{error.status_code} server error: {short(error)}", _retry_after(error)) from None
    except openai.APITimeoutError:
        raise transient("timeout: no response in time") from None
    except openai.APIConnectionError as error:
        raise transient(f"connection failed or response cut off: {short(error)}") from None
    except openai.APIStatusError as error:
        raise final(f"{error.status_code} refused: {short(error)}") from None
    except ValueError as error:  # a body that is not valid JSON
        raise transient(f"unreadable response: {error}") from None


def with_retries(call: Callable[[], Reply], attempts: int, stop: threading.Event, backoff_base: float = 1.0,
                 backoff_cap: float = 60.0, final: type[ServerError] = ServerError, what: str = "request") -> Reply:
    """`call()`, tried again after a transient fault, up to `attempts` times in all, with jittered exponential backoff
    (or the server's Retry-After where longer); `final` with the last fault once they are spent or `stop` is set."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except TransientServerError as error:
            if attempt == attempts or stop.is_set():
                raise final(f"gave up after {attempt} attempts; last: {error}") from None
            delay = min(backoff_cap, backoff_base * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
            if error.retry_after is not None:
                delay = max(delay, error.retry_after)
            log.info("%s retry %d after %.2fs: %s", what, attempt, delay, error)
            if stop.wait(delay):
                raise final(f"stopped before retry {attempt + 1}; last: {error}") from None
    raise AssertionError("unreachable")


def _retry_after(error) -> float | None:
    """The server's Retry-After in seconds, at most MAX_RETRY_AFTER; None where it sent none or nonsense."""
    response = getattr(error, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or math.isnan(seconds) else min(max(seconds, 0.0), MAX_RETRY_AFTER)


def short(error) -> str:
    return str(error).splitlines()[0][:200]
