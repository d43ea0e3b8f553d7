"""Generation through the user's own OpenAI-compatible serving engine (vLLM), as a hospital deploys a model.

Each prompt goes to the server twice, through its completions API: once as the engine serves it (watermarked by the
engine's own `--watermark-config`), and once with vLLM's per-request opt-out `"watermarking": false`; both with
`return_token_ids`, the run's decoding settings and a seed of the sample's own. The answers are stored with the token
ids the server returned, and detected here with the key given to fwsapp. `ServingEngine` is an executor beneath
`generate_runs`, like `InProcess` and the Ray one: units, resumption and writing stay theirs. Requests run a bounded
number at a time; a transient fault is retried with backoff; a final one stops the job with one line, every finished
unit kept.
"""
from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass

from fwsapp.generation.generate import UnitResult, UnitWork, batch_seed, detected_unit
from fwsapp.generation.run_config import Cancelled
from fwsapp.generation.batch import GeneratedBatch
from fwsapp.models.server import (ATTEMPTS, CONCURRENT_REQUESTS, REQUEST_TIMEOUT_SECONDS, ServerError,
                                  TransientServerError, bounded_http_client, faults_sorted, short, with_retries)

# The opt-out is taken as ignored when more than this share of the answers asked for without the watermark carry it
# (at the method's threshold, a share near its false-positive rate is expected).
IGNORED_OPT_OUT_SHARE = 0.5
MIN_ANSWERS_FOR_OPT_OUT_CHECK = 4


class ServingError(ServerError):
    """The serving engine cannot give a run's answers: one line saying what to do."""


@dataclass
class ServedAnswer:
    text: str
    token_ids: list[int]
    prompt_ids: list[int] | None  # None where the server returned none
    seconds: float


class ServingEngine:
    """Runs units on an OpenAI-compatible server at `url` (its base URL, e.g. http://localhost:8000/v1). The API key,
    if the server wants one, is read from the environment variable `api_key_env` and lives only in the client. Token
    ids the server leaves out are re-tokenised with `tokenizer` (a name, default the run's model's), which also gives
    the detector its vocabulary. `notes` collects what a user must know of the answers (re-tokenised text, an ignored
    opt-out), one line each."""

    def __init__(self, url: str, api_key_env: str | None = None, tokenizer: str | None = None,
                 concurrency: int = CONCURRENT_REQUESTS, attempts: int = ATTEMPTS,
                 timeout: float = REQUEST_TIMEOUT_SECONDS, backoff_base: float = 1.0):
        from openai import OpenAI

        from fwsapp.network import checked_server_url

        if concurrency < 1 or attempts < 1 or timeout <= 0:
            raise ValueError("concurrency and attempts must be at least 1, and the timeout positive.")
        key = None
        if api_key_env:
            key = os.environ.get(api_key_env)
            if not key:
                raise ValueError(f"--api-key-env {api_key_env}: that environment variable is not set.")
        self.url = checked_server_url(url)
        self.tokenizer_name = tokenizer
        self.concurrency, self.attempts, self.backoff_base = concurrency, attempts, backoff_base
        # Servers on one's own machine usually take any key; the SDK insists on one.
        self._http = bounded_http_client(timeout)
        self._client = OpenAI(api_key=key or "not-needed", base_url=url, timeout=timeout, max_retries=0,
                              http_client=self._http)
        self._tokenizers: dict[str, object] = {}
        self._checked_models: set[str] = set()
        self._watermarks: dict[str, object] = {}
        self._stop = threading.Event()
        self.notes: list[str] = []
        self._retokenised: set[str] = set()
        self._opted_out: dict[str, list[bool]] = {}  # run id -> whether each opted-out answer carries the watermark
        self._unscorable: dict[str, list[int]] = {}  # run id -> [answers too short to score, answers]
        self._disagreeing: dict[str, int] = {}  # run id -> answers whose text is not what their ids decode to
        self._lock = threading.Lock()

    def served_models(self) -> list[str]:
        """The model names the server serves (its /models)."""
        try:
            with faults_sorted(ServingError, TransientServerError):
                listed = self._client.models.list()
            return [model.id for model in listed.data]
        except ServerError as error:
            raise ServingError(f"The server at {self.url} did not list its models: {error}. Is it an OpenAI-compatible "
                               "server (vllm serve), and is the URL its base (…/v1)?") from None
        except Exception as error:  # a reply of another shape
            raise ServingError(f"The server at {self.url} answered /models with something else than a model list "
                               f"({short(error)}).") from None

    def served_model(self, asked: str | None) -> str:
        """`asked` where the server serves it, or the server's only model when none is asked; one line otherwise. A
        model found served is not asked about again."""
        served = self.served_models()
        if asked is None and len(served) == 1:
            self._checked_models.add(served[0])
            return served[0]
        if asked is None:
            raise ServingError(f"The server at {self.url} serves {listed(served)}: name the one to ask.")
        if asked not in served:
            raise ServingError(f"The server at {self.url} does not serve {asked!r}; it serves {listed(served)}.")
        self._checked_models.add(asked)
        return asked

    def tokenizer(self, model: str, stored: str | None = None):
        """The tokenizer that re-tokenises answers and sizes the detector's vocabulary: the named one, else the one the
        run keeps (`stored`), else the model's."""
        from fwsapp.models.tokenizers import load_tokenizer, run_tokenizer, tokenizer_problem

        name = self.tokenizer_name or run_tokenizer(model, stored)
        if name not in self._tokenizers:
            problem = tokenizer_problem(name)
            if problem:
                raise ServingError(f"The served model's tokenizer: {problem}; name the served model's tokenizer.")
            self._tokenizers[name] = load_tokenizer(name)
        return self._tokenizers[name]

    def run(self, works: list[UnitWork], prepare, record, progress, cancel: threading.Event | None = None) -> dict[str, str]:
        """Ask, detect and record each unit in order; an error stops the job (finished units are stored)."""
        from fwsapp.watermark.factory import create

        try:
            for work in works:
                if cancel is not None and cancel.is_set():
                    raise Cancelled(work.unit.run_id)
                work = prepare(work)
                config = work.config
                if config.model not in self._checked_models:
                    self.served_model(config.model)
                tokenizer = self.tokenizer(config.model, config.tokenizer)
                if work.unit.run_id not in self._watermarks:
                    self._watermarks[work.unit.run_id] = create(config.method, tokenizer.vocab_size, config.params,
                                                                tokenizer=tokenizer)
                watermark = self._watermarks[work.unit.run_id]
                batches = -(-config.n // config.batch_size)
                plain, marked, prompt_ids = self._answers(work, tokenizer, lambda answered, asked, work=work, batches=batches:
                                                          progress(f"batch {work.unit.batch_index + 1} of {batches}: "
                                                                   f"{answered} of {asked} answers in"))
                result = detected_unit(work, watermark, plain, marked, prompt_ids, tokenizer.encode)
                self._check_opt_out(result, watermark)
                counted = self._unscorable.setdefault(work.unit.run_id, [0, 0])
                counted[0] += len(result.unscorable)
                counted[1] += len(result.found)
                record(result)
        finally:
            self._say_what_was_noticed()
        return {}

    def close(self) -> None:
        """Stop retrying and abort the requests in flight, so that the server stops generating them and no thread
        waits on it (a signal ends the command now)."""
        self._stop.set()
        self._http.abort()

    def _answers(self, work: UnitWork, tokenizer, on_answer) -> tuple[GeneratedBatch, GeneratedBatch, list[list[int]]]:
        """The unit's answers without and with the watermark (the first from the store where another run holds them),
        and each prompt's token ids."""
        config, samples = work.config, work.samples
        asks = [(index, sample, watermarked) for index, sample in zip(work.unit.indices, samples)
                for watermarked in ((False, True) if work.plain is None else (True,))]
        answered = [0]
        lock = threading.Lock()

        def ask(index: int, sample, watermarked: bool) -> ServedAnswer:
            answer = self._ask(config, sample.prompt, batch_seed(config.seed, index, "w" if watermarked else "u"),
                               watermarked, tokenizer, work.unit.run_id)
            with lock:
                answered[0] += 1
                on_answer(answered[0], len(asks))
            return answer

        with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="served") as pool:
            futures = []
            try:  # a signal may come while the requests are still being handed out: they are aborted all the same
                for asked in asks:
                    futures.append(pool.submit(ask, *asked))
                # Woken by the first failure, whichever request it is, not by the first request in order: a request
                # left hanging must not keep the job from stopping.
                finished, _ = wait(futures, return_when=FIRST_EXCEPTION)
                for future in finished:
                    if future.exception() is not None:
                        raise future.exception()
                answers = [future.result() for future in futures]
            except BaseException:  # a final fault or an interrupt: the job stops, so nothing else is asked
                for future in futures:
                    future.cancel()
                self.close()  # the requests in flight fail at once, and the pool's join does not wait for the server
                raise
        by_kind = {watermarked: [answer for (_, _, kind), answer in zip(asks, answers) if kind == watermarked]
                   for watermarked in (False, True)}
        plain = work.plain or _batch(by_kind[False])
        marked = _batch(by_kind[True])
        prompt_ids = [answer.prompt_ids if answer.prompt_ids is not None else tokenizer.encode(sample.prompt)
                      for answer, sample in zip(by_kind[True], samples)]
        return plain, marked, prompt_ids

    def _ask(self, config, prompt: str, seed: int, watermarked: bool, tokenizer, run_id: str) -> ServedAnswer:
        """One completion, retried on transient faults; the token ids checked, re-tokenised where the server sent none."""
        sampling = config.resolved_sampling()
        options = request_options(sampling, config.max_new_tokens, seed, watermarked)
        started = time.perf_counter()

        def complete():
            with faults_sorted(ServingError, TransientServerError):
                return self._client.completions.create(model=config.model, prompt=prompt, **options)

        import openai

        try:
            response = with_retries(complete, self.attempts, self._stop, self.backoff_base, final=ServingError,
                                    what="served completion")
        except openai.BadRequestError as error:
            raise ServingError(f"The server at {self.url} refused a request for {config.model}: {short(error)}") from None
        except ServingError as error:
            raise ServingError(f"The server at {self.url}: {error}. Finished batches are stored; run the same command "
                               "again to resume.") from None
        seconds = time.perf_counter() - started
        text, token_ids, prompt_ids = answer_of(response, tokenizer.vocab_size)
        if token_ids is None:
            token_ids = tokenizer.encode(text)
            self._retokenised.add(tokenizer.name)
        elif not same_text(tokenizer.decode(token_ids), text):
            with self._lock:
                self._disagreeing[run_id] = self._disagreeing.get(run_id, 0) + 1
        return ServedAnswer(text, token_ids, prompt_ids, seconds)

    def _check_opt_out(self, result: UnitResult, watermark) -> None:
        """Whether the answers asked for without the watermark carry it (a server that ignores the opt-out)."""
        carried = self._opted_out.setdefault(result.unit.run_id, [])
        carried += [bool(watermark.is_watermarked(detection)) for _, kind, detection in result.found
                    if kind == "unwatermarked" and detection.num_tokens_scored > 0]

    def _say_what_was_noticed(self) -> None:
        for name in sorted(self._retokenised):
            self.notes.append(f"The server at {self.url} returned no token ids (vLLM returns them with return_token_ids "
                              f"from 0.10.2 on): its answers were re-tokenised with {name}, which may split them "
                              "otherwise than the engine did.")
        self._retokenised.clear()
        for run_id, carried in self._opted_out.items():
            if len(carried) >= MIN_ANSWERS_FOR_OPT_OUT_CHECK and sum(carried) > IGNORED_OPT_OUT_SHARE * len(carried):
                self.notes.append(f"Run {run_id}: {sum(carried)} of {len(carried)} answers asked for with "
                                  "\"watermarking\": false carry the watermark: the server at "
                                  f"{self.url} seems to ignore the opt-out, so its unwatermarked answers are not.")
        self._opted_out.clear()
        for run_id, (short_answers, answers) in self._unscorable.items():
            if short_answers:
                self.notes.append(f"Run {run_id}: {short_answers} of {answers} answers came back empty or of one token: "
                                  "they are stored, counted as not scorable, and left out of its detection rates.")
        self._unscorable.clear()
        for run_id, count in self._disagreeing.items():
            self.notes.append(f"Run {run_id}: {count} answers' text is not what their token ids decode to (a proxy "
                              "that rewrote the text, or ids shifted?): detection reads the ids, the pages show the "
                              "text; check the server and the tokenizer.")
        self._disagreeing.clear()


def request_options(sampling: dict, max_new_tokens: int, seed: int, watermarked: bool) -> dict:
    """A completions request's options for the run's decoding settings: vLLM's names, its own fields in the body."""
    greedy = not sampling["do_sample"]
    extra = {"return_token_ids": True, "min_tokens": sampling["min_new_tokens"]}
    if sampling["top_k"]:
        extra["top_k"] = sampling["top_k"]
    if not watermarked:
        extra["watermarking"] = False
    return {"max_tokens": max_new_tokens, "temperature": 0.0 if greedy else sampling["temperature"],
            "top_p": sampling["top_p"], "seed": seed, "extra_body": extra}


def answer_of(response, vocab_size: int) -> tuple[str, list[int] | None, list[int] | None]:
    """(text, token ids or None, prompt token ids or None) of a completion; a reply of another shape is a final error
    (the same server would send it again)."""
    if isinstance(response, str):  # the SDK hands back a body it could not read as JSON as text
        start = " ".join(response[:60].split())
        raise ServingError(f"a reply that is not JSON but text beginning {start!r} (a web page?): is the URL the "
                           "server's OpenAI-compatible API base (…/v1)?")
    try:
        choice = response.choices[0]
        text = choice.text
    except (AttributeError, IndexError, KeyError, TypeError):
        raise ServingError("a reply without a completion (no choices[0].text)") from None
    if not isinstance(text, str):
        raise ServingError(f"a reply whose text is not text ({type(text).__name__})")
    ids = [_token_ids(getattr(choice, name, None), name, vocab_size) for name in ("token_ids", "prompt_token_ids")]
    return text, ids[0], ids[1]


def same_text(decoded: str, text: str) -> bool:
    """Whether the text the ids decode to is the text the server sent, spacing aside (an engine detokenises
    incrementally, so a leading space or a run of spaces may differ)."""
    return decoded.split() == text.split()


def listed(names: list[str], shown: int = 10) -> str:
    """Names for a message, the first `shown` of them and how many more (a server may list thousands)."""
    if not names:
        return "no model"
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more:,} more" if more > 0 else "")


def _token_ids(value, name: str, vocab_size: int) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(token, int) and not isinstance(token, bool)
                                              and 0 <= token < vocab_size for token in value):
        raise ServingError(f"a reply whose {name} are not token ids of a {vocab_size:,}-token vocabulary: is the "
                           "tokenizer the served model's?")
    return value


def _batch(answers: list[ServedAnswer]) -> GeneratedBatch:
    # No entropies: a server gives the sampled token's probability at most, not the distribution's entropy.
    return GeneratedBatch([answer.text for answer in answers], [answer.token_ids for answer in answers],
                          [[] for _ in answers], sum(answer.seconds for answer in answers),
                          text_seconds=[answer.seconds for answer in answers])  # each answer its own time

