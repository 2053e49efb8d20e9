"""Which tiles a block of queries needs, and how the queries are cut into blocks: in-process
chunks under a memory budget, and the Dask partition into blocks and block pairs."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .tiles import TILE

if TYPE_CHECKING:
    from .setup import Setup


def positive_tile_pairs(item_u: np.ndarray, codes_c: np.ndarray) -> np.ndarray:
    """Tile pairs (I <= J) that hold at least one same-class pair: (P, 2), sorted by (I, J).

    Each class's distinct tiles, sorted (one integer key per (class, tile)); the pairs are those
    of tiles d apart in that list for d = 0, 1, ...: one vector step per d, where d only reaches
    the largest number of tiles a class spans."""
    tiles = np.asarray(item_u, np.int64) // TILE
    if tiles.size == 0:
        return np.zeros((0, 2), np.int64)
    n_tiles = int(tiles.max()) + 1
    ct = np.unique(np.asarray(codes_c, np.int64) * n_tiles + tiles)  # by class, then tile
    cls, t = ct // n_tiles, ct % n_tiles
    keys = [t * n_tiles + t]
    for d in range(1, ct.size):
        same = cls[d:] == cls[:-d]
        if not same.any():  # classes' tiles are consecutive in ct: no pair d apart, none further
            break
        keys.append(t[:-d][same] * n_tiles + t[d:][same])
    pairs = np.unique(np.concatenate(keys))
    return np.stack([pairs // n_tiles, pairs % n_tiles], axis=1)


def _chunks(tile_entries: np.ndarray, max_entries: int) -> list[tuple[int, int]]:
    """Consecutive tile-row ranges whose queries' positive lists fit in ``max_entries``."""
    out = []
    c0 = 0
    acc = 0
    for t, e in enumerate(tile_entries.tolist()):
        if t > c0 and acc + e > max_entries:
            out.append((c0, t))
            c0, acc = t, 0
        acc += e
    out.append((c0, len(tile_entries)))
    return out


def memory_chunks(setup: Setup, memory_mb: int, n_threads: int) -> list[tuple[int, int]]:
    """Row-tile ranges whose queries' positive lists fit in the memory budget (their counts are
    held per thread and per bucket of delete-a-group replicates, :mod:`.replicates`)."""
    # per entry: its score and multiplicity (16 bytes), and its int32 counts above and tied (8
    # bytes) per thread and for their sum, per bucket
    max_entries = max(1, memory_mb * 2**20 // (16 + 8 * (n_threads + 1) * setup.n_buckets))
    return _chunks(tile_entries(setup), max_entries)


def pair_tiles(setup: Setup, a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """Tiles (i, j), i <= j, with i in block a and j in block b (a before or equal to b) that
    hold a query."""
    out = []
    for i in range(*a):
        for j in range(max(i, b[0]), b[1]):
            if holds_pairs(setup, i, j):
                out.append((i, j))
    return out


def holds_pairs(setup: Setup, i, j):
    """Whether tile (i, j) can hold a (query, gallery) pair: a query in one of its tiles and a
    gallery item in the other (vectorised over arrays of i and j). Other tiles rank nothing and
    bin nothing, so they are never computed (gallery x gallery, and query-only x query-only)."""
    hq, hg = setup.tile_has_query, setup.tile_has_gallery
    return (hq[i] & hg[j]) | (hg[i] & hq[j])


def partition(setup: Setup, n_blocks: int, memory_mb: int) -> list[tuple[int, int]]:
    """Row-tile ranges covering every tile: about ``n_blocks`` of equal size, cut further where a
    block's queries' positive lists would exceed the memory budget (2 blocks are held at once)."""
    T = setup.n_tiles
    n_blocks = max(1, min(n_blocks, T))
    cuts = {(b * T) // n_blocks for b in range(n_blocks + 1)}
    for c0, c1 in memory_chunks(setup, max(1, memory_mb // 2), 1):
        cuts.update((c0, c1))
    bounds = sorted(cuts)
    return [(x, y) for x, y in zip(bounds[:-1], bounds[1:], strict=True) if y > x]


def tile_entries(setup: Setup) -> np.ndarray:
    """Positive-list entries of the queries of each row tile (sum of R when every vector is one item;
    a group of duplicates is one weighted entry, :attr:`~.setup.Setup.n_entries`)."""
    return np.bincount(setup.query_tile, weights=setup.n_entries, minlength=setup.n_tiles)


def _query_tiles(setup: Setup, c0: int, c1: int) -> np.ndarray:
    inc = np.zeros(setup.n_tiles, bool)
    inc[c0:c1] = setup.tile_has_query[c0:c1]
    return inc


def block_tiles(setup: Setup, c0: int, c1: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """Tiles needed by the queries of row tiles [c0, c1): (positive tiles, pair tiles).

    A tile is needed when its row or column tile holds a query of the block and the other one a
    gallery item (:func:`holds_pairs`).
    """
    T = setup.n_tiles
    inc = _query_tiles(setup, c0, c1)
    cols = np.nonzero(inc)[0]
    pairs: list[tuple[int, int]] = []
    for i in range(T):
        js = np.arange(i, T) if inc[i] else cols[cols >= i]
        js = js[holds_pairs(setup, i, js)]
        pairs.extend((i, int(j)) for j in js)
    return positive_tiles(setup, c0, c1), pairs


def positive_tiles(setup: Setup, c0: int, c1: int) -> list[tuple[int, int]]:
    """Tiles holding a same-class pair of a query of row tiles [c0, c1) (phase 1)."""
    inc = _query_tiles(setup, c0, c1)
    pp = setup.same_class_tiles
    if not pp.size:
        return []
    keep = (inc[pp[:, 0]] | inc[pp[:, 1]]) & holds_pairs(setup, pp[:, 0], pp[:, 1])
    return [(int(i), int(j)) for i, j in pp[keep]]


def bins_tile(setup: Setup, i: int, j: int, c0: int, c1: int) -> bool:
    """Whether block [c0, c1) bins tile (i, j)'s pairs: each tile is binned by exactly one block,
    the one holding its row tile (its column tile when the row tile has no query)."""
    owner = i if setup.tile_has_query[i] else j
    return c0 <= owner < c1
