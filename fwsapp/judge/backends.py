"""Judge backends: OpenAI, any OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio), or a local
transformers chat model in-process.

A backend answers chat messages. Faults worth retrying raise TransientError (with the server's
Retry-After when it sent one); anything else raises JudgeError. The runner owns retries and backoff, so
the SDK's own retries are off. The API key is read from the environment or st.secrets and lives only in
the client object: it is never stored, logged or exported.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

from fwsapp.models.server import ServerError, TransientServerError, bounded_http_client, faults_sorted, short

from fwsapp.judge.registry import DEFAULT_OPENAI_MODEL, JUDGE_BACKENDS, LOCAL_DEMO_NOTE, REQUEST_TIMEOUT_SECONDS
# The embedded model judging on this 2-core machine reads each prompt, then decodes a verdict of a few tokens: a
# pair's time grows with its prompt. Fitted to two runs (docs/benchmarks.md, "The embedded judge"): 8 pairs of a
# paper QA log, 690 prompt tokens a pair, 3.35 s a pair; 48 pairs of 32-token answers, 401 tokens, 2.32 s. A flat 7 s
# a pair overestimated them 2 and 3 times.
LOCAL_SECONDS_PER_PAIR = 0.9
LOCAL_SECONDS_PER_PROMPT_TOKEN = 0.0036


def local_duration(pairs: int, prompt_tokens: int) -> str:
    """How long the embedded model takes here to judge `pairs` whose prompts hold `prompt_tokens` in all (the
    runner's `estimate`), as people read it ('40 s', '3 min 20 s')."""
    from fwsapp import duration

    return duration(pairs * LOCAL_SECONDS_PER_PAIR + prompt_tokens * LOCAL_SECONDS_PER_PROMPT_TOKEN)

# US$ per million tokens (input, output); used for estimates and the budget cap.
PRICES = {
    "gpt-4o-2024-08-06": (2.50, 10.00),
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
}


class JudgeError(ServerError):
    """A fault that retrying will not fix (bad key, unknown model, refused request)."""


class TransientError(JudgeError, TransientServerError):
    """A fault worth retrying: 429, 5xx, a timeout, a dropped or truncated response."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    structured: bool = False  # the server was asked for a JSON-schema reply and accepted the request


def api_key_from_environment() -> str | None:
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    try:
        import streamlit as st

        return st.secrets.get("OPENAI_API_KEY")
    except Exception:  # no secrets file, or not running under streamlit
        return None


class OpenAIBackend:
    """OpenAI or any OpenAI-compatible server through `base_url`, with the openai SDK (1.x or later).

    A compatible server is asked for the verdict as structured output (`response_format` with the verdict's JSON
    schema: vLLM's guided decoding, llama.cpp's json_schema), since a small model behind it rarely writes the format
    unaided. A server that refuses the option (400) is asked in plain text from then on. OpenAI itself is asked in
    plain text, as the paper did."""

    @classmethod
    def from_settings(cls, judge_model: str | None, base_url: str | None, timeout: float, api_key: str | None,
                      loaded=None) -> OpenAIBackend:
        return cls(judge_model or DEFAULT_OPENAI_MODEL, timeout=timeout, api_key=api_key)

    def __init__(self, model: str = DEFAULT_OPENAI_MODEL, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = REQUEST_TIMEOUT_SECONDS, max_tokens: int = 1024):
        from openai import OpenAI

        self.model = model
        self.base_url = base_url
        self.name = "openai" if base_url is None else "compatible"
        self.structured = base_url is not None  # False once the server refuses response_format
        # OPENAI_API_KEY goes to OpenAI's own endpoint only; a compatible server gets the key it is given.
        key = api_key or (api_key_from_environment() if base_url is None else None)
        if key is None and base_url is None:
            raise JudgeError("No OpenAI API key: set OPENAI_API_KEY, add it to .streamlit/secrets.toml, or enter it "
                             "on the Judge page.")
        # Local servers usually take any key; the SDK insists on one.
        self._client = OpenAI(api_key=key or "not-needed", base_url=base_url, timeout=timeout, max_retries=0,
                              http_client=bounded_http_client(timeout))
        self.max_tokens = max_tokens

    @property
    def concurrency_limit(self) -> int | None:
        return None

    def complete(self, messages: list[dict], schema: dict | None = None) -> Completion:
        """The reply to `messages`; where `schema` is given and the server takes it, constrained to that JSON schema."""
        import openai

        structured = schema is not None and self.structured
        options = {"response_format": {"type": "json_schema", "json_schema": {
            "name": "verdict", "schema": schema, "strict": True}}} if structured else {}
        try:
            return self._create(messages, 0.0, self.max_tokens, structured, **options)
        except openai.BadRequestError as error:
            if not structured:
                raise JudgeError(f"{error.status_code} refused: {short(error)}") from None
            self.structured = False  # this server takes no response_format: plain text, parsed, from now on
            return self.complete(messages)

    def rewrite(self, messages: list[dict], temperature: float, max_tokens: int, seed: int) -> Completion:
        """Free text in reply to `messages` (a paraphrase or a translation), sampled at `temperature`."""
        import openai

        try:
            return self._create(messages, temperature, max_tokens, False, seed=seed)
        except openai.BadRequestError as error:
            raise JudgeError(f"{error.status_code} refused: {short(error)}") from None

    def _create(self, messages: list[dict], temperature: float, max_tokens: int, structured: bool,
                **options) -> Completion:
        """One chat completion, its failures sorted into transient (worth a retry) and final ones."""
        with faults_sorted(JudgeError, TransientError):
            response = self._client.chat.completions.create(
                model=self.model, messages=messages, temperature=temperature, max_tokens=max_tokens, **options
            )
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, KeyError, TypeError):
            raise TransientError("a reply without a message") from None
        if content is not None and not isinstance(content, str):
            raise TransientError(f"a reply whose content is not text ({type(content).__name__})")
        usage = getattr(response, "usage", None)
        return Completion(
            text=content or "",
            prompt_tokens=_count(getattr(usage, "prompt_tokens", None)),
            completion_tokens=_count(getattr(usage, "completion_tokens", None)),
            structured=structured,
        )

    def close(self) -> None:
        """Abort every request in flight (their reads fail at once) and free the connections: a signal ends a
        command now, not when the slowest server answers."""
        self._client.close()

    def check(self) -> str:
        """A tiny request, for the page's connection test."""
        reply = self.complete([{"role": "user", "content": "Reply with the single word: ready"}])
        return f"{self.name} backend answered with model {self.model}: {reply.text[:60]!r}"


@contextmanager
def requests_abandoned_on_interrupt(backend):
    """Within the block, an interrupt (Ctrl-C, SIGTERM) closes the backend's connections first, so the requests in
    flight on worker threads fail at once and the pool's join does not wait for the servers."""
    try:
        yield
    except KeyboardInterrupt:
        close = getattr(backend, "close", None)
        if close is not None:
            close()
        raise


def _count(value) -> int | None:
    """A token count from a reply's usage; None where it is not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class CompatibleBackend(OpenAIBackend):
    """An OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio): a base URL and the model it serves."""

    @classmethod
    def from_settings(cls, judge_model: str | None, base_url: str | None, timeout: float, api_key: str | None,
                      loaded=None) -> CompatibleBackend:
        from fwsapp.network import checked_server_url

        if not base_url:
            raise JudgeError("The compatible backend needs a base URL (--base-url, or the Base URL field), e.g. "
                             "http://localhost:8000/v1 for vLLM.")
        try:
            checked_server_url(base_url, "The judge's base URL")
        except ValueError as error:
            raise JudgeError(str(error)) from None
        if not judge_model:
            raise JudgeError("The compatible backend needs a judge model (--judge-model, or the Judge model field): the "
                             "model name the server serves.")
        return cls(judge_model, base_url=base_url, timeout=timeout, api_key=api_key)


class LocalBackend:
    """A transformers model in-process; the embedded SmolLM2 by default (a smoke test). Its reply is decoded
    straight into the verdict format, so every verdict parses."""

    @classmethod
    def from_settings(cls, judge_model: str | None, base_url: str | None, timeout: float, api_key: str | None,
                      loaded=None) -> LocalBackend:
        return cls(judge_model, loaded=loaded)

    def __init__(self, model_name: str | None = None, loaded=None):
        from fwsapp.judge.verdict_format import verdict_template
        from fwsapp.models import EMBEDDED_MODEL, load_model

        self.model = model_name or EMBEDDED_MODEL
        self.name = "local"
        self._lm = loaded or load_model(self.model)
        # The reply is the verdict alone, decoded into its format (verdict_format.py): about 30 tokens.
        self._template, self._digits = verdict_template(self._lm.tokenizer)
        self._lock = threading.Lock()  # one forward pass at a time on one device

    @property
    def concurrency_limit(self) -> int | None:
        return 1

    def complete(self, messages: list[dict], schema: dict | None = None) -> Completion:
        """The verdict, decoded into its text format whatever `schema` says (this backend constrains it itself)."""
        from transformers import LogitsProcessorList

        from fwsapp.judge.verdict_format import VerdictFormat

        def verdict_format(prompt_length: int) -> dict:
            return {"max_new_tokens": len(self._template), "do_sample": False, "logits_processor": LogitsProcessorList(
                [VerdictFormat(self._template, self._digits, prompt_length)])}

        return self._generate([messages], verdict_format)[0]

    def rewrite(self, messages: list[dict], temperature: float, max_tokens: int, seed: int) -> Completion:
        """Free text in reply to `messages`, sampled at `temperature` from `seed` (greedy at 0)."""
        return self.rewrite_many([messages], temperature, max_tokens, [seed])[0]

    def rewrite_many(self, conversations: list[list[dict]], temperature: float, max_tokens: int,
                     seeds: list[int]) -> list[Completion]:
        """A reply to each conversation, generated together in one left-padded batch. Each row samples from its own
        seed (`RowSeededSampling`), so a reply is the same whatever batch it came in."""
        from transformers import LogitsProcessorList

        from fwsapp.judge.row_sampling import RowSeededSampling

        def sampled(prompt_length: int) -> dict:
            rows = [] if temperature <= 0 else [RowSeededSampling(seeds, temperature, prompt_length)]
            return {"max_new_tokens": max_tokens, "do_sample": False, "logits_processor": LogitsProcessorList(rows)}

        return self._generate(conversations, sampled)

    def _generate(self, conversations: list[list[dict]], options) -> list[Completion]:
        """The model's reply to each conversation under the generation options `options(prompt length)` gives."""
        import torch

        tokenizer = self._lm.tokenizer
        if tokenizer.chat_template:
            prompts = [tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
                       for messages in conversations]
        else:  # a base model (Meditron-7B, BioMistral-7B) has no chat template: the conversation as plain text
            prompts = [plain_prompt(messages) for messages in conversations]
        # Padded on the left, so replies start at one column for every row; asked per call, as the tokenizer is shared
        # with other threads (the app's jobs) that setting its attribute would race with.
        encoded = tokenizer(prompts, return_tensors="pt", padding=True, padding_side="left",
                            add_special_tokens=not tokenizer.chat_template).to(self._lm.device)
        prompt_length = encoded["input_ids"].shape[1]
        with self._lock, torch.inference_mode():
            output = self._lm.model.generate(**encoded, pad_token_id=tokenizer.pad_token_id, **options(prompt_length))
        lengths = encoded["attention_mask"].sum(dim=1)
        return [Completion(
            text=tokenizer.decode(row[prompt_length:], skip_special_tokens=True),
            prompt_tokens=int(length),
            completion_tokens=int((row[prompt_length:] != tokenizer.pad_token_id).sum()),
        ) for row, length in zip(output, lengths)]

    def check(self) -> str:
        return f"local model {self._lm.description} loaded ({LOCAL_DEMO_NOTE})"


def plain_prompt(messages: list[dict]) -> str:
    """A chat as a base model reads it: each turn after its role, the answer to follow "Assistant:"."""
    return "".join(f"{message['role'].capitalize()}: {message['content']}\n\n" for message in messages) + "Assistant:"


def make_backend(kind: str, judge_model: str | None = None, base_url: str | None = None, timeout: float = REQUEST_TIMEOUT_SECONDS,
                 loaded=None, api_key: str | None = None):
    """The registered backend `kind` (`JUDGE_BACKENDS`). `api_key` is sent as given; without it OpenAI gets
    OPENAI_API_KEY and a compatible server no key."""
    try:
        entry = JUDGE_BACKENDS.check(kind)
    except ValueError as error:
        raise JudgeError(str(error)) from None
    return entry.load().from_settings(judge_model, base_url, timeout, api_key, loaded=loaded)


def price(model: str) -> tuple[float, float] | None:
    return PRICES.get(model)
