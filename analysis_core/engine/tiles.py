"""The reproducible similarity tile: tile (I, J), I <= J, of the unique vectors' score matrix,
each computed by one single-threaded BLAS call of a fixed shape (see :mod:`.core`), in the
vectors' dtype (float32: sgemm; float64, the ``precision="float64"`` option: dgemm)."""

from __future__ import annotations

import math
import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .setup import Setup

TILE = 512  # fixed: part of the definition of the computed scores (see module docstring)
KEEP_TILES_MB = 256  # phase-1 tiles kept for phase 2 instead of being recomputed


class Tiles:
    """Computes tile (I, J), I <= J, of the similarity matrix of the unique vectors, in their
    dtype (float32 or float64)."""

    def __init__(self, Xu: np.ndarray, similarity: str) -> None:
        self.similarity = similarity
        self.dtype = Xu.dtype
        self.n = Xu.shape[0]
        self.count = max(1, math.ceil(self.n / TILE))
        if similarity == "euclidean":
            # float64 product: squared distances by expansion lose too much in float32
            self.X = Xu.astype(np.float64, copy=False)
            self.sq = np.add.reduce(self.X * self.X, axis=1)
        else:
            self.X = Xu

    def bounds(self, i: int) -> tuple[int, int]:
        return i * TILE, min((i + 1) * TILE, self.n)

    def __call__(self, i: int, j: int, out: np.ndarray | None = None) -> np.ndarray:
        """Tile (i, j); ``out``: a buffer of the vectors' dtype and at least TILE * TILE to write it
        into (same bits: the same gemm call). Reusing buffers matters where the allocator returns big blocks
        to the system (Dask workers set MALLOC_TRIM_THRESHOLD_: a fresh tile then costs +40 %)."""
        a0, a1 = self.bounds(i)
        b0, b1 = self.bounds(j)
        A = self.X[a0:a1]
        # a copy on the diagonal: ``A @ A.T`` of one buffer goes to BLAS syrk, whose bits depend on
        # how OpenBLAS was started (measured: a Dask worker's syrk differed from this process's);
        # every tile is one gemm call of the same shape instead
        B = self.X[b0:b1].copy() if i == j else self.X[b0:b1]
        if self.similarity != "euclidean":
            if out is None:
                return A @ B.T
            return np.matmul(A, B.T, out=out[:(a1 - a0) * (b1 - b0)].reshape(a1 - a0, b1 - b0))
        G = A @ B.T
        d2 = self.sq[a0:a1, None] + self.sq[None, b0:b1] - 2.0 * G
        np.maximum(d2, 0.0, out=d2)
        return (-np.sqrt(d2)).astype(self.dtype, copy=False)


_TILES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # Setup -> its Tiles, while it lives
_TILES_LOCK = threading.Lock()


def tiles_for(setup: Setup) -> Tiles:
    """The tile computer of a setup, made once per setup object: the blocks of an in-process pass
    share it, and so do the tasks of a Dask worker, which keeps the setup scattered to it."""
    with _TILES_LOCK:
        t = _TILES.get(setup)
        if t is None:
            t = _TILES[setup] = Tiles(setup.vectors, setup.similarity)
        return t
