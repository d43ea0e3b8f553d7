"""Philox4x32-10 (Salmon et al., SC 2011) as vLLM's watermarks key it: a uniform for every (context, token) pair.

vLLM 0.33.0 (`vllm/v1/watermarking/prfs/philox.py`) folds the context, four token ids at a time, into a 128-bit
state with one Philox call per block, under a key whose first word is xored with the block's offset; a token's
uniform is then word `token & 3` of a Philox call on (token >> 2, the state's first three words) under the key xored
with the state's last word and a token domain, its top 24 bits mapped to (0, 1) as (m + 1) / (2^24 + 1) in float32.
Four neighbouring tokens share one call, so a row of the vocabulary costs V/4 calls.

vLLM writes its 32-bit multiply with 16-bit halves in int64 tensors; here numpy's uint64 holds the 64-bit product of
two 32-bit words exactly, which is fewer operations on a CPU. Every function is vectorised over any leading shape:
no Python loop runs per row or per token.
"""
from __future__ import annotations

import hashlib

import numpy as np

_MASK = np.uint64(0xFFFFFFFF)
_SHIFT_32 = np.uint64(32)
_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_CONTEXT_DOMAIN = 0x574D4358
_TOKEN_DOMAIN = np.uint64(0x574D544B)
MAX_KEY = 2**64 - 1


def derive_key(key: int, domain: bytes) -> int:
    """A sub-key, as vLLM derives the dual-key watermark's two keys: SHA-256 of domain + key (8 bytes, big-endian),
    its first 8 bytes."""
    return int.from_bytes(hashlib.sha256(domain + key.to_bytes(8, "big")).digest()[:8], "big")


def philox4x32_10(counter: tuple, key: tuple) -> tuple:
    """Ten rounds on four 32-bit counter words under two key words (uint64 arrays, or scalars, holding 32-bit
    values). The rounds work in place on buffers of their own: this is the watermarked sampler's inner loop."""
    shape = np.broadcast_shapes(*(np.shape(word) for word in (*counter, *key)))
    c0, c1, c2, c3 = (np.array(np.broadcast_to(word, shape), dtype=np.uint64) for word in counter)
    k0, k1 = (np.array(word, dtype=np.uint64) for word in key)  # a scalar key word stays a scalar: cheaper
    product_0, product_1 = np.empty(shape, np.uint64), np.empty(shape, np.uint64)
    for round_index in range(10):
        np.multiply(c0, _M0, out=product_0)  # exact: both factors are below 2^32
        np.multiply(c2, _M1, out=product_1)
        # c0, c1, c2, c3 = hi(p1) ^ c1 ^ k0, lo(p1), hi(p0) ^ c3 ^ k1, lo(p0), reusing the four buffers
        np.right_shift(product_1, _SHIFT_32, out=c0)
        np.bitwise_xor(c0, c1, out=c0)
        np.bitwise_xor(c0, k0, out=c0)
        np.bitwise_and(product_1, _MASK, out=c1)
        np.right_shift(product_0, _SHIFT_32, out=c2)
        np.bitwise_xor(c2, c3, out=c2)
        np.bitwise_xor(c2, k1, out=c2)
        np.bitwise_and(product_0, _MASK, out=c3)
        if round_index != 9:
            k0, k1 = (k0 + _W0) & _MASK, (k1 + _W1) & _MASK
    return c0, c1, c2, c3


class PhiloxPRF:
    """vLLM's keyed uniforms: `uniform(contexts, tokens)` for contexts of shape (..., width) (−1 = before the text)
    and token ids broadcast against the contexts' leading shape."""

    def __init__(self, key: int):
        if not 0 <= key <= MAX_KEY:
            raise ValueError(f"A Philox key must fit in 64 bits (0 to {MAX_KEY:,}), not {key}.")
        self.key = key
        self._key_0, self._key_1 = np.uint64(key & 0xFFFFFFFF), np.uint64(key >> 32)

    def context_states(self, contexts: np.ndarray) -> tuple:
        """Each context folded into Philox's four state words (arrays of the contexts' leading shape)."""
        contexts = np.asarray(contexts, dtype=np.int64).astype(np.uint64) & _MASK  # −1 wraps to 0xFFFFFFFF
        width, shape = contexts.shape[-1], contexts.shape[:-1]
        state = (np.full(shape, _CONTEXT_DOMAIN, np.uint64), np.full(shape, width, np.uint64),
                 np.zeros(shape, np.uint64), np.zeros(shape, np.uint64))
        for offset in range(0, width, 4):
            block = [contexts[..., offset + index] if offset + index < width else np.uint64(0xFFFFFFFF - index)
                     for index in range(4)]
            counter = tuple(word ^ part for word, part in zip(state, block))
            state = philox4x32_10(counter, (np.full(shape, self._key_0 ^ np.uint64(offset)), np.full(shape, self._key_1)))
        return state

    def _calls(self, states: tuple, groups: np.ndarray) -> tuple:
        """The Philox call of each group of four tokens (4g to 4g + 3) after its context's state: four words, one per
        token of the group."""
        s0, s1, s2, s3, groups = np.broadcast_arrays(*states, groups)
        return philox4x32_10((groups, s0, s1, s2), (self._key_0 ^ s3, self._key_1 ^ _TOKEN_DOMAIN))

    def uniform_at(self, states: tuple, tokens: np.ndarray) -> np.ndarray:
        """The float32 uniform of each token after its context's state (`states` broadcast against `tokens`)."""
        tokens = np.asarray(tokens, dtype=np.int64).astype(np.uint64) & _MASK
        outputs = self._calls(states, tokens >> np.uint64(2))
        return _to_uniform(np.choose(np.broadcast_to(tokens & np.uint64(3), outputs[0].shape).astype(np.int64), outputs))

    def group_uniforms(self, states: tuple, groups: np.ndarray) -> np.ndarray:
        """The uniforms of tokens 4g to 4g + 3 for each group g, shape (..., 4): one Philox call gives all four."""
        groups = np.asarray(groups, dtype=np.int64).astype(np.uint64)
        return _to_uniform(np.stack(self._calls(states, groups), axis=-1))

    def uniform(self, contexts: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """vLLM's `PhiloxPRF.uniform`: each context's uniforms for `tokens`, broadcast against the contexts' leading
        shape plus one axis, (..., 1): (n, width) contexts and (n, 1) tokens give (n, 1); (1, V) tokens give (n, V)."""
        return self.uniform_at(tuple(word[..., None] for word in self.context_states(contexts)), tokens)


def _to_uniform(words: np.ndarray) -> np.ndarray:
    """A Philox word's top 24 bits m as (m + 1) / (2^24 + 1), in float32 (computed in float64, as vLLM does)."""
    return ((((words & _MASK) >> np.uint64(8)).astype(np.float64) + 1.0) / (2**24 + 1)).astype(np.float32)


# The extremes of (m + 1) / (2^24 + 1) in float32 bound the Gumbel noise −log(−log u) that any token can draw.
SMALLEST_UNIFORM = np.float32(1.0 / (2**24 + 1))
LARGEST_UNIFORM = np.float32((2**24) / (2**24 + 1))
