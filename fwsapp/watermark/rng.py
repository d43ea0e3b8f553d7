"""Seeded permutations of the vocabulary, drawn as MarkLLM draws them: `torch.randperm` on a generator.

The green lists of KGW, SWEET and DiPmark are prefixes (or ranks) of `torch.randperm(V, generator=g)`
with `g.manual_seed(seed)`. Which generator matters: MarkLLM creates it on the model's device, so a GPU
run (the paper's) and a CPU run watermark with different lists for the same key.

- `rng="cuda"`: MarkLLM on a GPU. With CUDA at hand and no grid cap that this GPU would not apply, the real
  generator; otherwise `cuda_rng`'s exact emulation, so the lists are the same on every machine.
- `rng="cpu"`: MarkLLM on a CPU (mt19937 Fisher-Yates).

`cuda_blocks` caps the random kernel's grid as a smaller GPU does (0: not capped; 492 for an 82-SM
RTX 3090-class card at 128,256 tokens). It only matters above 256 × the cap tokens.
"""
from __future__ import annotations

import numpy as np
import torch

from fwsapp.watermark import cuda_rng

RNG_KINDS = ("cuda", "cpu")


def check_rng(rng: str, cuda_blocks: int) -> None:
    if rng not in RNG_KINDS:
        raise ValueError(f"rng must be 'cuda' (MarkLLM on a GPU, as the paper ran) or 'cpu', not {rng!r}.")
    if cuda_blocks < 0:
        raise ValueError(f"cuda_blocks must be 0 (no cap) or a positive block count, not {cuda_blocks}.")


def _native_cuda(vocab_size: int, cuda_blocks: int) -> bool:
    """Whether this machine's CUDA generator gives the requested lists itself."""
    if not torch.cuda.is_available():
        return False
    properties = torch.cuda.get_device_properties(0)
    resident = properties.multi_processor_count * (properties.max_threads_per_multi_processor // cuda_rng.BLOCK)
    needed = -(-vocab_size // cuda_rng.BLOCK)
    wanted = min(needed, cuda_blocks) if cuda_blocks else needed
    return min(needed, resident) == wanted


class VocabularyShuffle:
    """`randperm(vocab_size)` for any seed, from the chosen generator; as numpy arrays on the CPU."""

    def __init__(self, vocab_size: int, rng: str = "cuda", cuda_blocks: int = 0):
        check_rng(rng, cuda_blocks)
        self.vocab_size = vocab_size
        self.rng = rng
        self.cuda_blocks = cuda_blocks or None
        self.native_cuda = rng == "cuda" and _native_cuda(vocab_size, cuda_blocks)
        # torch draws the lists itself on the CPU generator, or on a CUDA one that gives the requested grid.
        self._generator = torch.Generator(device="cpu") if rng == "cpu" else (
            torch.Generator(device="cuda") if self.native_cuda else None)

    def _torch_randperm(self, seed: int) -> np.ndarray:
        self._generator.manual_seed(seed)
        return torch.randperm(self.vocab_size, generator=self._generator, device=self._generator.device).cpu().numpy()

    def permutation(self, seed: int) -> np.ndarray:
        if self._generator is not None:
            return self._torch_randperm(seed)
        return cuda_rng.randperm(self.vocab_size, seed, self.cuda_blocks)

    def green_mask(self, seed: int, green_size: int) -> np.ndarray:
        """True for the first `green_size` entries of the permutation."""
        if self._generator is not None:
            mask = np.zeros(self.vocab_size, dtype=bool)
            mask[self._torch_randperm(seed)[:green_size]] = True
            return mask
        return cuda_rng.green_mask(self.vocab_size, seed, green_size, self.cuda_blocks)

    def rank_below(self, seed: int, token: int, limit: int) -> bool | None:
        """Whether `token`'s position is below `limit`, when its own key settles it (emulated CUDA only); else None."""
        if self._generator is not None:
            return None
        return cuda_rng.rank_below_by_key(self.vocab_size, seed, token, limit, self.cuda_blocks)

    def rank(self, seed: int, token: int) -> int:
        """The position of `token` in the permutation."""
        if self._generator is not None:
            return int(np.flatnonzero(self._torch_randperm(seed) == token)[0])
        return cuda_rng.rank(self.vocab_size, seed, token, self.cuda_blocks)
