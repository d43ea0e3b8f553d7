"""PyTorch's CUDA `randperm`, reproduced exactly on the CPU.

MarkLLM seeds its green lists with `torch.Generator(device="cuda")` whenever it runs on a GPU, as the paper
did, and CUDA's `randperm` is a different algorithm from the CPU's Fisher-Yates over mt19937. Its steps
(aten/src/ATen/native/cuda/Randperm.cu, Randperm.cuh and DistributionTemplates.h; cuRAND's Philox4x32-10):

1. One random key per element. `random_` runs a grid-stride kernel of 256-thread blocks, grid
   min(⌈n/256⌉, SMs × resident blocks per SM). Thread t calls `curand_init(seed, subsequence=t, offset=0)`
   and draws with `curand4`, two 64-bit values per call ((x << 32) | y and (z << 32) | w), for the elements
   t, t + stride, t + 2·stride, … (stride = 256 · grid). A key is (value mod range) + base; only its low
   `bits` bits are sorted on, bits = ⌈log2(n − (6n² + 1) / (12 ln 0.9))⌉.
2. A stable radix sort of arange(n) by those low bits.
3. "Islands" of equal keys are shuffled: the first position of each island runs Fisher-Yates with its own
   Philox stream (subsequence = its position, offset = what step 1 consumed), r = curand() mod (i + 1).

Detection asks only where one token lands, and a token's own key nearly always answers that: the other
n − 1 keys are independent and uniform, so how many fall below it is known to within ±√((n − 1)·50 ln 2)
except with probability 2⁻¹⁰⁰ (Hoeffding's inequality). `rank_below_by_key` decides from that one key,
and only a token whose key lies within that margin of the boundary needs the other keys.

When ⌈n/256⌉ blocks fit on the GPU (always at 32,000 tokens), every element is one thread's first draw,
and the keys do not depend on the GPU; above that the cap (`cuda_blocks`) decides which draw an element
gets, so it is a parameter: 492 for an 82-SM RTX 3090-class card at 128,256 tokens.
"""
from __future__ import annotations

import math

import numba
import numpy as np

PHILOX_W0, PHILOX_W1 = 0x9E3779B9, 0xBB67AE85
PHILOX_M0, PHILOX_M1 = 0xD2511F53, 0xCD9E8D57
BLOCK = 256
UNROLL = 2  # curand4 yields two 64-bit values per call
MASK32 = 0xFFFFFFFF
# A position judged from one key is wrong with probability below 2**-100, far below any hardware fault rate.
JUDGED_FAILURE_LOG = 100 * math.log(2)


@numba.njit(cache=True, inline="always")
def _philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10: ten rounds over a 128-bit counter with a 64-bit key (Salmon et al., 2011).

    Words are held in uint64 lanes with their high halves masked off explicitly, which lets the compiler
    use 32×32→64-bit vector multiplies (vpmuludq) and vectorise the rounds across elements.
    """
    low = np.uint64(MASK32)
    c0, c1, c2, c3 = np.uint64(c0) & low, np.uint64(c1) & low, np.uint64(c2) & low, np.uint64(c3) & low
    k0, k1 = np.uint64(k0) & low, np.uint64(k1) & low
    for _ in range(10):
        product0 = np.uint64(PHILOX_M0) * (c0 & low)
        product1 = np.uint64(PHILOX_M1) * (c2 & low)
        c0, c1, c2, c3 = (((product1 >> np.uint64(32)) ^ c1 ^ k0) & low, product1 & low,
                          ((product0 >> np.uint64(32)) ^ c3 ^ k1) & low, product0 & low)
        k0 = (k0 + np.uint64(PHILOX_W0)) & low
        k1 = (k1 + np.uint64(PHILOX_W1)) & low
    return c0, c1, c2, c3


def key_bits(n: int) -> int:
    """How many low key bits CUDA's randperm sorts on (at most 64)."""
    return min(64, math.ceil(math.log2(n - (6 * n * n + 1) / (12 * math.log(0.9)))))


def _key_mask(bits: int) -> np.uint64:
    return np.uint64(0xFFFFFFFFFFFFFFFF) if bits == 64 else np.uint64((1 << bits) - 1)


def grid_blocks(n: int, cuda_blocks: int | None = None) -> int:
    """Blocks of the random kernel: ⌈n/256⌉, capped by what the GPU keeps resident (None: not capped)."""
    blocks = -(-n // BLOCK)
    return min(blocks, cuda_blocks) if cuda_blocks else blocks


@numba.njit(cache=True, inline="always")
def _modulo_range(value, int32_keys):
    """value mod range, with neither a 64-bit division nor a branch (so loops over it vectorise):
    random_(int_min, int_max) has range 2**32 - 1 on int32 keys and 2**64 - 1 on int64 keys, and
    x mod (2**k - 1) folds the high half onto the low one."""
    all_ones, low, shift = np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(MASK32), np.uint64(32)
    wide = value - value * np.uint64(value == all_ones)
    folded = (value >> shift) + (value & low)
    folded = (folded >> shift) + (folded & low)
    narrow = folded - folded * np.uint64(folded == low)
    return wide + np.uint64(int32_keys) * (narrow - wide)


@numba.njit(cache=True, inline="always")
def _key(call, thread, second_half, seed, int32_keys, mask):
    """The sort key that thread `thread`'s call-th curand4 gives, curand_init(seed, thread, 0) reading
    counter (call, 0, thread, 0): its (x, y) for the first half of the call's elements, its (z, w) for the
    second. Branch-free, so loops over it vectorise."""
    shift = np.uint64(32)
    c0, c1, c2, c3 = _philox(call, 0, thread, 0, seed & MASK32, seed >> 32)
    first = (c0 << shift) | c1
    value = first + np.uint64(second_half) * (((c2 << shift) | c3) - first)
    return _modulo_range(value, int32_keys) & mask


@numba.njit(cache=True, fastmath=True, error_model="numpy", boundscheck=False)
def _fill_keys(keys, start, count, call, second_half, seed, int32_keys, mask):
    """keys[start + t] for threads t < count, in one flat loop over the inlined rounds (vectorised)."""
    for thread in range(count):
        keys[start + thread] = _key(call, thread, second_half, seed, int32_keys, mask)


@numba.njit(cache=True)
def _element_key(element, seed, stride, int32_keys, mask):
    """keys[element] alone: in call element // (2·stride), thread (element mod 2·stride) mod stride, the
    second half when element mod 2·stride ≥ stride."""
    call = element // (UNROLL * stride)
    rest = element - call * UNROLL * stride
    second = rest >= stride
    return _key(call, rest - stride * second, second, seed, int32_keys, mask)


def _sort_keys(n: int, seed: int, stride: int, bits: int) -> np.ndarray:
    """Each element's sort key: its draw's (value mod range) masked to the low `bits` bits."""
    mask = _key_mask(bits)
    keys = np.empty(n, dtype=np.uint64)
    for call in range((n - 1) // (UNROLL * stride) + 1):
        base = call * UNROLL * stride
        _fill_keys(keys, base, min(stride, n - base), call, 0, seed, bits <= 32, mask)
        if n > base + stride:
            _fill_keys(keys, base + stride, min(stride, n - base - stride), call, 1, seed, bits <= 32, mask)
    return keys


class _IslandStream:
    """curand() for one island leader: curand_init(seed, subsequence=position, offset), one word at a time."""

    def __init__(self, seed: int, subsequence: int, offset: int):
        self.key = (seed & MASK32, (seed >> 32) & MASK32)
        self.counter = offset // 4
        self.word = offset % 4
        self.subsequence = subsequence
        self.block = self._draw()

    def _draw(self):
        c = self.counter
        return _philox(np.uint32(c & MASK32), np.uint32((c >> 32) & MASK32),
                       np.uint32(self.subsequence & MASK32), np.uint32(self.subsequence >> 32), *map(np.uint32, self.key))

    def next(self) -> int:
        value = int(self.block[self.word])
        self.word += 1
        if self.word == 4:
            self.word, self.counter = 0, self.counter + 1
            self.block = self._draw()
        return value


def _consumed_offset(n: int, stride: int) -> int:
    """The Philox offset the key kernel advanced the generator by (calc_execution_policy)."""
    return ((n - 1) // (stride * UNROLL) + 1) * 4


def _shuffle_island(order: np.ndarray, start: int, size: int, seed: int, offset: int) -> None:
    stream = _IslandStream(seed, start, offset)
    for i in range(size - 1, 0, -1):
        r = stream.next() % (i + 1)
        if r != i:
            order[start + i], order[start + r] = order[start + r], order[start + i]


def _keys(n: int, seed: int, cuda_blocks: int | None) -> tuple[np.ndarray, int]:
    stride = BLOCK * grid_blocks(n, cuda_blocks)
    return _sort_keys(n, seed, stride, key_bits(n)), _consumed_offset(n, stride)


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """argsort(keys, kind="stable"), faster: keys and indices packed into one uint64 when they fit."""
    index_bits = max(1, (len(keys) - 1).bit_length())
    if key_bits(len(keys)) + index_bits > 64:
        return np.argsort(keys, kind="stable")
    packed = np.sort((keys << np.uint64(index_bits)) | np.arange(len(keys), dtype=np.uint64))
    return (packed & np.uint64((1 << index_bits) - 1)).astype(np.int64)


def randperm(n: int, seed: int, cuda_blocks: int | None = None) -> np.ndarray:
    """`torch.randperm(n, generator=torch.Generator("cuda").manual_seed(seed))`, computed on the CPU."""
    keys, offset = _keys(n, seed, cuda_blocks)
    order = _stable_order(keys)
    ordered = keys[order]
    equal_next = ordered[1:] == ordered[:-1]
    if equal_next.any():
        starts = np.flatnonzero(equal_next & np.r_[True, ~equal_next[:-1]])
        for start in starts:
            size = 1
            while start + size < n and ordered[start + size] == ordered[start]:
                size += 1
            _shuffle_island(order, int(start), size, seed, offset)
    return order


def _island_order(keys: np.ndarray, key: np.uint64, seed: int, offset: int) -> tuple[int, np.ndarray]:
    """The sorted position where the island of `key` starts, and its members in their shuffled order."""
    start = int(np.count_nonzero(keys < key))
    members = np.flatnonzero(keys == key)
    if len(members) > 1:
        order = np.empty(start + len(members), dtype=np.int64)
        order[start:] = members
        _shuffle_island(order, start, len(members), seed, offset)
        members = order[start:]
    return start, members


def _kth_smallest(keys: np.ndarray, k: int, bits: int) -> np.uint64:
    """np.partition(keys, k)[k] for uniform keys, partitioning only a window around the expected quantile:
    its spread is about √n, so a window of ±8/√n of the range holds it (else the whole array is used)."""
    n = len(keys)
    expected, spread = (k + 1) / n * 2.0**bits, 8 * 2.0**bits / math.sqrt(n)
    low = np.uint64(max(0.0, expected - spread))
    high = np.uint64(min(2.0**bits - 1, expected + spread))
    rank = k - np.count_nonzero(keys < low)
    window = keys[(keys >= low) & (keys < high)]
    if 0 <= rank < len(window):
        return np.partition(window, rank)[rank]
    return np.partition(keys, k)[k]


def green_mask(n: int, seed: int, green_size: int, cuda_blocks: int | None = None) -> np.ndarray:
    """Boolean mask of randperm(n, seed)[:green_size], without sorting the whole vocabulary.

    Only the keys below the green_size-th smallest matter, plus the island of keys equal to it, whose
    shuffle decides which of its members fall inside.
    """
    mask = np.zeros(n, dtype=bool)
    if green_size >= n:
        mask[:] = True
    if not 0 < green_size < n:
        return mask
    keys, offset = _keys(n, seed, cuda_blocks)
    boundary = _kth_smallest(keys, green_size - 1, key_bits(n))
    mask[keys < boundary] = True
    start, island = _island_order(keys, boundary, seed, offset)
    mask[island[: green_size - start]] = True
    return mask


def rank_below_by_key(n: int, seed: int, token: int, limit: int, cuda_blocks: int | None = None) -> bool | None:
    """Whether rank(n, seed, token) < limit, judged from the token's own key; None when the key is too near
    the boundary to judge without the other keys.

    The token's position lies between the number of other keys below its key and the number at or below
    it. Each count is a sum of n − 1 independent Bernoulli draws whose mean follows from the key, and lies
    within `margin` of that mean except with probability 2⁻¹⁰⁰ (Hoeffding); one more absorbs the
    modulo's bias of at most 2⁻³² per key.
    """
    bits = key_bits(n)
    mask = _key_mask(bits)
    key = int(_element_key(token, seed, BLOCK * grid_blocks(n, cuda_blocks), bits <= 32, mask))
    others = n - 1
    margin = math.sqrt(others * JUDGED_FAILURE_LOG / 2) + 1
    if others * (key + 1) / 2.0**bits + margin <= limit:
        return True
    if others * key / 2.0**bits - margin >= limit - 1:
        return False
    return None


def rank(n: int, seed: int, token: int, cuda_blocks: int | None = None) -> int:
    """Where `token` lands in randperm(n, seed), without sorting the whole vocabulary."""
    keys, offset = _keys(n, seed, cuda_blocks)
    start, island = _island_order(keys, keys[token], seed, offset)
    return start + int(np.flatnonzero(island == token)[0])
