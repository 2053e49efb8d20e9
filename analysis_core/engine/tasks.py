"""The pass as a task graph (run by :mod:`.distributed`). Blocks partition the row tiles; the upper
triangle of tiles is cut into block pairs (a <= b), each computed once: thresholds per block ->
counts per block pair -> metrics per block. Every task is a pure function of its inputs."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .phases import Counts, Thresholds, phase1, phase2, phase3
from .plan import pair_tiles, positive_tiles
from .pool import Workers, single_threaded_blas
from .results import BlockResult, tile_arrays
from .setup import Setup
from .tiles import tiles_for


def block_thresholds(setup: Setup, c0: int, c1: int) -> Thresholds:
    """Task: phase 1 for the queries of row tiles [c0, c1)."""
    pos = positive_tiles(setup, c0, c1)
    with single_threaded_blas():
        return phase1(setup, tiles_for(setup), c0, c1, pos, Workers(1, len(pos), None))


@dataclass
class PairResult:
    counts: list[Counts]  # one per block of the pair that has queries, in order a, b
    hist: np.ndarray
    tile_keys: np.ndarray
    tile_sums: np.ndarray


def block_pair_counts(setup: Setup, ths: list[Thresholds], a: tuple[int, int], b: tuple[int, int]) -> PairResult:
    """Task: phase 2 over the tiles between blocks a and b, for the queries of both."""
    tiles = pair_tiles(setup, a, b)
    with single_threaded_blas():
        counts, hist, tile_sums = phase2(setup, tiles_for(setup), ths, tiles, lambda i, j: True,
                                          Workers(1, len(tiles), None))
    keys, sums = tile_arrays(tile_sums)
    return PairResult(counts, hist, keys, sums)


def pair_part(result: PairResult, k: int) -> Counts:
    """Task: one block's share of a block pair's counts (runs where the pair's result is)."""
    return result.counts[k]


def pair_summary(result: PairResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Task: what the client needs of a block pair: histogram and tile sums."""
    return result.hist, result.tile_keys, result.tile_sums


def block_metrics(setup: Setup, th: Thresholds, *parts: Counts) -> BlockResult:
    """Task: phase 3 for a block from the sum of its counts over all block pairs."""
    total = parts[0]
    for p in parts[1:]:
        total = total + p
    v, c, cut, reps = phase3(setup, th, total)
    return BlockResult(c0=th.c0, c1=th.c1, chunk_q=th.chunk_q, values=v, curves=c,
                       hist=np.zeros((2, setup.n_bins), np.int64), tile_keys=np.zeros((0, 2), np.int64),
                       tile_sums=np.zeros((0, 2)), qhist=total.qhist, qsum=total.qsum, cutoffs=cut,
                       replicates=reps)
