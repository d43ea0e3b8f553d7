"""vLLM 0.33.0's own watermarking code, the oracle of fwsapp's vLLM-Gumbel methods: never a run-time dependency.

`make install-test` extracts `vllm/v1/watermarking/` and `vllm/config/watermarking.py` from the vllm wheel into
.venv/oracles, off the import path. They need torch and pydantic, and name three engine modules: the config
decorator, the logger and the GPU sampler's Gumbel kernel. Small stand-ins take those places here, so the real
Philox PRF, watermarkers and detectors run on CPU torch. The sampler's top-k and top-p masks
(`vllm/v1/sample/ops/topk_topp_sampler.py`) come too, with stand-ins saying it runs on a CPU without Triton.
"""
from __future__ import annotations

import importlib
import logging
import sys
import types

import pytest

from tests.conftest import PROJECT

VLLM_VERSION = "0.33.0"
ORACLE = PROJECT / ".venv" / "oracles" / f"vllm-{VLLM_VERSION}" / "vllm"


def _module(name: str, **attributes) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    sys.modules[name] = module
    return module


def _config(cls):
    from pydantic.dataclasses import dataclass

    return dataclass(cls)


def _logger(name: str) -> logging.Logger:
    logger = logging.getLogger(name)
    logger.warning_once = lambda message, *args, **kwargs: logger.warning(message)
    return logger


def _no_engine_sampler(*args, **kwargs):
    raise AssertionError("the oracle runs without vLLM's engine: its seeded GPU sampler is not here")


def vllm_watermarking():
    """The `vllm.v1.watermarking` package of the vllm wheel, loaded from .venv/oracles."""
    if "vllm.v1.watermarking" in sys.modules:
        return sys.modules["vllm.v1.watermarking"]
    if not ORACLE.is_dir():
        pytest.fail(f"vLLM's watermarking oracle is missing from {ORACLE.parent}: run `make install-test`.")
    _module("vllm", __path__=[str(ORACLE)])
    _module("vllm.config", __path__=[str(ORACLE / "config")])
    _module("vllm.config.utils", config=_config)
    _module("vllm.logger", init_logger=_logger)
    for package in ("vllm.v1", "vllm.v1.worker", "vllm.v1.worker.gpu", "vllm.v1.worker.gpu.sample"):
        _module(package, __path__=[])
    sys.modules["vllm.v1"].__path__ = [str(ORACLE / "v1")]
    _module("vllm.v1.worker.gpu.sample.gumbel", gumbel_sample=_no_engine_sampler)
    return importlib.import_module("vllm.v1.watermarking")


def vllm_top_k_top_p():
    """vLLM's `apply_top_k_top_p` as its CPU path runs it (no Triton: the PyTorch reference)."""
    vllm_watermarking()
    if "vllm.v1.sample.ops.topk_topp_sampler" not in sys.modules:
        cpu = types.SimpleNamespace(is_cpu=lambda: True, is_cuda=lambda: False, is_cuda_alike=lambda: False,
                                    is_xpu=lambda: False)
        _module("vllm.envs")
        _module("vllm._aiter_ops", rocm_aiter_ops=None)
        _module("vllm.config.model", PROCESSED_LOGPROBS_MODES=(), LogprobsMode=str)
        _module("vllm.platforms", CpuArchEnum=None, current_platform=cpu, __path__=[])
        _module("vllm.platforms.interface", DeviceCapability=None)
        _module("vllm.triton_utils", HAS_TRITON=False)
    return importlib.import_module("vllm.v1.sample.ops.topk_topp_sampler").apply_top_k_top_p
