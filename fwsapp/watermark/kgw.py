"""KGW (Kirchenbauer et al., 2023): a soft red/green-list watermark.

At each step the previous token seeds a pseudo-random split of the vocabulary; a fraction γ is "green"
and gets δ added to its logits. A detector counts green tokens and reports
    z = (|s|_G − γT) / sqrt(T γ (1 − γ)).

Green lists are bit-identical to MarkLLM 0.1.5's KGW ("time" f-scheme, "left" window) for the same
vocabulary size and generator: `rng="cuda"` (the default) is MarkLLM on a GPU, as the paper ran it, and
reproduces its published z-scores; `rng="cpu"` is MarkLLM on a CPU.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np
import torch
from transformers import LogitsProcessor

from fwsapp.watermark import methods
from fwsapp.watermark.evidence import GreenCount, green_p_value, green_z
from fwsapp.watermark.detector import TokenDetector
from fwsapp.watermark.keyed_uniforms import multiplied_seed, prefix_product
from fwsapp.watermark.rng import VocabularyShuffle


# Packed green lists kept in a process: a Llama 3 run meets tens of thousands of seeds (16 KiB each).
GREEN_CACHE_BYTES = 256 * 2**20


class GreenListCache:
    """Packed green lists shared by every detector and processor of the process, least recently used dropped first.

    A list depends on the vocabulary, the generator and its grid cap, the green share and the seed, not on δ or on which
    detector asked: a δ sweep, a run detected again after an attack and the app's next job under the same key read the
    lists the last one built (a Llama 3 list costs about 2 ms to draw). App jobs run in threads, hence the lock."""

    def __init__(self, max_bytes: int = GREEN_CACHE_BYTES):
        self.max_bytes = max_bytes
        self._lists: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __contains__(self, key: tuple) -> bool:
        return key in self._lists

    def get(self, key: tuple) -> np.ndarray | None:
        with self._lock:
            found = self._lists.get(key)
            if found is not None:
                self._lists.move_to_end(key)
            return found

    def put(self, key: tuple, packed: np.ndarray) -> None:
        with self._lock:
            if key in self._lists:
                return
            self._lists[key] = packed
            self._bytes += packed.nbytes
            while self._bytes > self.max_bytes and len(self._lists) > 1:
                self._bytes -= self._lists.popitem(last=False)[1].nbytes


GREEN_LISTS = GreenListCache()


class GreenLists:
    """MarkLLM's left-hash green lists, each drawn once per process (`GREEN_LISTS`).

    Two seeding schemes, as MarkLLM has them: "kgw" passes the prefix through a keyed pseudo-random
    permutation (KGW's f_time); "sweet" multiplies the hash key by the prefix (SWEET's _seed_rng).
    `rng` and `cuda_blocks` choose the generator (see `rng.py`): the same lists on any device.
    """

    def __init__(self, vocab_size: int, gamma: float, hash_key: int, prefix_length: int, scheme: str = "kgw",
                 rng: str = "cuda", cuda_blocks: int = 0, cache: GreenListCache = GREEN_LISTS):
        self.vocab_size = vocab_size
        self.gamma = gamma
        self.hash_key = hash_key
        self.prefix_length = prefix_length
        self.green_size = int(vocab_size * gamma)
        self.scheme = scheme
        self.shuffle = VocabularyShuffle(vocab_size, rng, cuda_blocks)
        self._prf = self.shuffle.permutation(hash_key).tolist() if scheme == "kgw" else None
        self._cache = cache
        self._list_key = (vocab_size, rng, cuda_blocks, self.green_size)  # with the seed, what a list depends on

    def seed(self, prefix: Sequence[int]) -> int:
        """The generator seed for the token after `prefix`, from the product of its last tokens."""
        if self.scheme == "sweet":
            return multiplied_seed(prefix, self.prefix_length, self.hash_key, self.vocab_size)
        return (self.hash_key * self._prf[prefix_product(prefix, self.prefix_length) % self.vocab_size]) % self.vocab_size

    def packed(self, seed: int) -> np.ndarray:
        """The green list for `seed` as packed bits (np.packbits of the mask)."""
        key = (*self._list_key, seed)
        packed = self._cache.get(key)
        if packed is None:
            packed = np.packbits(self.shuffle.green_mask(seed, self.green_size))
            self._cache.put(key, packed)
        return packed

    def mask(self, seed: int) -> torch.Tensor:
        """Boolean mask over the vocabulary: True where green."""
        return torch.from_numpy(np.unpackbits(self.packed(seed), count=self.vocab_size).view(bool))

    def is_green(self, seed: int, token: int) -> bool:
        """Detection's question. A list not yet cached is built only if the token's own key cannot settle it."""
        if not 0 <= token < self.vocab_size:
            return False
        if (*self._list_key, seed) not in self._cache:
            settled = self.shuffle.rank_below(seed, token, self.green_size)
            if settled is not None:
                return settled
        return bool(self.packed(seed)[token >> 3] >> (7 - (token & 7)) & 1)

    def green_ids(self, prefix: Sequence[int]) -> torch.Tensor:
        return self.mask(self.seed(prefix)).nonzero().flatten()

    def batch_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """[batch, vocab] green masks for the next token of each row."""
        rows = input_ids[:, -self.prefix_length:].tolist()
        return torch.stack([self.mask(self.seed(row)) for row in rows])


def bias_green(scores: torch.Tensor, green: torch.Tensor, delta: float) -> torch.Tensor:
    """Add δ to green logits; logits wider than the vocabulary (padding rows) are left as they are."""
    width = min(scores.shape[-1], green.shape[-1])
    scores = scores.clone()
    scores[:, :width] += delta * green[:, :width].to(scores.device, scores.dtype)
    return scores


class GreenCountDetector(TokenDetector):
    """A green-list detector on the skeleton: a token's evidence is 1 where it is green, the score the z of their
    count, its p-value the exact or normal tail (`green_p_value`)."""

    evidence = GreenCount()

    def z(self, statistic: float, scored: int) -> float:
        return float(green_z(statistic, scored, self.params["gamma"]))

    def p_value(self, statistic: float, scored: int) -> float:
        return green_p_value(int(statistic), scored, self.params["gamma"])


class KGWLogitsProcessor(LogitsProcessor):
    def __init__(self, green_lists: GreenLists, delta: float):
        self.green_lists = green_lists
        self.delta = delta

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[-1] < self.green_lists.prefix_length:
            return scores
        return bias_green(scores, self.green_mask(input_ids, scores), self.delta)

    def green_mask(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        """Where δ is added: the green list of each row."""
        return self.green_lists.batch_mask(input_ids)


class KGW(GreenCountDetector, info=methods.KGW):
    seeding = "kgw"

    def __init__(self, vocab_size: int, **params):
        super().__init__(vocab_size, **params)
        p = self.params
        self.green_lists = GreenLists(vocab_size, p["gamma"], p["hash_key"], p["prefix_length"], scheme=self.seeding,
                                      rng=p["rng"], cuda_blocks=p["cuda_blocks"])

    def logits_processor(self) -> LogitsProcessor:
        return KGWLogitsProcessor(self.green_lists, self.params["delta"])

    def token_evidence(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """1 where the token is in the green list its context seeds, else 0."""
        return np.asarray([self.green_lists.is_green(self.green_lists.seed(context.tolist()), token)
                           for context, token in zip(contexts, tokens.tolist())], dtype=float)
