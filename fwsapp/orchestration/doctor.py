"""What this setup can run, checked without loading a model: `python -m fwsapp doctor` and the app's sidebar.

Device and dtype, free memory, which models and tokenizers are available offline and whether each preset would
fit (parameters × bytes per parameter, plus a margin for activations and the KV cache, against free memory), the
recognizer, encoder and judge backends, and the database.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from fwsapp import counted
from fwsapp.models import (
    EMBEDDED_GGUF,
    EMBEDDED_MODEL,
    EMBEDDED_PACKAGE,
    ENCODER_PACKAGE,
    PRESETS,
    ModelLoadError,
    embedded_is_converted,
    memory_needed,
    package_folder,
)
from fwsapp.paths import CACHE_DIR

# Parameter counts of the presets, from their model cards, so a fit is known before any download.
PARAMETERS = {
    EMBEDDED_MODEL: 135e6,
    "epfl-llm/meditron-7b": 6.74e9,
    "BioMistral/BioMistral-7B": 7.24e9,
    "johnsnowlabs/JSL-MedLlama-3-8B-v2.0": 8.03e9,
    "microsoft/biogpt": 347e6,
}
STATUSES = ("ok", "warning", "missing")


@dataclass(frozen=True)
class Check:
    topic: str
    item: str
    status: str  # one of STATUSES
    detail: str


def fits(parameters: float, dtype: str, free_bytes: float) -> bool:
    return memory_needed(parameters, dtype) <= free_bytes


def _gib(value: float) -> str:
    return f"{value / 2**30:.1f} GiB"


def _installed(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def device_facts(device: str | None = None, dtype: str | None = None) -> tuple[str, str, float]:
    """(device, dtype, free bytes on it) for the device and dtype asked for, or the best here: CUDA's free memory,
    or the host's available memory."""
    import torch

    from fwsapp.models import dtype_name, free_memory, placement

    device, dtype = placement(device, dtype)
    name = f"cuda ({torch.cuda.get_device_name(device)})" if device.type == "cuda" else "cpu"
    return name, dtype_name(dtype), free_memory(device)


def _cached_offline(model_id: str) -> bool:
    """Whether a Hugging Face id is in the local cache (HF_HOME), so it loads with no network."""
    from huggingface_hub import try_to_load_from_cache

    return isinstance(try_to_load_from_cache(model_id, "config.json"), str)


def model_checks(dtype: str, free: float, cache_dir: Path = CACHE_DIR) -> list[Check]:
    checks = []
    for name, label in PRESETS.items():
        need = memory_needed(PARAMETERS[name], dtype)
        fit = "fits" if fits(PARAMETERS[name], dtype, free) else "does NOT fit"
        if name == EMBEDDED_MODEL:
            converted = embedded_is_converted(cache_dir)
            available = _installed(EMBEDDED_PACKAGE)
            where = ("converted in cache/models" if converted else f"in the {EMBEDDED_PACKAGE} wheel ({EMBEDDED_GGUF}), "
                     "converted on first use") if available else "its wheel is missing: run `make run`"
        else:
            available = _cached_offline(name)
            where = "in the Hugging Face cache" if available else "not downloaded (needs the network, or --model FOLDER)"
        status = "ok" if available and fit == "fits" else "warning" if available or fit == "fits" else "missing"
        smaller = "" if fit == "fits" or dtype != "fp32" else \
            f" (in bf16, --dtype bf16: about {_gib(memory_needed(PARAMETERS[name], 'bf16'))}, " \
            f"{'fits' if fits(PARAMETERS[name], 'bf16', free) else 'does NOT fit either'})"
        checks.append(Check("model", name, status, f"{label}; {where}; needs about {_gib(need)} in {dtype}: {fit}{smaller}"))
    return checks


def tokenizer_checks() -> list[Check]:
    from fwsapp.models.tokenizers import TOKENIZERS

    packages = {"mistral-v1": "mistral_common", "llama-3": "llama_models"}
    return [Check("tokenizer", name, "ok" if _has_files(packages[name]) else "missing",
                  f"{label}" + ("" if _has_files(packages[name]) else "; its wheel is missing: run `make run`"))
            for name, label in TOKENIZERS.items()]


def _has_files(package: str) -> bool:
    """Whether a wheel installed for its files is there (on the import path or off it)."""
    try:
        return package_folder(package).is_dir()
    except ModelLoadError:
        return False


def backend_checks() -> list[Check]:
    from fwsapp.watermark import methods
    from fwsapp.robustness.attacks import ATTACKS
    from fwsapp.judge.registry import JUDGE_BACKENDS
    from fwsapp.quality.registry import METRICS
    from fwsapp.entities.recognizers import RECOGNIZERS

    checks = [plug_in_check("recognizer", entry, RECOGNIZERS.default, entry.label) for entry in RECOGNIZERS]
    checks.append(Check("encoder", "all-MiniLM-L6-v2", "ok" if _installed(ENCODER_PACKAGE) else "missing",
                        "similarity, span embeddings and the trained recognizer's base"))
    checks += [plug_in_check("judge", entry) for entry in JUDGE_BACKENDS]
    checks += [plug_in_check("metric", entry) for entry in METRICS]
    checks += [plug_in_check("method", entry) for entry in methods.METHODS]
    checks += [plug_in_check("attack", entry) for entry in ATTACKS]
    return checks


def plug_in_check(topic: str, entry, default: str | None = None, label=None) -> Check:
    """A registered plug-in's line: missing, with the reason, where it cannot run here; a warning where the key it
    needs is not set; else ok, with its label (name and version) where it has one."""
    item = entry.name + (" (default)" if entry.name == default else "")
    reason = entry.unavailable()
    if reason:
        return Check(topic, item, "missing", f"{reason}: {entry.help}")
    status, detail = getattr(entry, "key_status", lambda: None)() or ("ok", label() if label else entry.help)
    return Check(topic, item, status, f"{detail}: {entry.help}" if detail != entry.help else detail)


def creatable(path: Path) -> str | None:
    """Why a file cannot be created at `path`, or None: tried for real, with a temporary file in the nearest folder
    that exists (removed at once), since permissions alone do not say it (/proc looks writable to root)."""
    import tempfile

    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    try:
        with tempfile.TemporaryFile(dir=folder):
            return None
    except OSError as error:
        return error.strerror or str(error)


def database_check(path: Path, store=None) -> Check:
    """The database's size and runs, read through `store` where this process holds it open already."""
    from fwsapp.store import Store, StoreError

    if store is None and not path.exists():
        problem = creatable(path)
        if problem:
            return Check("database", str(path), "warning", f"cannot be created there ({problem}): pass --db with "
                         "another path")
        return Check("database", str(path), "ok", "not created yet: the first run creates it")
    try:
        reader = store or Store(path, read_only=True)
    except StoreError as error:
        return Check("database", str(path), "warning", str(error))
    try:
        return Check("database", str(path), "ok", f"{_gib(path.stat().st_size)}; {counted(len(reader.runs()), 'run', 'runs')}")
    finally:
        if store is None:
            reader.close()


def checks(db: Path, store=None, device: str | None = None, dtype: str | None = None) -> list[Check]:
    device, dtype, free = device_facts(device, dtype)
    return [Check("device", device, "ok", f"{dtype}; {_gib(free)} free"), *model_checks(dtype, free),
            *tokenizer_checks(), *backend_checks(), database_check(db, store)]
