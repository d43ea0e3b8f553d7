"""The judge-backend registry: every backend fwsapp can ask for a verdict, declared once; importable without torch or
the openai SDK.

An entry says what the backend needs (`needs`): "model" (a language model loaded in this process: no network, no
bill, one pair at a time), "base_url" and "model_name" (a server, and the model it serves), "key" (an API key, read
from `key_env` when none is given) or "optional_key". `judge --backend`, the grid's [steps] judge, the Judge page's
choices and fields, and `doctor` read it. A backend's class builds itself from the settings with `from_settings`.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from fwsapp.models import EMBEDDED_MODEL, EMBEDDED_PACKAGE
from fwsapp.plugins import PlugIn, Registry, missing_package

DEFAULT_OPENAI_MODEL = "gpt-4o-2024-08-06"
# A judge's defaults, declared once for the CLI, the grid, the Judge page and the backends.
REQUEST_TIMEOUT_SECONDS = 60.0  # per request, queueing at the server included
CONCURRENT_REQUESTS = 8
LOCAL_DEMO_NOTE = "its verdicts are forced into the format; the embedded 135M model's are a smoke test, not a judgment"


@dataclass(frozen=True)
class JudgeBackendPlugIn(PlugIn):
    menu_label: str = ""
    default_model: str = ""  # "" where the user must name one
    key_env: str | None = None  # where a required key is read from when none is given
    # The tokens a verdict takes, for the estimate before a run: an explanation, then the scores, from a judge that
    # writes as it likes; the verdict alone from one decoded into its format.
    completion_tokens: int = 350

    @property
    def in_process(self) -> bool:
        return "model" in self.needs

    def unused_setting(self, base_url: str | None, api_key: str | None) -> str | None:
        """Why a base URL or an API key given to this backend would go unused, or None: OpenAI's backend asks OpenAI's
        own endpoint whatever URL it is given, so a URL meant for a server of one's own must not pass unseen."""
        if base_url and "base_url" not in self.needs:
            return (f"The {self.name} judge backend takes no base URL ({self.help}): for a server of your own, use the "
                    "compatible backend; else drop the URL.")
        if api_key and not {"key", "optional_key"} & set(self.needs):
            return f"The {self.name} judge backend sends no API key ({self.help}): drop it."
        return None

    def key_status(self) -> tuple[str, str] | None:
        """(status, detail) of the key it needs, for doctor; None when it needs none."""
        if "key" not in self.needs:
            return None
        if os.environ.get(self.key_env or ""):
            return "ok", f"{self.key_env} is set"
        return "warning", f"{self.key_env} is not set (or type a key on the Judge page)"


JUDGE_BACKENDS = Registry("judge backend", [
    JudgeBackendPlugIn(
        "local", f"a local transformers model; the embedded {EMBEDDED_MODEL} is a smoke test, not a judge",
        "fwsapp.judge.backends:LocalBackend", needs=("model",), unavailable=missing_package(EMBEDDED_PACKAGE),
        menu_label=f"Local model ({LOCAL_DEMO_NOTE})", default_model=EMBEDDED_MODEL,
        completion_tokens=25),  # the verdict's format in the embedded model's tokens (judge/verdict_format.py)
    JudgeBackendPlugIn(
        "openai", "OpenAI's API (the paper's gpt-4o-2024-08-06)", "fwsapp.judge.backends:OpenAIBackend",
        needs=("key",), menu_label="OpenAI", default_model=DEFAULT_OPENAI_MODEL, key_env="OPENAI_API_KEY"),
    JudgeBackendPlugIn(
        "compatible", "any OpenAI-compatible server: --base-url http://HOST:PORT/v1 (vLLM, Ollama, llama.cpp)",
        "fwsapp.judge.backends:CompatibleBackend", needs=("base_url", "model_name", "optional_key"),
        menu_label="OpenAI-compatible server (vLLM, Ollama, llama.cpp, LM Studio)"),
])
# The backend that judges in this process with its default model (the embedded one): the FWS page's judge in place.
IN_PROCESS_BACKEND = next(entry for entry in JUDGE_BACKENDS if entry.in_process)
