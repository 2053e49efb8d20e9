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

import hashlib
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
#: how phase 2 ranks negatives (results are identical; tests pin each against "general"):
#: "auto" counts per threshold or searches per query row, by cost; "count" always counts;
#: "search" binary-searches every negative reaching a positive; "general" sends every tile through
#: the kernel for duplicate vectors
KERNELS = ("auto", "count", "search", "general")

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
    #: with ``per_query_pairs``: each query's (query, gallery item) pair histogram
    #: ``[s, negative/positive, bin]`` and score sums ``[s, negative/positive]``
    query_hist: np.ndarray | None = None
    query_pair_sums: np.ndarray | None = None

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


def _canonical_order(Xf: np.ndarray, codes: np.ndarray, isq: np.ndarray):
    """Unique vectors in canonical order, and the items sorted to match.

    Order: vectors of queries first (so a few queries against a large gallery touch only the
    first row tiles), then by smallest class code, then by bytes: content and roles only."""
    n, d = Xf.shape
    rows = Xf.view(np.dtype((np.void, Xf.dtype.itemsize * d))).ravel()
    _, first, inv = np.unique(rows, return_index=True, return_inverse=True)
    inv = inv.ravel()
    n_u = first.shape[0]
    min_code = np.full(n_u, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(min_code, inv, codes)
    any_q = np.zeros(n_u, np.int64)
    np.maximum.at(any_q, inv, isq.astype(np.int64))
    u_order = np.lexsort((np.arange(n_u), min_code, 1 - any_q))  # bytes order breaks ties: content only
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

    def __call__(self, i: int, j: int, out: np.ndarray | None = None) -> np.ndarray:
        """Tile (i, j); ``out``: a float32 buffer of at least TILE * TILE to write it into (same
        bits: the same sgemm call). Reusing buffers matters where the allocator returns big blocks
        to the system (Dask workers set MALLOC_TRIM_THRESHOLD_: a fresh tile then costs +40 %)."""
        a0, a1 = self.bounds(i)
        b0, b1 = self.bounds(j)
        A = self.X[a0:a1]
        # a copy on the diagonal: ``A @ A.T`` of one buffer goes to BLAS syrk, whose bits depend on
        # how OpenBLAS was started (measured: a Dask worker's syrk differed from this process's);
        # every tile is one sgemm call of the same shape instead
        B = self.X[b0:b1].copy() if i == j else self.X[b0:b1]
        if self.similarity != "euclidean":
            if out is None:
                return A @ B.T
            return np.matmul(A, B.T, out=out[:(a1 - a0) * (b1 - b0)].reshape(a1 - a0, b1 - b0))
        G = A @ B.T
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


@dataclass
class Setup:
    """Everything a block of queries needs, built once per pass (and sent once to each Dask worker).

    Unique vectors ``Xu`` in canonical order, the item layout (``uptr``, ``lab``, flags), the
    queries (``q_pos`` positions, ``R`` positives, ``q_tile`` row tile), the histogram range and
    the tile bookkeeping. ``token`` identifies the setup (workers cache its tile computer).
    """

    Xu: np.ndarray
    similarity: str
    items: np.ndarray
    item_u: np.ndarray
    uptr: np.ndarray
    lab: np.ndarray
    q_c: np.ndarray
    g_c: np.ndarray
    q_pos: np.ndarray
    R: np.ndarray
    q_tile: np.ndarray
    lo: float
    hi: float
    n_bins: int
    ulab: np.ndarray
    uq: np.ndarray
    ug: np.ndarray
    loo: bool
    tile_shared: np.ndarray
    tile_has_query: np.ndarray
    pos_pairs: np.ndarray  # (P, 2) tile pairs I <= J holding a same-class pair
    ks: np.ndarray
    n_recall: int
    interpolated: bool
    columns: tuple[str, ...]
    token: str
    per_query: bool = False  # per-query pair histograms and sums (query sampling)
    fx: float = 1.0  # fixed-point steps per unit score for the per-query sums
    kernel: str = "auto"  # see KERNELS

    @property
    def n(self) -> int:
        return int(self.lab.shape[0])

    @property
    def n_tiles(self) -> int:
        return max(1, math.ceil(self.Xu.shape[0] / TILE))

    def tile_entries(self) -> np.ndarray:
        """Positive-list entries (sum of R) of the queries of each row tile."""
        return np.bincount(self.q_tile, weights=self.R, minlength=self.n_tiles)

    def plan(self, c0: int, c1: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
        """Tiles needed by the queries of row tiles [c0, c1): (positive tiles, pair tiles).

        A tile is needed when its row or column tile holds a query of the block. Tiles holding no
        query at all (gallery x gallery) are never computed: they rank nothing and hold no
        query-gallery pair.
        """
        T = self.n_tiles
        inc = self._query_tiles(c0, c1)
        cols = np.nonzero(inc)[0]
        pairs: list[tuple[int, int]] = []
        for i in range(T):
            js = range(i, T) if inc[i] else cols[cols >= i].tolist()
            pairs.extend((i, j) for j in js)
        return self.positive_tiles(c0, c1), pairs

    def _query_tiles(self, c0: int, c1: int) -> np.ndarray:
        inc = np.zeros(self.n_tiles, bool)
        inc[c0:c1] = self.tile_has_query[c0:c1]
        return inc

    def positive_tiles(self, c0: int, c1: int) -> list[tuple[int, int]]:
        """Tiles holding a same-class pair of a query of row tiles [c0, c1) (phase 1)."""
        inc = self._query_tiles(c0, c1)
        pp = self.pos_pairs
        return [(int(i), int(j)) for i, j in pp[inc[pp[:, 0]] | inc[pp[:, 1]]]] if pp.size else []

    def counts_pairs(self, i: int, j: int, c0: int, c1: int) -> bool:
        """Whether block [c0, c1) bins tile (i, j)'s pairs: each tile is binned by exactly one
        block, the one holding its row tile (its column tile when the row tile has no query)."""
        owner = i if self.tile_has_query[i] else j
        return c0 <= owner < c1


def gallery_positives(codes: np.ndarray, is_gallery: np.ndarray) -> np.ndarray:
    """R of every item as a query: the gallery items of its class other than itself."""
    gal_per_class = np.bincount(codes[is_gallery], minlength=int(codes.max()) + 1 if codes.size else 0)
    return gal_per_class[codes] - is_gallery.astype(np.int64)


def prepare(X: np.ndarray, codes: np.ndarray, *, is_query: np.ndarray | None = None,
            is_gallery: np.ndarray | None = None, similarity: str = "cosine",
            ks: tuple[int, ...] = (1, 2, 4, 8), n_recall: int = 11, interpolated: bool = False,
            n_bins: int = 200, per_query_pairs: bool = False, kernel: str = "auto") -> Setup:
    """Canonical layout of one pass (see the module docstring); no similarity is computed yet."""
    n = X.shape[0]
    codes = np.asarray(codes, np.int64)
    isq = np.ones(n, bool) if is_query is None else np.asarray(is_query, bool)
    isg = np.ones(n, bool) if is_gallery is None else np.asarray(is_gallery, bool)
    if isq.shape != (n,) or isg.shape != (n,) or codes.shape != (n,):
        raise ValueError(f"codes, is_query and is_gallery need one entry per row of X ({n})")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    ks_arr = np.asarray(sorted(set(int(k) for k in ks)), np.int64)
    if ks_arr.size == 0 or ks_arr[0] < 1:
        raise ValueError("every k must be a positive integer")
    Xf = _prepare_vectors(X, similarity)
    Xu, items, item_u, uptr = _canonical_order(Xf, codes, isq)
    lab = codes[items]
    q_c = isq[items]
    g_c = isg[items]
    q_pos = np.nonzero(q_c)[0]
    # R of each query = same-class gallery items other than itself
    R = gallery_positives(lab, g_c)[q_pos]
    lo, hi = _score_range(Xu, similarity)
    first = uptr[:-1]
    n_tiles = max(1, math.ceil(Xu.shape[0] / TILE))
    tile_of_u = np.arange(Xu.shape[0]) // TILE
    ulab = np.where(np.diff(uptr) == 1, lab[first], -1)  # -1: vector shared by several items
    tile_shared = np.zeros(n_tiles, bool)
    tile_shared[tile_of_u[ulab < 0]] = True
    tile_has_query = np.zeros(n_tiles, bool)
    tile_has_query[item_u[q_pos] // TILE] = True
    pos_pairs = np.asarray(_positive_tile_pairs(item_u, lab), np.int64).reshape(-1, 2)
    columns = BASE_COLUMNS + tuple(f"precision_at_{k}" for k in ks_arr) + tuple(f"recall_at_{k}" for k in ks_arr)
    h = hashlib.blake2b(digest_size=16)
    for a in (Xu, uptr, lab, q_c, g_c):
        h.update(np.ascontiguousarray(a).data)
    h.update(repr((similarity, n_bins, ks_arr.tolist(), n_recall, interpolated, per_query_pairs)).encode())
    # per-query sums of up to n scores of magnitude <= max|lo|, |hi| stay below 2^62 on this grid
    fx = 2.0 ** math.floor(math.log2(2.0**62 / (max(n, 1) * max(abs(lo), abs(hi), 1e-30))))
    return Setup(
        Xu=Xu, similarity=similarity, items=items, item_u=item_u, uptr=uptr, lab=lab, q_c=q_c, g_c=g_c,
        q_pos=q_pos, R=R, q_tile=item_u[q_pos] // TILE, lo=lo, hi=hi, n_bins=n_bins, ulab=ulab,
        uq=q_c[first].astype(np.uint8), ug=g_c[first].astype(np.uint8), loo=bool(q_c.all() and g_c.all()),
        tile_shared=tile_shared, tile_has_query=tile_has_query, pos_pairs=pos_pairs, ks=ks_arr,
        n_recall=n_recall, interpolated=interpolated, columns=columns, token=h.hexdigest(),
        per_query=per_query_pairs, fx=min(fx, 2.0**52), kernel=kernel,
    )


def memory_chunks(setup: Setup, memory_mb: int, n_threads: int) -> list[tuple[int, int]]:
    """Row-tile ranges whose queries' positive lists fit in the memory budget."""
    max_entries = max(1, memory_mb * 2**20 // (16 + 16 * n_threads))
    return _chunks(setup.tile_entries(), max_entries)


@dataclass
class BlockResult:
    """What one block of queries gives back: merged exactly by :func:`assemble`."""

    c0: int
    c1: int
    chunk_q: np.ndarray  # indices into setup.q_pos
    values: np.ndarray
    curves: np.ndarray
    hist: np.ndarray  # (2, n_bins) integer counts: [negative, positive]
    tile_keys: np.ndarray  # (P, 2) tiles whose pairs this block binned
    tile_sums: np.ndarray  # (P, 2) their (positive, negative) score sums
    qhist: np.ndarray | None = None  # (queries, 2, n_bins) per-query pair histograms
    qsum: np.ndarray | None = None  # (queries, 2) per-query fixed-point score sums


_TILES_CACHE: dict[str, _Tiles] = {}


def _tiles_for(setup: Setup) -> _Tiles:
    """One tile computer per setup and process (a Dask worker runs many blocks of one setup)."""
    t = _TILES_CACHE.get(setup.token)
    if t is None:
        _TILES_CACHE.clear()
        t = _TILES_CACHE[setup.token] = _Tiles(setup.Xu, setup.similarity)
    return t


@dataclass
class Thresholds:
    """Phase 1 of the queries of row tiles [c0, c1): their distinct positive scores ``uvals``
    (ascending per query, ``uoff`` offsets, ``ur`` multiplicities)."""

    c0: int
    c1: int
    chunk_q: np.ndarray  # indices into setup.q_pos
    uvals: np.ndarray
    ur: np.ndarray
    uoff: np.ndarray


@dataclass
class Counts:
    """Phase 2 for one block's queries: negatives above / tied with each distinct positive score,
    and (per-query pairs) histograms and fixed-point sums. Partial counts add up exactly."""

    gt: np.ndarray
    eq: np.ndarray
    qhist: np.ndarray | None
    qsum: np.ndarray | None

    def __add__(self, other: Counts) -> Counts:
        return Counts(self.gt + other.gt, self.eq + other.eq,
                      None if self.qhist is None else self.qhist + other.qhist,
                      None if self.qsum is None else self.qsum + other.qsum)


def _phase1(S_: Setup, tiles: _Tiles, c0: int, c1: int, pos_tiles, workers: _Workers,
            kept: dict | None = None) -> Thresholds:
    """The block's queries' positive scores, from the tiles holding same-class pairs."""
    chunk_q = np.nonzero((S_.q_tile >= c0) & (S_.q_tile < c1))[0]
    slot = np.full(S_.n, -1, np.int64)
    slot[S_.q_pos[chunk_q]] = np.arange(chunk_q.size)
    toff = np.zeros(chunk_q.size + 1, np.int64)
    np.cumsum(S_.R[chunk_q], out=toff[1:])
    thr = np.empty(int(toff[-1]), np.float32)
    fill = np.zeros(chunk_q.size, np.int64)
    fill_lock = threading.Lock()
    keep_max = KEEP_TILES_MB * 2**20 // (TILE * TILE * 4)
    bufs = [np.empty(TILE * TILE, np.float32) for _ in range(workers.n)]

    def collect(w: int, ij: tuple[int, int]) -> None:
        i, j = ij
        keep = kept is not None and len(kept) < keep_max  # a kept tile needs its own memory
        S = tiles(i, j) if keep else tiles(i, j, out=bufs[w])
        with fill_lock:
            K.collect_positive_scores(S, i * TILE, j * TILE, i == j, S_.uptr, S_.lab, S_.q_c, S_.g_c, slot, toff,
                                      fill, thr)
            if keep:
                kept[ij] = S

    workers.run([[p] for p in pos_tiles], collect, "positives")
    uvals, ur, uoff = K.distinct_thresholds(thr, toff)
    return Thresholds(c0, c1, chunk_q, uvals, ur, uoff)


def _phase2(S_: Setup, tiles: _Tiles, ths: list[Thresholds], pair_tiles, counts_pairs, workers: _Workers,
            block_size: int = TILE, kept: dict | None = None):
    """Rank every negative of the given tiles against the positive scores of the queries of
    ``ths`` (one or two blocks) and bin the pairs of the tiles ``counts_pairs(i, j)`` selects.
    Returns (one Counts per block, histogram (2, n_bins), {tile: (positive sum, negative sum)})."""
    n_threads = workers.n
    lo, inv_width = S_.lo, S_.n_bins / (S_.hi - S_.lo)
    first = S_.uptr[:-1]
    slot = np.full(S_.n, -1, np.int64)
    qmin = np.full(S_.n, np.inf, np.float32)  # +inf: not a query of these blocks, never ranked
    uvals = np.concatenate([t.uvals for t in ths]) if ths else np.zeros(0, np.float32)
    uoff = [np.zeros(1, np.int64)]
    nq = noff = 0
    for t in ths:
        slot[S_.q_pos[t.chunk_q]] = nq + np.arange(t.chunk_q.size)
        has = t.uoff[1:] > t.uoff[:-1]
        qmin[S_.q_pos[t.chunk_q[has]]] = t.uvals[t.uoff[:-1][has]]
        uoff.append(t.uoff[1:] + noff)
        nq += t.chunk_q.size
        noff += t.uvals.size
    uoff = np.concatenate(uoff)
    uslot = slot[first]
    uqmin = qmin[first]
    acc = [(np.zeros(uvals.size, np.int64), np.zeros(uvals.size, np.int64),
            np.zeros((2, 4, S_.n_bins), np.int64)) for _ in range(n_threads)]
    cand_buf = [np.empty((TILE * TILE, 2), np.int64) for _ in range(n_threads)]
    tile_buf = [np.empty(TILE * TILE, np.float32) for _ in range(n_threads)]
    tile_buf_t = [np.empty(TILE * TILE, np.float32) for _ in range(n_threads)]
    row_buf = [np.empty(TILE, np.float32) for _ in range(n_threads)]
    nqh = nq if S_.per_query else 0
    qacc = [(np.zeros((nqh, 2, S_.n_bins), np.int64), np.zeros((nqh, 2), np.int64)) for _ in range(n_threads)]
    tile_sums: dict[tuple[int, int], tuple[float, float]] = {}
    kept = kept if kept is not None else {}

    def count(w: int, ij: tuple[int, int]) -> None:
        i, j = ij
        S = kept.pop(ij, None)  # the same bits as recomputing it: same call, same shape
        if S is None:
            S = tiles(i, j, out=tile_buf[w])
        gt, eq, h = acc[w]
        pairs = counts_pairs(i, j)
        sums = np.zeros(2, np.float64)
        a0, b0 = i * TILE, j * TILE
        if S_.tile_shared[i] or S_.tile_shared[j] or S_.kernel == "general":
            K.count_tile(S, a0, b0, i == j, S_.uptr, S_.lab, S_.q_c, S_.g_c, slot, uoff, uvals, qmin, S_.ulab, S_.uq,
                         S_.ug, uslot, uqmin, gt, eq, h, lo, inv_width, sums, pairs, qacc[w][0], qacc[w][1], S_.fx)
        else:
            search = S_.kernel == "search"  # else the queries are ranked by rank_rows, after binning
            if S_.loo and not S_.per_query:
                K.count_tile_loo(S, a0, b0, i == j, S_.ulab, uslot, uqmin, uoff, uvals, gt, eq, h, lo, inv_width,
                                 sums, cand_buf[w], pairs, search)
            else:
                K.count_tile_roles(S, a0, b0, i == j, S_.ulab, S_.uq, S_.ug, uslot, uqmin, uoff, uvals, gt, eq, h,
                                   lo, inv_width, sums, cand_buf[w], pairs, qacc[w][0], qacc[w][1], S_.fx, search)
            if not search:
                K.rank_tile(S, a0, b0, i == j, S_.ulab, S_.uq, S_.ug, uslot, uqmin, uoff, uvals, gt, eq, row_buf[w],
                            tile_buf_t[w], S_.kernel == "count")
        if pairs:
            tile_sums[ij] = (float(sums[0]), float(sums[1]))  # dict writes are atomic under the GIL

    rows_per_task = max(1, block_size // TILE)
    tasks: dict[int, list[tuple[int, int]]] = {}
    for i, j in pair_tiles:
        tasks.setdefault(i // rows_per_task, []).append((i, j))
    workers.run(list(tasks.values()), count, "pairs")
    gt = sum(a[0] for a in acc)
    eq = sum(a[1] for a in acc)
    qh = sum(a[0] for a in qacc) if S_.per_query else None
    qs = sum(a[1] for a in qacc) if S_.per_query else None
    out, q0, v0 = [], 0, 0
    for t in ths:
        q1, v1 = q0 + t.chunk_q.size, v0 + t.uvals.size
        out.append(Counts(gt[v0:v1], eq[v0:v1], None if qh is None else qh[q0:q1], None if qs is None else qs[q0:q1]))
        q0, v0 = q1, v1
    return out, sum(a[2] for a in acc).sum(axis=1), tile_sums


def _phase3(S_: Setup, th: Thresholds, counts: Counts) -> tuple[np.ndarray, np.ndarray]:
    """Per-query metrics of a block from its positive scores and its summed counts."""
    v = np.empty((th.chunk_q.size, len(S_.columns)), np.float64)
    c = np.empty((th.chunk_q.size, S_.n_recall), np.float64)
    K.query_metrics(th.uoff, th.uvals, th.ur, counts.gt, counts.eq, S_.ks, S_.n_recall, S_.interpolated, v, c)
    return v, c


def _tile_arrays(tile_sums: dict) -> tuple[np.ndarray, np.ndarray]:
    keys = sorted(tile_sums)
    return (np.asarray(keys, np.int64).reshape(-1, 2),
            np.asarray([tile_sums[k] for k in keys], np.float64).reshape(-1, 2))


def run_block(setup: Setup, c0: int, c1: int, *, n_threads: int = 1, block_size: int = TILE,
              workers: _Workers | None = None, plan=None) -> BlockResult:
    """The three phases for the queries of row tiles [c0, c1) against the whole gallery."""
    S_ = setup
    tiles = _tiles_for(S_)
    pos_tiles, pair_tiles = plan if plan is not None else S_.plan(c0, c1)
    if workers is None:
        workers = _Workers(n_threads, len(pos_tiles) + len(pair_tiles), None)
    kept: dict[tuple[int, int], np.ndarray] = {}  # phase-1 tiles reused by phase 2
    with threadpool_limits(limits=1, user_api="blas"):
        th = _phase1(S_, tiles, c0, c1, pos_tiles, workers, kept)
        (counts,), hist, tile_sums = _phase2(S_, tiles, [th], pair_tiles,
                                             lambda i, j: S_.counts_pairs(i, j, c0, c1), workers, block_size, kept)
        v, c = _phase3(S_, th, counts)
    keys, sums = _tile_arrays(tile_sums)
    return BlockResult(c0=c0, c1=c1, chunk_q=th.chunk_q, values=v, curves=c, hist=hist, tile_keys=keys,
                       tile_sums=sums, qhist=counts.qhist, qsum=counts.qsum)


# ------------------------------------------------------------------ the same pass as a task graph
# Blocks partition the row tiles; the upper triangle of tiles is cut into block pairs (a <= b),
# each computed once: thresholds per block -> counts per block pair -> metrics per block.

def block_thresholds(setup: Setup, c0: int, c1: int) -> Thresholds:
    """Task: phase 1 for the queries of row tiles [c0, c1)."""
    S_ = setup
    pos = S_.positive_tiles(c0, c1)
    with threadpool_limits(limits=1, user_api="blas"):
        return _phase1(S_, _tiles_for(S_), c0, c1, pos, _Workers(1, len(pos), None))


def pair_tiles(setup: Setup, a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """Tiles (i, j), i <= j, with i in block a and j in block b (a before or equal to b) that
    hold a query."""
    hq = setup.tile_has_query
    out = []
    for i in range(*a):
        for j in range(max(i, b[0]), b[1]):
            if hq[i] or hq[j]:
                out.append((i, j))
    return out


@dataclass
class PairResult:
    counts: list[Counts]  # one per block of the pair that has queries, in order a, b
    hist: np.ndarray
    tile_keys: np.ndarray
    tile_sums: np.ndarray


def block_pair_counts(setup: Setup, ths: list[Thresholds], a: tuple[int, int], b: tuple[int, int]) -> PairResult:
    """Task: phase 2 over the tiles between blocks a and b, for the queries of both."""
    S_ = setup
    tiles = pair_tiles(S_, a, b)
    with threadpool_limits(limits=1, user_api="blas"):
        counts, hist, tile_sums = _phase2(S_, _tiles_for(S_), ths, tiles, lambda i, j: True,
                                          _Workers(1, len(tiles), None))
    keys, sums = _tile_arrays(tile_sums)
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
    v, c = _phase3(setup, th, total)
    return BlockResult(c0=th.c0, c1=th.c1, chunk_q=th.chunk_q, values=v, curves=c,
                       hist=np.zeros((2, setup.n_bins), np.int64), tile_keys=np.zeros((0, 2), np.int64),
                       tile_sums=np.zeros((0, 2)), qhist=total.qhist, qsum=total.qsum)


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


def assemble(setup: Setup, blocks: list[BlockResult]) -> PassResult:
    """Merge block results exactly: per-query rows by position, integer histograms by addition,
    per-tile sums by ``math.fsum`` in canonical tile order. Refuses an incomplete set of blocks."""
    S_ = setup
    nq = S_.q_pos.size
    values = np.full((nq, len(S_.columns)), np.nan)
    curves = np.full((nq, S_.n_recall), np.nan)
    seen = np.zeros(nq, np.int64)
    hist = np.zeros((2, S_.n_bins), np.int64)
    qhist = np.zeros((nq, 2, S_.n_bins), np.int64) if S_.per_query else None
    qsum = np.zeros((nq, 2), np.int64) if S_.per_query else None
    for b in blocks:
        values[b.chunk_q] = b.values
        curves[b.chunk_q] = b.curves
        if S_.per_query:
            qhist[b.chunk_q] = b.qhist
            qsum[b.chunk_q] = b.qsum
        seen[b.chunk_q] += 1
        hist += b.hist
    if not (seen == 1).all():
        raise RuntimeError(f"internal error: {int((seen == 0).sum())} queries without a result and "
                           f"{int((seen > 1).sum())} with several; no partial result is returned")
    keys = np.concatenate([b.tile_keys for b in blocks]) if blocks else np.zeros((0, 2), np.int64)
    sums = np.concatenate([b.tile_sums for b in blocks]) if blocks else np.zeros((0, 2))
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    if order.size and (np.diff(keys[order], axis=0) == 0).all(axis=1).any():
        raise RuntimeError("internal error: a tile was binned twice")
    sums = sums[order]
    return PassResult(
        query_items=S_.items[S_.q_pos], values=values, columns=S_.columns, pr_curves=curves,
        recall_grid=np.arange(S_.n_recall) / (S_.n_recall - 1), hist_edges=np.linspace(S_.lo, S_.hi, S_.n_bins + 1),
        hist_pos=hist[1], hist_neg=hist[0], sum_pos=math.fsum(sums[:, 0].tolist()),
        sum_neg=math.fsum(sums[:, 1].tolist()), ks=tuple(int(k) for k in S_.ks),
        n_unique_vectors=int(S_.Xu.shape[0]), query_hist=qhist,
        query_pair_sums=None if qsum is None else qsum / S_.fx,
    )


def run_pass(X: np.ndarray, codes: np.ndarray, *, is_query: np.ndarray | None = None,
             is_gallery: np.ndarray | None = None, similarity: str = "cosine",
             ks: tuple[int, ...] = (1, 2, 4, 8), n_recall: int = 11, interpolated: bool = False,
             n_bins: int = 200, block_size: int = TILE, n_threads: int | None = None,
             memory_mb: int = 1024, progress: Progress | None = None, compute=None,
             per_query_pairs: bool = False, kernel: str = "auto") -> PassResult:
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
    """
    setup = prepare(X, codes, is_query=is_query, is_gallery=is_gallery, similarity=similarity, ks=ks,
                    n_recall=n_recall, interpolated=interpolated, n_bins=n_bins, per_query_pairs=per_query_pairs,
                    kernel=kernel)
    if compute is not None:
        return compute.run_pass(setup, memory_mb=memory_mb, block_size=block_size, progress=progress)
    n_threads = n_threads or os.cpu_count() or 1
    chunks = [c for c in memory_chunks(setup, memory_mb, n_threads) if setup.tile_has_query[c[0]:c[1]].any()]
    plans = [setup.plan(c0, c1) for c0, c1 in chunks]
    workers = _Workers(n_threads, sum(len(a) + len(b) for a, b in plans), progress)
    blocks = [run_block(setup, c0, c1, block_size=block_size, workers=workers, plan=p)
              for (c0, c1), p in zip(chunks, plans, strict=True)]
    if progress is not None:
        progress(workers.total, workers.total, "metrics")
    return assemble(setup, blocks)
