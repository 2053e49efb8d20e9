"""The three phases of a block of queries: (1) their positive scores from the tiles holding
same-class pairs; (2) every tile streamed, each negative ranked against its query's positive
scores and each pair binned; (3) each query's tie blocks give its metrics."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np

from . import kernels as K
from .binning import bin_tile
from .cutoff_plan import block_dtype
from .cutoffs import block_cutoffs
from .plan import bins_tile, block_tiles
from .pool import Workers, single_threaded_blas
from .positives import collect_positive_scores, distinct_thresholds, top_thresholds
from .query_metrics import query_metrics
from .ranking import rank_tile, rank_tile_runs
from .replicates import block_replicates
from .results import BlockResult, CutoffBlocks, ReplicateSums, tile_arrays
from .setup import Setup
from .tiles import KEEP_TILES_MB, TILE, Tiles, tiles_for

#: :func:`.ranking.rank_rows`' ``how`` for a kernel forcing one way (else chosen per row)
RANK_WAYS = {"count": 1, "cells": 2}
SEARCH_WAY = 3  # :func:`.ranking.rank_rows` searching every row


@dataclass
class Thresholds:
    """Phase 1 of the queries of row tiles [c0, c1): their distinct positive scores ``uvals``
    (ascending per query, ``uoff`` offsets, ``ur`` multiplicities)."""

    c0: int
    c1: int
    chunk_q: np.ndarray  # indices into setup.query_positions
    uvals: np.ndarray
    ur: np.ndarray
    uoff: np.ndarray


@dataclass
class Counts:
    """Phase 2 for one block's queries: negatives above / tied with each distinct positive score
    (``(buckets, entries)``: per bucket of the negative's class, :mod:`.replicates`; one bucket
    without replicates), and (per-query pairs) histograms and fixed-point sums. Partial counts add
    up exactly."""

    gt: np.ndarray
    eq: np.ndarray
    qhist: np.ndarray | None
    qsum: np.ndarray | None

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.gt + other.gt, self.eq + other.eq,
                      None if self.qhist is None else self.qhist + other.qhist,
                      None if self.qsum is None else self.qsum + other.qsum)


def phase1(setup: Setup, tiles: Tiles, c0: int, c1: int, pos_tiles, workers: Workers,
            kept: dict | None = None) -> Thresholds:
    """The block's queries' positive scores, from the tiles holding same-class pairs."""
    chunk_q = np.nonzero((setup.query_tile >= c0) & (setup.query_tile < c1))[0]
    slot = np.full(setup.n, -1, np.int64)
    slot[setup.query_positions[chunk_q]] = np.arange(chunk_q.size)
    toff = np.zeros(chunk_q.size + 1, np.int64)
    np.cumsum(setup.n_entries[chunk_q], out=toff[1:])
    thr = np.empty(int(toff[-1]), setup.dtype)
    # weights only where a vector holds a group of several items (else every weight is 1)
    weighted = setup.group_count.size < setup.n or bool((setup.group_count > 1).any())
    thw = np.empty(thr.size if weighted else 0, np.int64)
    fill = np.zeros(chunk_q.size, np.int64)
    fill_lock = threading.Lock()
    keep_max = KEEP_TILES_MB * 2**20 // (TILE * TILE * setup.dtype.itemsize)
    bufs = [np.empty(TILE * TILE, setup.dtype) for _ in range(workers.n)]

    def collect(w: int, ij: tuple[int, int]) -> None:
        i, j = ij
        S = None if kept is None else kept.get(ij)  # computed ahead (see compute_ahead)
        keep = S is None and kept is not None and len(kept) < keep_max  # a kept tile needs its own memory
        if S is None:
            S = tiles(i, j) if keep else tiles(i, j, out=bufs[w])
        with fill_lock:
            collect_positive_scores(S, i * TILE, j * TILE, i == j, *group_arrays(setup), slot, toff, fill, thr, thw)
            if keep and kept is not None:  # keep implies kept
                kept[ij] = S

    workers.run([[p] for p in pos_tiles], collect, "positives")
    # hit rates only: each query's top positive block, which is all they depend on (no sort, and
    # phase 2 ranks only the negatives reaching it)
    uvals, ur, uoff = (top_thresholds if setup.hit_rates_only else distinct_thresholds)(thr, thw, toff)
    return Thresholds(c0, c1, chunk_q, uvals, ur, uoff)


def phase2(setup: Setup, tiles: Tiles, ths: list[Thresholds], pair_tiles, counts_pairs, workers: Workers,
            block_size: int = TILE, kept: dict | None = None):
    """Rank every negative of the given tiles against the positive scores of the queries of
    ``ths`` (one or two blocks) and bin the pairs of the tiles ``counts_pairs(i, j)`` selects.
    Returns (one Counts per block, histogram (2, n_bins), {tile: (positive sum, negative sum)})."""
    n_threads = workers.n
    lo, inv_width = setup.score_lo, setup.n_bins / (setup.score_hi - setup.score_lo)
    first = setup.vector_offsets[:-1]
    slot = np.full(setup.n, -1, np.int64)
    qmin = np.full(setup.n, np.inf, setup.dtype)  # +inf: not a query of these blocks, never ranked
    uvals = np.concatenate([t.uvals for t in ths]) if ths else np.zeros(0, setup.dtype)
    uoff_parts = [np.zeros(1, np.int64)]
    nq = noff = 0
    for t in ths:
        slot[setup.query_positions[t.chunk_q]] = nq + np.arange(t.chunk_q.size)
        has = t.uoff[1:] > t.uoff[:-1]
        qmin[setup.query_positions[t.chunk_q[has]]] = t.uvals[t.uoff[:-1][has]]
        uoff_parts.append(t.uoff[1:] + noff)
        nq += t.chunk_q.size
        noff += t.uvals.size
    uoff = np.concatenate(uoff_parts)
    uslot = slot[first]
    uqmin = qmin[first]
    nbk = setup.n_buckets
    # int32 counts (a count of negatives: at most the items): half the memory of the bucketed counts
    acc = [(np.zeros((nbk, uvals.size), np.int32), np.zeros((nbk, uvals.size), np.int32),
            np.zeros((2, 4, setup.n_bins), np.int64)) for _ in range(n_threads)]
    cand_buf = [np.empty((TILE * TILE, 2), np.int64) for _ in range(n_threads)]
    tile_buf = [np.empty(TILE * TILE, setup.dtype) for _ in range(n_threads)]
    tile_buf_t = [np.empty(TILE * TILE, setup.dtype) for _ in range(n_threads)]
    row_buf = [np.empty(TILE, setup.dtype) for _ in range(n_threads)]
    bin_buf = [np.empty(TILE, np.int32) for _ in range(n_threads)]
    nqh = nq if setup.per_query_pairs else 0
    qacc = [(np.zeros((nqh, 2, setup.n_bins), np.int64), np.zeros((nqh, 2), np.int64)) for _ in range(n_threads)]
    tile_sums: dict[tuple[int, int], tuple[float, float]] = {}
    kept = kept if kept is not None else {}

    def count(w: int, ij: tuple[int, int]) -> None:
        i, j = ij
        S = kept.pop(ij, None)  # the same bits as recomputing it: same call, same shape
        if S is None:
            S = tiles(i, j, out=tile_buf[w])
        gt2, eq2, h = acc[w]
        pairs = counts_pairs(i, j)
        sums = np.zeros(2, np.float64)
        a0, b0 = i * TILE, j * TILE
        st = setup
        vl, vq, vg = st.vector_label, st.vector_is_query, st.vector_is_gallery
        if nbk > 1:
            count_by_bucket(st, S, i, j, pairs, gt2, eq2, h, sums, slot, uoff, uvals, qmin, uslot, uqmin, cand_buf[w],
                            qacc[w], row_buf[w], tile_buf_t[w], bin_buf[w])
            if pairs:
                tile_sums[ij] = (float(sums[0]), float(sums[1]))
            return
        gt, eq = gt2[0], eq2[0]
        if st.tile_has_shared_vector[i] or st.tile_has_shared_vector[j] or st.kernel == "general":
            K.count_tile(S, a0, b0, i == j, *group_arrays(st), slot, uoff, uvals, qmin, vl, vq, vg, uslot, uqmin,
                         gt, eq, h, lo, inv_width, sums, pairs, qacc[w][0], qacc[w][1], st.fixed_point_scale)
        else:
            search = st.kernel == "search"  # else the queries are ranked by rank_tile, after binning
            if not st.per_query_pairs and one_direction_tile(st, i, j):
                if search:
                    K.count_tile_loo(S, a0, b0, i == j, vl, uslot, uqmin, uoff, uvals, gt, eq, h, lo, inv_width, sums,
                                     cand_buf[w], pairs)
                elif pairs:
                    bin_tile(S, a0, b0, i == j, vl, h, lo, inv_width, sums, bin_buf[w])
            elif not st.per_query_pairs and not search and (nq := query_prefix_rows(st, i, j)):
                if pairs:
                    bin_tile(S[:nq], a0, b0, i == j, vl, h, lo, inv_width, sums, bin_buf[w])
            else:
                K.count_tile_roles(S, a0, b0, i == j, vl, vq, vg, uslot, uqmin, uoff, uvals, gt, eq, h, lo, inv_width,
                                   sums, cand_buf[w], pairs, qacc[w][0], qacc[w][1], st.fixed_point_scale, search)
            if not search:
                rank_tile(S, a0, b0, i == j, vl, vq, vg, uslot, uqmin, uoff, uvals, gt, eq, row_buf[w],
                            tile_buf_t[w], RANK_WAYS.get(st.kernel, 0))
        if pairs:
            tile_sums[ij] = (float(sums[0]), float(sums[1]))  # dict writes are atomic under the GIL

    rows_per_task = max(1, block_size // TILE)
    tasks: dict[int, list[tuple[int, int]]] = {}
    for i, j in pair_tiles:
        tasks.setdefault(i // rows_per_task, []).append((i, j))
    workers.run(list(tasks.values()), count, "pairs")
    gt = _total(a[0] for a in acc)
    eq = _total(a[1] for a in acc)
    qh = _total(a[0] for a in qacc) if setup.per_query_pairs else None
    qs = _total(a[1] for a in qacc) if setup.per_query_pairs else None
    out, q0, v0 = [], 0, 0
    for t in ths:
        q1, v1 = q0 + t.chunk_q.size, v0 + t.uvals.size
        out.append(Counts(gt[:, v0:v1], eq[:, v0:v1], None if qh is None else qh[q0:q1],
                          None if qs is None else qs[q0:q1]))
        q0, v0 = q1, v1
    return out, _total(a[2] for a in acc).sum(axis=1), tile_sums


def count_by_bucket(st: Setup, S: np.ndarray, i: int, j: int, pairs: bool, gt2: np.ndarray, eq2: np.ndarray,
                    h: np.ndarray, sums: np.ndarray, slot, uoff, uvals, qmin, uslot, uqmin, cand, qacc, row_buf,
                    tile_buf_t, bin_buf) -> None:
    """Phase 2 of tile (i, j) for a pass with delete-a-group replicates (:mod:`.replicates`): its
    pairs binned once, then its negatives ranked once per bucket of its gallery items, each time
    with only that bucket's items in the gallery, into that bucket's counts."""
    a0, b0 = i * TILE, j * TILE
    vl, vq, vg = st.vector_label, st.vector_is_query, st.vector_is_gallery
    assert st.tile_buckets is not None and st.gallery_by_bucket is not None and st.group_gallery_by_bucket is not None
    qh, qs = qacc
    if st.tile_has_shared_vector[i] or st.tile_has_shared_vector[j] or st.kernel == "general":
        buckets = np.nonzero(st.tile_buckets[i] | st.tile_buckets[j])[0]
        gptr, glab, gq, gg, gn, gitem = group_arrays(st)
        if pairs or st.per_query_pairs:  # binning only: no query reaches a score (+inf)
            never = np.full(st.n, np.inf, st.dtype)
            K.count_tile(S, a0, b0, i == j, gptr, glab, gq, gg, gn, gitem, slot, uoff, uvals, never, vl, vq, vg, uslot,
                         never[:uqmin.shape[0]], gt2[0], eq2[0], h, st.score_lo,
                         st.n_bins / (st.score_hi - st.score_lo), sums, pairs, qh, qs, st.fixed_point_scale)
        no_qh, no_qs, no_sums = qh[:0], qs[:0], np.zeros(2)
        for b in buckets:
            K.count_tile(S, a0, b0, i == j, gptr, glab, gq, st.group_gallery_by_bucket[b], gn, gitem, slot, uoff, uvals,
                         qmin, vl, vq, st.gallery_by_bucket[b], uslot, uqmin, gt2[b], eq2[b], h, st.score_lo, 1.0,
                         no_sums, False, no_qh, no_qs, st.fixed_point_scale)
        return
    lo, inv_width = st.score_lo, st.n_bins / (st.score_hi - st.score_lo)
    if not st.per_query_pairs and one_direction_tile(st, i, j):
        if pairs:
            bin_tile(S, a0, b0, i == j, vl, h, lo, inv_width, sums, bin_buf)
    elif not st.per_query_pairs and (nq := query_prefix_rows(st, i, j)):
        if pairs:
            bin_tile(S[:nq], a0, b0, i == j, vl, h, lo, inv_width, sums, bin_buf)
    elif pairs or st.per_query_pairs:
        K.count_tile_roles(S, a0, b0, i == j, vl, vq, vg, uslot, uqmin, uoff, uvals, gt2[0], eq2[0], h, lo, inv_width,
                           sums, cand, pairs, qh, qs, st.fixed_point_scale, False)
    way = RANK_WAYS.get(st.kernel, 0) if st.kernel != "search" else SEARCH_WAY
    assert st.bucket_runs is not None and st.bucket_run_offsets is not None
    off = st.bucket_run_offsets
    rank_tile_runs(S, a0, b0, i == j, vl, vq, vg, uslot, uqmin, uoff, uvals, gt2, eq2, row_buf, tile_buf_t, way,
                   st.bucket_runs[off[j]:off[j + 1]], st.bucket_runs[off[i]:off[i + 1]])


def group_arrays(setup: Setup) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The item groups as the kernels take them: (offsets per vector, class code, query flag,
    gallery flag, item count, first item position) (see :class:`~.setup.Setup`)."""
    return (setup.group_offsets, setup.group_label, setup.group_is_query, setup.group_is_gallery,
            setup.group_count, setup.group_item)


def _total(arrays: Iterable[np.ndarray]) -> np.ndarray:
    """The elementwise sum of the per-thread accumulators (there is one per worker, at least one)."""
    return cast(np.ndarray, sum(arrays))  # sum() of no arrays would be 0: never here


def one_direction_tile(setup: Setup, i: int, j: int) -> bool:
    """Whether every pair of tile (i, j) is a (query, gallery) pair and every query in it ranks all of
    the other tile's items: leave-one-out tiles, and a query-only tile against a gallery-only one
    (a query/gallery split). Such tiles need no role checks (:func:`.kernels.count_tile_loo`,
    :func:`.binning.bin_tile`)."""
    aq, ag, hq = setup.tile_all_query, setup.tile_all_gallery, setup.tile_has_query
    every_pair = (aq[i] and ag[j]) or (ag[i] and aq[j])
    return bool(every_pair and (ag[j] or not hq[i]) and (ag[i] or not hq[j]))


def query_prefix_rows(setup: Setup, i: int, j: int) -> int:
    """The number q of query rows of tile (i, j) when its pairs are exactly those of its first q
    rows with every column after the row (a diagonal tile) or with every column, else 0. Rows of
    queries come first in every tile (the canonical order puts query vectors first), so this holds
    when the columns are all in the gallery and hold no query (or the tile is diagonal and all in
    the gallery): the tile of a query sample's last queries and its first other items against the
    gallery, which :func:`.binning.bin_tile` then bins on those rows, without role checks."""
    ag, hq = setup.tile_all_gallery, setup.tile_has_query
    if not hq[i] or not ag[j] or (hq[j] if i != j else False):
        return 0
    a0 = i * TILE
    flags = setup.vector_is_query[a0:min(a0 + TILE, setup.vectors.shape[0])]
    q = int(np.count_nonzero(flags))
    return q if flags[:q].all() else 0


def phase3(setup: Setup, th: Thresholds, counts: Counts,
           n_threads: int = 1) -> tuple[np.ndarray, np.ndarray, CutoffBlocks | None, ReplicateSums | None]:
    """Per-query metrics of a block from its positive scores and its summed counts, the leading
    tie blocks kept for new cutoffs (:mod:`.cutoffs`; None when the pass keeps none) and the
    delete-a-group replicate sums (:mod:`.replicates`; None without groups)."""
    v = np.empty((th.chunk_q.size, len(setup.columns)), np.float64)
    c = np.empty((th.chunk_q.size, setup.n_recall), np.float64)
    gt, eq = counts.gt.sum(axis=0, dtype=np.int64), counts.eq.sum(axis=0, dtype=np.int64)
    query_metrics(th.uoff, th.uvals, th.ur, gt, eq, setup.metric_kernels, setup.metric_cutoffs,
                  setup.n_recall, setup.interpolated, v, c)
    if setup.hit_rates_only:
        # the tie blocks were the top one only: R from the setup, what needs every block undefined
        v[:, 0] = setup.n_positives[th.chunk_q]
        v[:, 1 + setup.metric_kernels.size:] = np.nan
        c[:] = np.nan
    kept = None
    if setup.cutoff_ranks:
        kept = block_cutoffs(th.uoff, th.ur, gt, eq, setup.cutoff_ranks, block_dtype(setup.n))
    reps = None if setup.n_buckets == 1 else block_replicates(setup, th.uoff, th.ur, counts.gt, counts.eq, th.chunk_q,
                                                              n_threads)
    return v, c, kept, reps


def compute_ahead(setup: Setup, plan, busy: threading.Thread) -> dict[tuple[int, int], np.ndarray]:
    """Tiles of a block's plan (``(positive tiles, pair tiles)``, :func:`.plan.block_tiles`)
    computed in this thread while ``busy`` runs (numba's start, which needs one core), the
    positive tiles first, within the kept-tile budget: ``{tile: scores}`` for :func:`run_block`'s
    ``kept``. Same call as the phases' (one single-threaded gemm): the same bits."""
    kept: dict[tuple[int, int], np.ndarray] = {}
    keep_max = KEEP_TILES_MB * 2**20 // (TILE * TILE * setup.dtype.itemsize)
    todo = list(dict.fromkeys(itertools.chain(*plan)))[:keep_max]
    if not todo or not busy.is_alive():
        return kept
    tiles = tiles_for(setup)
    with single_threaded_blas():
        for ij in todo:
            kept[ij] = tiles(*ij)
            if not busy.is_alive():
                break
    return kept


def run_block(setup: Setup, c0: int, c1: int, *, n_threads: int = 1, block_size: int = TILE,
              workers: Workers | None = None, plan=None, kept: dict | None = None) -> BlockResult:
    """The three phases for the queries of row tiles [c0, c1) against the whole gallery.
    ``kept``: tiles already computed (:func:`compute_ahead`), used instead of recomputing them."""
    tiles = tiles_for(setup)
    pos_tiles, pair_tiles = plan if plan is not None else block_tiles(setup, c0, c1)
    if workers is None:
        workers = Workers(n_threads, len(pos_tiles) + len(pair_tiles), None)
    kept = {} if kept is None else kept  # phase-1 tiles reused by phase 2
    with single_threaded_blas():
        th = phase1(setup, tiles, c0, c1, pos_tiles, workers, kept)
        (counts,), hist, tile_sums = phase2(setup, tiles, [th], pair_tiles,
                                             lambda i, j: bins_tile(setup, i, j, c0, c1), workers, block_size, kept)
        v, c, cut, reps = phase3(setup, th, counts, workers.n)
    keys, sums = tile_arrays(tile_sums)
    return BlockResult(c0=c0, c1=c1, chunk_q=th.chunk_q, values=v, curves=c, hist=hist, tile_keys=keys,
                       tile_sums=sums, qhist=counts.qhist, qsum=counts.qsum, cutoffs=cut, replicates=reps)
