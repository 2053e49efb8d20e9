"""The streamed all-pairs pass: every pair's similarity computed once, never an N x N matrix.

How determinism is obtained. A BLAS matrix product does not give the same bits
for a pair when the pair sits at another position of the call or when the thread count changes
(measured on OpenBLAS: ``X @ X.T`` is not even symmetric). So:

1. items are put in a **canonical order** derived from content only: exact duplicate vectors are
   merged into one *unique vector* (so duplicates tie exactly), unique vectors are sorted by
   (smallest class code among their items, a hash of their bytes: :func:`.layout.unique_rows`);
2. similarities are computed in **fixed tiles** of ``TILE`` unique vectors, each by one
   single-threaded BLAS call; only tiles (I, J) with I <= J are computed and each unordered pair
   is taken from the upper triangle, so s(i, j) == s(j, i) by construction;
3. parallelism is over tiles (threads); what is accumulated across tiles is either an integer
   (rank counts, histogram counts) or a per-tile float sum combined with ``math.fsum`` in tile order.

Hence input row order, ``block_size`` and ``n_threads`` cannot change a single bit of the result.

The pass has three phases: (1) the tiles holding same-class pairs give every query its positive
scores; (2) all tiles are streamed, each pair is binned and each negative ranked against its
query's positive scores (counting per threshold or binary search, per query row by cost: see
:mod:`.ranking`); (3) each query's tie blocks give its metrics. Modules: :mod:`.layout`,
:mod:`.tiles`, :mod:`.setup`, :mod:`.plan`, :mod:`.pool`, :mod:`.phases` (compiled loops in
:mod:`.positives`, :mod:`.kernels`, :mod:`.binning`, :mod:`.ranking`), :mod:`.results`, :mod:`.tasks`,
:mod:`.compiled` (numba's start);
this one runs a pass in this process (or hands it to :mod:`.distributed`).
"""

from __future__ import annotations

import os

import numpy as np

from . import compiled
from .cutoff_plan import CUTOFF_MB
from .layout import PRECISIONS, gallery_positives
from .plan import block_tiles, memory_chunks
from .pool import Progress, Workers
from .results import PassResult, assemble
from .setup import KERNELS, prepare
from .tiles import TILE

__all__ = ["KERNELS", "PRECISIONS", "TILE", "PassResult", "Progress", "gallery_positives", "run_pass"]


def run_pass(X: np.ndarray, codes: np.ndarray, *, is_query: np.ndarray | None = None,
             is_gallery: np.ndarray | None = None, similarity: str = "cosine",
             ks: tuple[int, ...] = (1, 2, 4, 8), n_recall: int = 11, interpolated: bool = False,
             n_bins: int = 200, block_size: int = TILE, n_threads: int | None = None,
             memory_mb: int = 1024, progress: Progress | None = None, compute=None,
             per_query_pairs: bool = False, kernel: str = "auto", precision: str = "float32",
             hit_rates_only: bool = False, cutoff_ranks: int = 0, cutoff_mb: float = CUTOFF_MB,
             delete_groups: np.ndarray | None = None, replicate_ks: tuple[int, ...] = ()) -> PassResult:
    """Evaluate one embedding matrix: per-query tie-aware metrics, PR curves, pair histograms.

    Parameters
    ----------
    X : (N, d) embeddings. codes : (N,) integer class codes.
    is_query, is_gallery : boolean masks (default: every item is both = leave-one-out).
    block_size : rows of tiles handed to a worker at a time (scheduling only; results do not
        depend on it). n_threads : worker threads (default: all cores).
    memory_mb : budget for the queries' positive-score lists (about 16 + 16 x n_threads bytes per
        query-positive pair). Data with few, large classes exceeds it; the queries are then
        evaluated in chunks, computing the tiles shared by two chunks twice. Results do not
        depend on it.
    progress : called as ``progress(done, total, stage)`` from the calling thread.
    compute : ``None`` (this process) or a :class:`analysis_core.engine.distributed.DaskCompute`:
        blocks of queries run as Dask tasks; the results are identical.
    per_query_pairs : also return each query's (query, gallery) pair histogram and score sums
        (``query_hist``, ``query_pair_sums``; sums on a fixed-point grid of about 2^-40, exact
        to add in any order). Used for intervals of pair statistics under query sampling.
    kernel : how phase 2 ranks negatives, one of ``KERNELS`` (results are identical; a choice for
        tests and measurements): ``"auto"`` counting, cells or search per query row by cost.
    precision : ``"float32"`` (default) or ``"float64"``: the dtype every similarity is computed,
        compared and tied in. float64 keeps near-equal scores of float64 embeddings apart that
        float32 rounding would merge into ties (float32 input is upcast exactly); it costs about
        the price of a double-precision matrix product. Determinism holds in both.
    hit_rates_only : compute the Recall@K columns only (besides ``n_positives``; the tie counts
        and PR curves are NaN). A hit rate depends only on the tie block of a query's highest
        positive score, so only that block is built and ranked: the same values as a full pass
        (tested), at a fraction of the cost. Grouped Recall@K runs many such passes.
    cutoff_ranks : keep each query's tie blocks that start above the largest rank up to this one
        whose blocks fit ``cutoff_mb`` megabytes, or at least rank ``cutoffs.CUTOFF_FLOOR`` (32: at
        most 400 bytes per query) (``PassResult.cutoff_blocks``): the cutoff columns
        of any k up to that rank are then recomputed without a pass
        (:func:`~.cutoffs.with_cutoffs`). 0 (default): none kept.
    delete_groups : (N,) integers: each item's group of classes for the delete-a-group jackknife
        (0 .. G - 1; -1: never deleted). The pass then also returns, for every group g, the mean
        of every per-query mean and hit-rate column over the scored queries left when g's items are
        deleted from the queries and the gallery (``replicate_means``; at the cutoffs ``ks`` and
        ``replicate_ks``): exactly what a pass on the remaining items gives, from per-group counts
        of this pass (:mod:`.replicates`). Items of one class must share a group.
    """
    warm = compiled.start()  # numba's one-time start (~0.5 s) overlaps the layout's NumPy work
    setup = prepare(X, codes, is_query=is_query, is_gallery=is_gallery, similarity=similarity, ks=ks,
                    n_recall=n_recall, interpolated=interpolated, n_bins=n_bins, per_query_pairs=per_query_pairs,
                    kernel=kernel, precision=precision, hit_rates_only=hit_rates_only, cutoff_ranks=cutoff_ranks,
                    cutoff_mb=cutoff_mb, delete_groups=delete_groups, replicate_ks=replicate_ks)
    from .phases import compute_ahead, run_block  # numba (see .compiled)

    if compute is not None:
        return compute.run_pass(setup, memory_mb=memory_mb, block_size=block_size, progress=progress)
    n_threads = n_threads or os.cpu_count() or 1
    chunks = [c for c in memory_chunks(setup, memory_mb, n_threads) if setup.tile_has_query[c[0]:c[1]].any()]
    plans = [block_tiles(setup, c0, c1) for c0, c1 in chunks]
    # numba still loading (a process's first pass: the command line): its other core computes the
    # first block's tiles meanwhile, kept for its phases
    ahead = compute_ahead(setup, plans[0], warm) if plans else {}
    warm.join()
    workers = Workers(n_threads, sum(len(a) + len(b) for a, b in plans), progress)
    blocks = [run_block(setup, c0, c1, block_size=block_size, workers=workers, plan=p, kept=ahead if b == 0 else None)
              for b, ((c0, c1), p) in enumerate(zip(chunks, plans, strict=True))]
    if progress is not None:
        progress(workers.total, workers.total, "metrics")
    return assemble(setup, blocks)
