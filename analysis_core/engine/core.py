"""The streamed all-pairs pass: every pair's similarity computed once, never an N x N matrix.

How determinism is obtained (SPEC section 2). A BLAS matrix product does not give the same bits
for a pair when the pair sits at another position of the call or when the thread count changes
(measured on OpenBLAS: ``X @ X.T`` is not even symmetric). So:

1. items are put in a **canonical order** derived from content only: exact duplicate vectors are
   merged into one *unique vector* (so duplicates tie exactly), unique vectors are sorted by
   (smallest class code among their items, bytes);
2. similarities are computed in **fixed tiles** of ``TILE`` unique vectors, each by one
   single-threaded BLAS call; only tiles (I, J) with I <= J are computed and each unordered pair
   is taken from the upper triangle, so s(i, j) == s(j, i) by construction;
3. parallelism is over tiles (threads); what is accumulated across tiles is either an integer
   (rank counts, histogram counts) or a per-tile float sum combined with ``math.fsum`` in tile order.

Hence input row order, ``block_size`` and ``n_threads`` cannot change a single bit of the result.

The pass has three phases: (1) the tiles holding same-class pairs give every query its positive
scores; (2) all tiles are streamed, each negative is ranked against its query's positive scores
(binary search) and each pair is binned; (3) each query's tie blocks give its metrics.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from . import kernels as K

TILE = 512  # fixed: part of the definition of the computed scores (see module docstring)
KEEP_TILES_MB = 256  # phase-1 tiles kept for phase 2 instead of being recomputed
Progress = Callable[[int, int, str], None]

#: columns of the per-query output array, in order (before the P@k / Recall@k columns)
BASE_COLUMNS = ("n_positives", "ap", "ap_lower", "ap_upper", "map_at_r", "r_precision", "rr",
                "n_mixed_tie_blocks", "n_tied_negatives")


@dataclass(frozen=True)
class PassResult:
    """Everything one pass produces for one method.

    ``values[s]`` are the per-query metrics of query ``query_items[s]`` (an input row index),
    columns ``BASE_COLUMNS`` then ``precision_at_<k>`` and ``recall_at_<k>``; rows of lone
    queries (no positive in the gallery) are NaN except ``n_positives = 0``.
    ``pr_curves[s]`` is that query's precision on the recall grid ``recall_grid``.
    """

    query_items: np.ndarray
    values: np.ndarray
    columns: tuple[str, ...]
    pr_curves: np.ndarray
    recall_grid: np.ndarray
    hist_edges: np.ndarray
    hist_pos: np.ndarray
    hist_neg: np.ndarray
    sum_pos: float
    sum_neg: float
    ks: tuple[int, ...]
    n_unique_vectors: int

    @property
    def n_pos_pairs(self) -> int:
        return int(self.hist_pos.sum())

    @property
    def n_neg_pairs(self) -> int:
        return int(self.hist_neg.sum())

    @property
    def mean_pos_similarity(self) -> float:
        return self.sum_pos / self.n_pos_pairs if self.n_pos_pairs else float("nan")

    @property
    def mean_neg_similarity(self) -> float:
        return self.sum_neg / self.n_neg_pairs if self.n_neg_pairs else float("nan")


def _prepare_vectors(X: np.ndarray, similarity: str) -> np.ndarray:
    X64 = np.asarray(X, dtype=np.float64)
    if similarity == "cosine":
        norms = np.sqrt(np.add.reduce(X64 * X64, axis=1))
        X64 = X64 / norms[:, None]
    # + 0.0 turns -0.0 into 0.0 so equal vectors have equal bytes
    return np.ascontiguousarray(X64.astype(np.float32) + np.float32(0.0))


def _canonical_order(Xf: np.ndarray, codes: np.ndarray):
    """Unique vectors in canonical order, and the items sorted to match."""
    n, d = Xf.shape
    rows = Xf.view(np.dtype((np.void, Xf.dtype.itemsize * d))).ravel()
    _, first, inv = np.unique(rows, return_index=True, return_inverse=True)
    inv = inv.ravel()
    n_u = first.shape[0]
    min_code = np.full(n_u, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(min_code, inv, codes)
    u_order = np.lexsort((np.arange(n_u), min_code))  # bytes order breaks ties: content only
    u_rank = np.empty(n_u, np.int64)
    u_rank[u_order] = np.arange(n_u)
    item_u = u_rank[inv]
    items = np.lexsort((np.arange(n), codes, item_u))
    uptr = np.zeros(n_u + 1, np.int64)
    np.cumsum(np.bincount(item_u, minlength=n_u), out=uptr[1:])
    Xu = np.ascontiguousarray(Xf[first[u_order]])
    return Xu, items, item_u[items], uptr


def _score_range(Xu: np.ndarray, similarity: str) -> tuple[float, float]:
    if similarity == "cosine":
        return -1.0, 1.0
    m = float(np.sqrt(np.max(np.add.reduce(Xu.astype(np.float64) ** 2, axis=1)))) if Xu.size else 0.0
    if m == 0.0:
        return -1.0, 1.0
    return (-m * m, m * m) if similarity == "dot" else (-2.0 * m, 0.0)


class _Tiles:
    """Computes tile (I, J), I <= J, of the similarity matrix of the unique vectors."""

    def __init__(self, Xu: np.ndarray, similarity: str) -> None:
        self.similarity = similarity
        self.n = Xu.shape[0]
        self.count = max(1, math.ceil(self.n / TILE))
        if similarity == "euclidean":
            # float64 product: squared distances by expansion lose too much in float32
            self.X = Xu.astype(np.float64)
            self.sq = np.add.reduce(self.X * self.X, axis=1)
        else:
            self.X = Xu

    def bounds(self, i: int) -> tuple[int, int]:
        return i * TILE, min((i + 1) * TILE, self.n)

    def __call__(self, i: int, j: int) -> np.ndarray:
        a0, a1 = self.bounds(i)
        b0, b1 = self.bounds(j)
        A = self.X[a0:a1]
        B = self.X[b0:b1]
        G = A @ B.T
        if self.similarity != "euclidean":
            return G
        d2 = self.sq[a0:a1, None] + self.sq[None, b0:b1] - 2.0 * G
        np.maximum(d2, 0.0, out=d2)
        return (-np.sqrt(d2)).astype(np.float32)


def _positive_tile_pairs(item_u: np.ndarray, codes_c: np.ndarray) -> list[tuple[int, int]]:
    """Tile pairs (I <= J) that hold at least one same-class pair."""
    tiles = item_u // TILE
    pairs: set[tuple[int, int]] = set()
    ct = np.unique(np.stack([codes_c, tiles], axis=1), axis=0)
    splits = np.nonzero(np.diff(ct[:, 0]))[0] + 1
    for group in np.split(ct[:, 1], splits):
        g = group.tolist()
        for x in range(len(g)):
            for y in range(x, len(g)):
                pairs.add((g[x], g[y]))
    return sorted(pairs)


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


class _Workers:
    """Runs lists of tile tasks on ``n`` threads; progress is reported from the caller's thread
    only (UI toolkits such as Streamlit refuse updates from other threads)."""

    def __init__(self, n: int, total: int, progress: Progress | None) -> None:
        self.n = n
        self.total = total
        self.progress = progress
        self.done = 0
        self.lock = threading.Lock()

    def tick(self) -> None:
        with self.lock:
            self.done += 1

    def run(self, tasks: list[list[tuple[int, int]]], work: Callable, stage: str) -> None:
        q: queue.Queue = queue.Queue()
        for t in tasks:
            q.put(t)
        errors: list[BaseException] = []

        def loop(w: int) -> None:
            try:
                while True:
                    try:
                        task = q.get_nowait()
                    except queue.Empty:
                        return
                    for ij in task:
                        work(w, ij)
                        self.tick()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(self.n)]
        for th in threads:
            th.start()
        reported = -1
        for th in threads:
            while th.is_alive():
                th.join(timeout=0.1)
                if self.progress is not None and self.done != reported:
                    reported = self.done
                    self.progress(reported, self.total, stage)
        if errors:
            raise errors[0]


def run_pass(X: np.ndarray, codes: np.ndarray, *, is_query: np.ndarray | None = None,
             is_gallery: np.ndarray | None = None, similarity: str = "cosine",
             ks: tuple[int, ...] = (1, 2, 4, 8), n_recall: int = 11, interpolated: bool = False,
             n_bins: int = 200, block_size: int = TILE, n_threads: int | None = None,
             memory_mb: int = 1024, progress: Progress | None = None) -> PassResult:
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
    """
    n = X.shape[0]
    codes = np.asarray(codes, np.int64)
    isq = np.ones(n, bool) if is_query is None else np.asarray(is_query, bool)
    isg = np.ones(n, bool) if is_gallery is None else np.asarray(is_gallery, bool)
    n_threads = n_threads or os.cpu_count() or 1
    ks_arr = np.asarray(sorted(set(int(k) for k in ks)), np.int64)
    if ks_arr.size == 0 or ks_arr[0] < 1:
        raise ValueError("every k must be a positive integer")

    Xf = _prepare_vectors(X, similarity)
    Xu, items, item_u, uptr = _canonical_order(Xf, codes)
    lab = codes[items]
    q_c = isq[items]
    g_c = isg[items]
    q_pos = np.nonzero(q_c)[0]
    # R of each query = same-class gallery items other than itself
    gal_per_class = np.bincount(lab[g_c], minlength=int(codes.max()) + 1 if n else 0)
    R = gal_per_class[lab[q_pos]] - g_c[q_pos].astype(np.int64)

    tiles = _Tiles(Xu, similarity)
    lo, hi = _score_range(Xu, similarity)
    inv_width = n_bins / (hi - lo)
    first = uptr[:-1]
    ulab = np.where(np.diff(uptr) == 1, lab[first], -1)  # -1: vector shared by several items
    uq = q_c[first].astype(np.uint8)
    ug = g_c[first].astype(np.uint8)
    loo = bool(q_c.all() and g_c.all())
    tile_shared = [bool((ulab[slice(*tiles.bounds(t))] < 0).any()) for t in range(tiles.count)]

    q_tile = item_u[q_pos] // TILE
    max_entries = max(1, memory_mb * 2**20 // (16 + 16 * n_threads))
    chunks = _chunks(np.bincount(q_tile, weights=R, minlength=tiles.count), max_entries)
    pos_pairs = _positive_tile_pairs(item_u, lab)
    in_c = [(lambda t, c0=c0, c1=c1: c0 <= t < c1) for c0, c1 in chunks]
    plan = [([p for p in pos_pairs if f(p[0]) or f(p[1])],
             [(i, j) for i in range(tiles.count) for j in range(i, tiles.count) if f(i) or f(j)]) for f in in_c]
    workers = _Workers(n_threads, sum(len(a) + len(b) for a, b in plan), progress)

    columns = BASE_COLUMNS + tuple(f"precision_at_{k}" for k in ks_arr) + tuple(f"recall_at_{k}" for k in ks_arr)
    values = np.empty((q_pos.size, len(columns)), np.float64)
    curves = np.empty((q_pos.size, n_recall), np.float64)
    hist = np.zeros((2, 4, n_bins), np.int64)
    tile_sums: dict[tuple[int, int], tuple[float, float]] = {}
    cand_buf = [np.empty((TILE * TILE, 2), np.int64) for _ in range(n_threads)]

    with threadpool_limits(limits=1, user_api="blas"):
        for (c0, c1), (pos_tiles, pair_tiles) in zip(chunks, plan, strict=True):
            chunk_q = np.nonzero((q_tile >= c0) & (q_tile < c1))[0]  # indices into q_pos
            slot = np.full(n, -1, np.int64)
            slot[q_pos[chunk_q]] = np.arange(chunk_q.size)
            toff = np.zeros(chunk_q.size + 1, np.int64)
            np.cumsum(R[chunk_q], out=toff[1:])

            # phase 1: the chunk's queries' positive scores
            thr = np.empty(int(toff[-1]), np.float32)
            fill = np.zeros(chunk_q.size, np.int64)
            fill_lock = threading.Lock()

            kept: dict[tuple[int, int], np.ndarray] = {}  # phase-1 tiles reused by phase 2
            keep_max = KEEP_TILES_MB * 2**20 // (TILE * TILE * 4)

            def collect(w: int, ij: tuple[int, int], slot=slot, toff=toff, fill=fill, thr=thr,
                        fill_lock=fill_lock, kept=kept, keep_max=keep_max) -> None:
                i, j = ij
                S = tiles(i, j)
                with fill_lock:
                    K.collect_positive_scores(S, i * TILE, j * TILE, i == j, uptr, lab, q_c, g_c, slot, toff,
                                              fill, thr)
                    if len(kept) < keep_max:
                        kept[ij] = S

            workers.run([[p] for p in pos_tiles], collect, "positives")
            uvals, ur, uoff = K.distinct_thresholds(thr, toff)
            del thr
            # lowest positive score of each item's query; +inf outside the chunk: never ranked
            qmin = np.full(n, np.inf, np.float32)
            has = uoff[1:] > uoff[:-1]
            qmin[q_pos[chunk_q[has]]] = uvals[uoff[:-1][has]]
            uslot = slot[first]
            uqmin = qmin[first]

            # phase 2: rank negatives against them; bin each pair once (in its row tile's chunk)
            acc = [(np.zeros(uvals.size, np.int64), np.zeros(uvals.size, np.int64), np.zeros_like(hist))
                   for _ in range(n_threads)]

            def count(w: int, ij: tuple[int, int], c0=c0, c1=c1, slot=slot, uoff=uoff, uvals=uvals, qmin=qmin,
                      uslot=uslot, uqmin=uqmin, acc=acc, kept=kept) -> None:
                i, j = ij
                S = kept.pop(ij, None)  # the same bits as recomputing it: same call, same shape
                if S is None:
                    S = tiles(i, j)
                gt, eq, h = acc[w]
                pairs = c0 <= i < c1
                sums = np.zeros(2, np.float64)
                if loo and not tile_shared[i] and not tile_shared[j]:
                    K.count_tile_loo(S, i * TILE, j * TILE, i == j, ulab, uslot, uqmin, uoff, uvals, gt, eq, h, lo,
                                     inv_width, sums, cand_buf[w], pairs)
                else:
                    K.count_tile(S, i * TILE, j * TILE, i == j, uptr, lab, q_c, g_c, slot, uoff, uvals, qmin, ulab,
                                 uq, ug, uslot, uqmin, gt, eq, h, lo, inv_width, sums, pairs)
                if pairs:
                    tile_sums[ij] = (float(sums[0]), float(sums[1]))  # dict writes are atomic under the GIL

            rows_per_task = max(1, block_size // TILE)
            tasks: dict[int, list[tuple[int, int]]] = {}
            for i, j in pair_tiles:
                tasks.setdefault(i // rows_per_task, []).append((i, j))
            workers.run(list(tasks.values()), count, "pairs")

            # phase 3: the chunk's per-query metrics
            gt = sum(a[0] for a in acc)
            eq = sum(a[1] for a in acc)
            hist += sum(a[2] for a in acc)
            v = np.empty((chunk_q.size, len(columns)), np.float64)
            c = np.empty((chunk_q.size, n_recall), np.float64)
            K.query_metrics(uoff, uvals, ur, gt, eq, ks_arr, n_recall, interpolated, v, c)
            values[chunk_q] = v
            curves[chunk_q] = c

    h = hist.sum(axis=1)
    # tile sums combined exactly (fsum), in canonical tile order: independent of scheduling
    keys = sorted(tile_sums)
    if progress is not None:
        progress(workers.total, workers.total, "metrics")
    return PassResult(
        query_items=items[q_pos], values=values, columns=columns, pr_curves=curves,
        recall_grid=np.arange(n_recall) / (n_recall - 1), hist_edges=np.linspace(lo, hi, n_bins + 1),
        hist_pos=h[1], hist_neg=h[0], sum_pos=math.fsum(tile_sums[k][0] for k in keys),
        sum_neg=math.fsum(tile_sums[k][1] for k in keys), ks=tuple(int(k) for k in ks_arr),
        n_unique_vectors=int(Xu.shape[0]),
    )
