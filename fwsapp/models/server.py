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

from fwsapp import counted

log = logging.getLogger(__name__)

# A reply is read whole within the request's timeout (the SDK's own timeout is per socket read, so a server trickling
# bytes, or sending without end, would hold a request for ever), and is at most this large: a verdict, a rewrite or an
# answer with its token ids is a few kilobytes.
MAX_REPLY_BYTES = 4 * 1024 * 1024
# A server's Retry-After is obeyed up to this many seconds (it may say 100000, inf or 1e300).
MAX_RETRY_AFTER = 60.0
# How a reply over MAX_REPLY_BYTES is said: a final fault, since the same server would send it again.
TOO_LARGE = "a reply of more than"
# A serving engine's answer: tries, and how long each may take to arrive whole (a 7B model's 1,024 tokens under load).
ATTEMPTS = 4
REQUEST_TIMEOUT_SECONDS = 300.0
CONCURRENT_REQUESTS = 8  # a serving engine's answers in flight at once

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
    `max_bytes`, for the openai SDK (`http_client`); its `abort()` ends every request in flight at once."""
    import socket
    import weakref

    import httpcore
    import httpx

    class AbortableBackend(httpcore.NetworkBackend):
        """httpcore's own backend, keeping the connections it opens so that `abort` can shut them down. Why by hand:
        closing an httpx client does not wake a thread blocked reading a silent server's reply (a socket closed in
        another thread is not shut down on Linux), so a stopped job would wait out the server; a shut-down socket
        wakes it at once, and tells the server (vLLM aborts a request whose client goes) to stop generating."""

        def __init__(self):
            self.backend = httpcore.SyncBackend()
            self.streams = weakref.WeakSet()
            self.aborted = False
            self.lock = threading.Lock()

        def connect_tcp(self, *args, **kwargs):
            return self.kept(self.backend.connect_tcp(*args, **kwargs))

        def connect_unix_socket(self, *args, **kwargs):
            return self.kept(self.backend.connect_unix_socket(*args, **kwargs))

        def kept(self, stream):
            """A new connection, refused once aborted (a request that was connecting as the job stopped)."""
            with self.lock:
                if self.aborted:
                    stream.close()
                    raise httpcore.ConnectError("the requests were aborted")
                self.streams.add(stream)
            return stream

        def sleep(self, seconds: float) -> None:
            self.backend.sleep(seconds)

        def abort(self) -> None:
            with self.lock:
                self.aborted = True
                streams = list(self.streams)
            for stream in streams:
                try:
                    stream.get_extra_info("socket").shutdown(socket.SHUT_RDWR)
                except OSError:  # already closed
                    pass

    class AbortableClient(httpx.Client):
        def __init__(self, backend: AbortableBackend, **kwargs):
            super().__init__(**kwargs)
            self.backend = backend

        def abort(self) -> None:
            """End every request in flight now (each fails at once in its thread) and close the client."""
            self.backend.abort()
            self.close()

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
                    raise httpx.ReadError(f"{TOO_LARGE} {max_bytes:,} bytes")
                yield chunk

        def close(self):
            self.stream.close()

    class BoundedTransport(httpx.HTTPTransport):
        def __init__(self, backend: AbortableBackend):
            super().__init__()
            # httpx takes no network backend of its own choosing: its connection pool's is replaced.
            self._pool._network_backend = backend

        def handle_request(self, request):
            started = time.monotonic()
            response = super().handle_request(request)
            response.stream = Bounded(response.stream, started)
            return response

    backend = AbortableBackend()
    return AbortableClient(backend, transport=BoundedTransport(backend), timeout=httpx.Timeout(deadline))


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
        if str(error.__cause__ or "").startswith(TOO_LARGE):
            raise final(f"{error.__cause__}, more than any answer holds: is the URL the server's API base (…/v1)?") \
                from None
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
                raise final(f"gave up after {counted(attempt, 'attempt', 'attempts')}; last: {error}") from None
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
    """An error's first line, at most 200 characters, without a full stop: it is quoted within a sentence ("Connection
    error.. Is it …")."""
    return str(error).splitlines()[0][:200].rstrip(".")
