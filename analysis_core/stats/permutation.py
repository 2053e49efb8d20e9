"""The paired sign-flip permutation engine: two-sided p-values of mean = 0 for many vectors of
differences at once, exactly over all 2^n sign vectors for n <= :data:`EXACT_PERMUTATION_MAX_N`,
else ``B`` seeded random flips with p = (hits + 1) / (B + 1); draws and p-values are cached, so a
table recomputed at another significance level costs nothing."""

from __future__ import annotations

import functools
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import cast

import numpy as np

from ..options import check_int

EXACT_PERMUTATION_MAX_N = 16  # 65 536 sign vectors
DEFAULT_PERMUTATIONS = 10_000


def default_permutations(n_tests: int, alpha: float, at_least: int = DEFAULT_PERMUTATIONS) -> int:
    """Random permutations enough for Holm over ``n_tests`` tests to reach ``alpha``: the smallest
    Monte Carlo p is 1 / (B + 1) and Holm multiplies the smallest by ``n_tests``, so B must exceed
    ``n_tests / alpha``; twice that (a p-value at the floor is rare), and ``at_least``."""
    return max(at_least, int(2 * max(n_tests, 1) / alpha) + 1)


def sign_flip_p_values(d: np.ndarray, n_permutations: int = 10_000, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Two-sided p-values of the paired sign-flip permutation test of mean = 0 for each column of
    ``d`` (queries x pairs), and whether they are exact: all 2^n sign vectors for n <=
    :data:`EXACT_PERMUTATION_MAX_N`, else ``(hits + 1) / (B + 1)`` over ``B`` random sign vectors
    drawn from ``seed`` — the same vectors for every column, so a column's p-value does not depend
    on which other pairs are tested, and all columns cost one matrix product."""
    return sign_flip_p_values_many([d], n_permutations, seed)[0]


def sign_flip_p_values_many(ds: list[np.ndarray], n_permutations: int = 10_000,
                            seed: int = 0) -> list[tuple[np.ndarray, bool]]:
    """:func:`sign_flip_p_values` of each matrix (or vector) of ``ds``. The matrices with the same
    number of rows share one draw of the random signs and its conversion to float64, chunk by
    chunk; each matrix still gets its own product with each chunk — the very product a call on
    it alone makes — so every p-value has the bits of that call. The p-values of the last
    matrices tested are kept (:data:`_P_CACHE`): a table recomputed at another significance level
    tests the same differences."""
    mats = []
    for d in ds:
        d = np.asarray(d, np.float64)
        mats.append(d[:, None] if d.ndim == 1 else d)
    keys = [(hashlib.blake2b(np.ascontiguousarray(d).tobytes(), digest_size=16).digest(), d.shape,
             d.flags.c_contiguous, n_permutations, seed) for d in mats]
    out: list[tuple[np.ndarray, bool] | None] = [None] * len(mats)
    with _SIGN_LOCK:
        for i, key in enumerate(keys):
            if key in _P_CACHE:
                _P_CACHE.move_to_end(key)
                out[i] = _P_CACHE[key]
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(mats):
        if out[i] is None:
            by_n.setdefault(d.shape[0], []).append(i)
    for n, idx in by_n.items():
        for i, res in zip(idx, _sign_flip([mats[i] for i in idx], n, n_permutations, seed), strict=True):
            out[i] = res
            with _SIGN_LOCK:
                _P_CACHE[keys[i]] = res
                while len(_P_CACHE) > _P_CACHE_ENTRIES:
                    _P_CACHE.popitem(last=False)
    return [(p.copy(), exact) for p, exact in cast(list[tuple[np.ndarray, bool]], out)]  # every entry filled


def _sign_flip(mats: list[np.ndarray], n: int, n_permutations: int, seed: int) -> list[tuple[np.ndarray, bool]]:
    """The p-values of :func:`sign_flip_p_values` for float64 matrices of ``n`` rows, computed."""
    n_permutations = check_int(n_permutations, "n_permutations", 1)
    obs = [np.abs(d.sum(axis=0)) for d in mats]
    # sums equal up to rounding count as reaching obs
    reach = [o - 1e-12 * np.maximum(1.0, np.abs(d).sum(axis=0)) for d, o in zip(mats, obs, strict=True)]
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return [(np.mean(np.abs(signs @ d) >= r, axis=0), True) for d, r in zip(mats, reach, strict=True)]
    hits = [np.zeros(d.shape[1], np.int64) for d in mats]
    # one float64 buffer for every chunk: a fresh 32 MB array each time costs its page faults
    buffer: np.ndarray | None = None
    for chunk in _random_signs(n, n_permutations, seed):
        if buffer is None or buffer.shape[0] < chunk.shape[0]:
            buffer = np.empty(chunk.shape)
        signs = buffer[: chunk.shape[0]]
        signs[...] = chunk
        for d, r, h in zip(mats, reach, hits, strict=True):
            h += np.sum(np.abs(signs @ d) >= r, axis=0)
    return [((h + 1) / (n_permutations + 1), False) for h in hits]


# drawn signs per (n, B, seed): (chunks, bytes held, whether the chunks are packed bits)
_SIGN_CACHE: dict[tuple[int, int, int], tuple[list, int, bool]] = {}
_SIGN_CACHE_BYTES = 128 << 20  # a report tests the same queries (same n) dozens of times
_SIGN_LOCK = threading.Lock()
# p-values of the last matrices of differences tested (digest of their bytes, shape, B, seed): a
# table recomputed with another significance level, or the same selection asked for again, tests
# the same differences; the same input gives the stored output, so every bit is unchanged
_P_CACHE: OrderedDict[tuple, tuple[np.ndarray, bool]] = OrderedDict()
_P_CACHE_ENTRIES = 512


def _random_signs(n: int, n_permutations: int, seed: int) -> Iterator[np.ndarray]:
    """The random signs (-1/+1, int8) of :func:`sign_flip_p_values`, in chunks of about 4
    million: bits drawn from ``default_rng(seed)`` (the same draws on every call) mapped 0 -> -1,
    1 -> +1, kept for the last few (n, B, seed) that fit in :data:`_SIGN_CACHE_BYTES` so that
    repeated tests skip the draw. Kept as signs rather than bits while they fit in half the
    budget: a test then converts them to float64 in one pass (a third of the time of converting
    bits and mapping them); larger draws (tens of thousands of queries) are kept packed eight to
    a byte, unpacked chunk by chunk, which still costs a fifth of drawing them again."""
    key = (n, n_permutations, seed)
    with _SIGN_LOCK:
        stored = _SIGN_CACHE.get(key)
    if stored is not None:
        chunks, _, packed = stored
        for c in chunks:
            yield _unpack_signs(c[1], c[0], n) if packed else c
        return
    packed = n * n_permutations > _SIGN_CACHE_BYTES // 2
    size = -(-n * n_permutations // 8) if packed else n * n_permutations
    keep = size <= _SIGN_CACHE_BYTES // 2
    chunk = max(1, 4_000_000 // n)
    out: list = []  # (rows, packed bits) or the signs, as packed says
    for bits in _bits(seed, [(min(chunk, n_permutations - done), n) for done in range(0, n_permutations, chunk)]):
        if keep and packed:
            out.append((bits.shape[0], np.packbits(bits)))
        bits *= 2
        bits -= 1
        if keep and not packed:
            out.append(bits)
        yield bits
    if keep:
        with _SIGN_LOCK:
            while _SIGN_CACHE and sum(v[1] for v in _SIGN_CACHE.values()) + size > _SIGN_CACHE_BYTES:
                del _SIGN_CACHE[next(iter(_SIGN_CACHE))]  # the oldest first
            _SIGN_CACHE[key] = out, size, packed


def _bits(seed: int, shapes: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """``rng.integers(0, 2, shape, dtype=np.int8)`` for each shape in turn, ``rng =
    default_rng(seed)``: read off the generator's raw output when that gives the same bits
    (checked once per process), in a third of the time. numpy draws each int8 in [0, 2) by
    Lemire's method from one byte of a 32-bit output — four bytes an output, the low byte first,
    a fresh output at each call — so the value is the byte's top bit; PCG64 serves a 64-bit
    output as two 32-bit ones, the low half first, the high half kept for the next call."""
    if not _raw_bits_match():
        rng = np.random.default_rng(seed)
        for shape in shapes:
            yield rng.integers(0, 2, shape, dtype=np.int8)
        return
    yield from _raw_bits(np.random.default_rng(seed).bit_generator, shapes)


def _raw_bits(bit_generator, shapes: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    carry = None  # the high half of the last 64-bit output, not used yet
    for m, n in shapes:
        words = -(-m * n // 4)  # 32-bit outputs this call uses
        parts = []
        if carry is not None and words:
            parts.append(carry)
            words -= 1
            carry = None
        if words:
            raw = bit_generator.random_raw(-(-words // 2)).view(np.uint32)  # little-endian: low half first
            if words % 2:
                raw, carry = raw[:-1], raw[-1:]
            parts.append(raw)
        data = np.concatenate(parts).view(np.uint8)[: m * n] if parts else np.empty(0, np.uint8)
        yield (data >> 7).view(np.int8).reshape(m, n)


@functools.cache
def _raw_bits_match() -> bool:
    """Whether :func:`_raw_bits` gives numpy's bits here (shapes that leave a half output over)."""
    shapes = [(3, 37), (1, 5), (5, 37), (1, 1), (2, 3), (866, 13)]
    rng = np.random.default_rng(7)
    return all(a.tobytes() == rng.integers(0, 2, shape, dtype=np.int8).tobytes()
               for a, shape in zip(_raw_bits(np.random.default_rng(7).bit_generator, shapes), shapes, strict=True))


def _unpack_signs(packed: np.ndarray, m: int, n: int) -> np.ndarray:
    """A chunk of ``m`` rows of ``n`` signs (int8) from its packed bits."""
    signs = np.unpackbits(packed, count=m * n).reshape(m, n).view(np.int8)
    signs *= 2
    signs -= 1
    return signs
