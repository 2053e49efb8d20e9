"""Everything one pass needs before any similarity is computed: the :class:`Setup` built by
:func:`prepare` (canonical layout, queries and their positive counts, histogram range, tile
bookkeeping), sent once to each Dask worker."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .layout import PRECISIONS, canonical_order, euclidean_shift, gallery_positives, prepare_vectors, score_range
from .plan import positive_tile_pairs
from .tiles import TILE

#: how phase 2 ranks negatives (results are identical; tests pin each against "general"):
#: "auto" counts per threshold, looks up cells or searches per query row, by cost; "count" always
#: counts; "cells" always looks up (:func:`.ranking.rank_rows`); "search" binary-searches every
#: negative reaching a positive; "general" sends every tile through the kernel for duplicate vectors
KERNELS = ("auto", "count", "cells", "search", "general")



@dataclass(eq=False)  # compared and hashed by identity: the key of its tile computer
class Setup:
    """Everything a block of queries needs, built once per pass by :func:`prepare` (and sent once
    to each Dask worker). Items are in canonical order (positions ``p``); unique vectors are the
    rows and columns of the tiles.
    """

    vectors: np.ndarray  # (unique vectors, d) in canonical order, float32 or float64 (the precision)
    similarity: str
    items: np.ndarray  # input row of each canonical item position
    vector_offsets: np.ndarray  # items of vector u: positions vector_offsets[u]:vector_offsets[u + 1]
    labels: np.ndarray  # class code per item position
    is_query: np.ndarray  # per item position
    is_gallery: np.ndarray
    query_positions: np.ndarray  # item positions of the queries the pass ranks (one per query group), ascending
    n_positives: np.ndarray  # R of each query: same-class gallery items other than itself
    n_entries: np.ndarray  # phase-1 positive-list entries of each query: the same-class gallery groups it sees
    query_tile: np.ndarray  # row tile of each query
    score_lo: float  # histogram range
    score_hi: float
    n_bins: int
    # item groups: the items of one vector with one class code and the same roles (exact duplicates
    # alike in everything the protocol reads), ``group_offsets[u]:group_offsets[u + 1]`` those of vector u;
    # per group its class code, uint8 query / gallery flags, item count and first item position
    group_offsets: np.ndarray
    group_label: np.ndarray
    group_is_query: np.ndarray
    group_is_gallery: np.ndarray
    group_count: np.ndarray
    group_item: np.ndarray
    all_query_positions: np.ndarray  # item positions of every query, ascending
    #: for each of ``all_query_positions``, the index in ``query_positions`` of its group's ranked
    #: query; None when every query is ranked (no vector shared by two queries of one group)
    query_expand: np.ndarray | None
    vector_label: np.ndarray  # class code of a vector's single item; -1: a vector shared by several items
    vector_is_query: np.ndarray  # uint8 flags of a vector's single item (kernels read these)
    vector_is_gallery: np.ndarray
    tile_has_shared_vector: np.ndarray  # per tile: holds a vector of several items (general kernel)
    tile_has_query: np.ndarray
    tile_has_gallery: np.ndarray
    tile_all_query: np.ndarray  # per tile: every item of its vectors is a query
    tile_all_gallery: np.ndarray  # ... is in the gallery
    same_class_tiles: np.ndarray  # (P, 2) tile pairs I <= J holding a same-class pair
    ks: np.ndarray
    n_recall: int
    interpolated: bool
    columns: tuple[str, ...]  # per-query output columns (:func:`~.query_metrics.metric_plan`)
    metric_kernels: np.ndarray  # phase-3 kernel id and cutoff code of each metric column
    metric_cutoffs: np.ndarray
    per_query_pairs: bool = False  # per-query pair histograms and sums (query sampling)
    fixed_point_scale: float = 1.0  # fixed-point steps per unit score for the per-query sums
    kernel: str = "auto"  # see KERNELS
    hit_rates_only: bool = False  # only the Recall@K columns, from each query's top positive block
    cutoff_ranks: int = 0  # keep each query's tie blocks above this rank (:mod:`.cutoffs`); 0: none
    #: delete-a-group replicates (:mod:`.replicates`): the negatives are counted per bucket, the
    #: group of their class (0 .. n_buckets - 2) or the last bucket (classes in no group); 1: no
    #: replicates, one bucket. Per vector and per item group the bucket's gallery flags (rows of
    #: ``gallery_by_bucket`` / ``group_gallery_by_bucket``), per tile the buckets of its gallery
    #: items, per ranked query its bucket and the queries it stands for, and the replicates' columns.
    n_buckets: int = 1
    gallery_by_bucket: np.ndarray | None = None
    group_gallery_by_bucket: np.ndarray | None = None
    tile_buckets: np.ndarray | None = None
    bucket_runs: np.ndarray | None = None  # (runs, 3): [start, stop, bucket] of the runs of one bucket in a tile
    bucket_run_offsets: np.ndarray | None = None  # tile t's runs: bucket_runs[offsets[t]:offsets[t + 1]]
    query_bucket: np.ndarray | None = None
    query_weight: np.ndarray | None = None
    replicate_columns: tuple[str, ...] = ()
    replicate_kernels: np.ndarray | None = None
    replicate_cutoffs: np.ndarray | None = None

    @property
    def n(self) -> int:
        return int(self.labels.shape[0])

    @property
    def dtype(self) -> np.dtype:
        """What scores are computed and compared in: float32, or float64 (``precision``)."""
        return self.vectors.dtype

    @property
    def n_tiles(self) -> int:
        return max(1, math.ceil(self.vectors.shape[0] / TILE))


def prepare(X: np.ndarray, codes: np.ndarray, *, is_query: np.ndarray | None = None,
            is_gallery: np.ndarray | None = None, similarity: str = "cosine",
            ks: tuple[int, ...] = (1, 2, 4, 8), n_recall: int = 11, interpolated: bool = False,
            n_bins: int = 200, per_query_pairs: bool = False, kernel: str = "auto",
            precision: str = "float32", hit_rates_only: bool = False, cutoff_ranks: int = 0,
            cutoff_mb: float = 0.0, delete_groups: np.ndarray | None = None,
            replicate_ks: tuple[int, ...] = ()) -> Setup:
    """Canonical layout of one pass (see the module docstring); no similarity is computed yet.
    ``precision``: the dtype of the vectors and of every score (one of ``PRECISIONS``);
    ``hit_rates_only``, ``cutoff_ranks``, ``cutoff_mb``, ``delete_groups``, ``replicate_ks``: see
    :func:`~.core.run_pass`."""
    n = X.shape[0]
    codes = np.asarray(codes, np.int64)
    isq = np.ones(n, bool) if is_query is None else np.asarray(is_query, bool)
    isg = np.ones(n, bool) if is_gallery is None else np.asarray(is_gallery, bool)
    if isq.shape != (n,) or isg.shape != (n,) or codes.shape != (n,):
        raise ValueError(f"codes, is_query and is_gallery need one entry per row of X ({n})")
    if kernel not in KERNELS:
        raise ValueError(f"unknown kernel {kernel!r}: use one of {', '.join(KERNELS)}")
    if precision not in PRECISIONS:
        raise ValueError(f"unknown precision {precision!r}: use one of {', '.join(PRECISIONS)}")
    if n_bins < 1:
        raise ValueError(f"n_bins = {n_bins}: the pair histograms need at least one bin")
    ks_arr = np.asarray(sorted(set(int(k) for k in ks)), np.int64)
    if ks_arr.size == 0 or ks_arr[0] < 1:
        raise ValueError("every k must be a positive integer")
    bucket, n_buckets = _buckets(delete_groups, n)
    if n_buckets > 1 and hit_rates_only:
        raise ValueError("delete_groups needs every metric: not with hit_rates_only")
    Xf = prepare_vectors(X, similarity, precision)
    u_rows, items, item_u, uptr = canonical_order(Xf, codes, isq, bucket)  # the vectors are Xf[u_rows]
    lab = codes[items]
    q_c = isq[items]
    g_c = isg[items]
    groups = item_groups(item_u, uptr, lab, q_c, g_c)
    all_q = np.nonzero(q_c)[0]
    q_pos, expand = ranked_queries(groups, all_q)
    # R of each query = same-class gallery items other than itself
    R = gallery_positives(lab, g_c)[q_pos]
    lo, hi = score_range(Xf, similarity)  # every row is one of the vectors: the same extremes
    if not max(abs(lo), abs(hi)) < float(np.finfo(Xf.dtype).max):
        _overflow(similarity, Xf.dtype, X)
    if similarity != "cosine":
        top = float(np.max(np.abs(Xf))) if Xf.size else 0.0
        sq = top * top * Xf.shape[1]  # bounds the largest dot score and squared distance (float64 tiles)
        if sq < _SMALLEST_SCORE[Xf.dtype if similarity == "dot" else np.dtype(np.float64)] or (
                similarity == "euclidean" and top < _SMALLEST_SCORE[Xf.dtype]):
            _underflow(similarity, Xf.dtype, X)
    first = uptr[:-1]
    n_tiles = max(1, math.ceil(u_rows.shape[0] / TILE))
    tile_of_u = np.arange(u_rows.shape[0]) // TILE
    ulab = np.where(np.diff(uptr) == 1, lab[first], -1)  # -1: vector shared by several items
    tile_shared = np.zeros(n_tiles, bool)
    tile_shared[tile_of_u[ulab < 0]] = True
    tile_has_query = np.zeros(n_tiles, bool)
    tile_has_query[item_u[q_pos] // TILE] = True
    tile_has_gallery = np.zeros(n_tiles, bool)
    tile_has_gallery[item_u[np.nonzero(g_c)[0]] // TILE] = True
    item_tile = item_u // TILE
    tile_all_query = np.bincount(item_tile[~q_c], minlength=n_tiles) == 0
    tile_all_gallery = np.bincount(item_tile[~g_c], minlength=n_tiles) == 0
    pos_pairs = positive_tile_pairs(item_u, lab)
    from .query_metrics import metric_plan  # numba: imported here, after the NumPy work above (see .compiled)

    columns, metric_kernels, metric_cutoffs = metric_plan(ks_arr.tolist(), hit_rates_only)
    from .row_order import rows_in_order

    Xu = rows_in_order(Xf, u_rows)  # Xf is this pass's own copy: permuted in place when no rows merged
    from .cutoff_plan import CUTOFF_FLOOR, block_dtype, kept_ranks

    n_entries = positive_entries(groups, lab[q_pos], q_pos)
    kept = 0 if hit_rates_only else kept_ranks(n_entries, all_q.size, cutoff_ranks, cutoff_mb * 2**20,
                                                block_dtype(n).itemsize, CUTOFF_FLOOR)
    replicas = {} if n_buckets == 1 else _replicate_layout(
        bucket[items], item_u, uptr, groups, g_c, q_pos, expand, n_tiles, n_buckets, tuple(ks_arr.tolist()) +
        tuple(int(k) for k in replicate_ks))
    # per-query sums of up to n scores of magnitude <= max|lo|, |hi| stay below 2^62 on this grid
    fx = 2.0 ** math.floor(math.log2(2.0**62 / (max(n, 1) * max(abs(lo), abs(hi), 1e-30))))
    return Setup(
        vectors=Xu, similarity=similarity, items=items, vector_offsets=uptr, labels=lab,
        is_query=q_c, is_gallery=g_c, query_positions=q_pos, n_positives=R,
        n_entries=n_entries, query_tile=item_u[q_pos] // TILE,
        group_offsets=groups.offsets, group_label=groups.label, group_is_query=groups.is_query,
        group_is_gallery=groups.is_gallery, group_count=groups.count, group_item=groups.item,
        all_query_positions=all_q, query_expand=expand,
        score_lo=lo, score_hi=hi, n_bins=n_bins, vector_label=ulab, vector_is_query=q_c[first].astype(np.uint8),
        vector_is_gallery=g_c[first].astype(np.uint8),
        tile_has_shared_vector=tile_shared, tile_has_query=tile_has_query, tile_has_gallery=tile_has_gallery,
        tile_all_query=tile_all_query, tile_all_gallery=tile_all_gallery,
        same_class_tiles=pos_pairs, ks=ks_arr,
        n_recall=n_recall, interpolated=interpolated, columns=columns, metric_kernels=metric_kernels,
        metric_cutoffs=metric_cutoffs,
        per_query_pairs=per_query_pairs, fixed_point_scale=min(fx, 2.0**52), kernel=kernel,
        hit_rates_only=hit_rates_only, cutoff_ranks=kept, n_buckets=n_buckets, **replicas,
    )


def _buckets(delete_groups: np.ndarray | None, n: int) -> tuple[np.ndarray, int]:
    """Each item's bucket (:class:`Setup`): its group, or the last bucket for -1 (never deleted);
    and the number of buckets (the groups and that last one; 1 without groups)."""
    if delete_groups is None:
        return np.zeros(n, np.int64), 1
    dg = np.asarray(delete_groups)
    if dg.shape != (n,) or dg.dtype.kind not in "iu" or (dg.size and dg.min() < -1):
        raise ValueError(f"delete_groups needs one integer >= -1 per row of X ({n})")
    dg = dg.astype(np.int64)
    n_groups = int(dg.max(initial=-1)) + 1
    if n_groups == 0:
        return np.zeros(n, np.int64), 1
    return np.where(dg < 0, n_groups, dg), n_groups + 1


def _replicate_layout(bucket_c: np.ndarray, item_u: np.ndarray, uptr: np.ndarray, groups: ItemGroups,
                      g_c: np.ndarray, q_pos: np.ndarray, expand: np.ndarray | None, n_tiles: int, n_buckets: int,
                      replicate_ks: tuple[int, ...]) -> dict:
    """The :class:`Setup` fields of a pass with delete-a-group replicates (``bucket_c``: each item
    position's bucket)."""
    from ..metrics.registry import query_columns
    from .query_metrics import metric_plan

    buckets = np.arange(n_buckets)[:, None]
    vector_bucket = bucket_c[uptr[:-1]]  # a vector of one item: its item's; shared vectors use their groups'
    vector_gallery = g_c[uptr[:-1]]
    group_bucket = bucket_c[groups.item]
    tile_buckets = np.zeros((n_tiles, n_buckets), bool)
    gal = np.nonzero(g_c)[0]
    tile_buckets[item_u[gal] // TILE, bucket_c[gal]] = True
    # runs of one bucket among each tile's vectors (positions in the tile) holding a gallery item
    n_u = vector_bucket.size
    u = np.arange(n_u)
    new_run = np.ones(n_u, bool)
    new_run[1:] = (vector_bucket[1:] != vector_bucket[:-1]) | (u[1:] % TILE == 0)
    starts = np.nonzero(new_run)[0]
    stops = np.append(starts[1:], n_u)
    has_gallery = np.add.reduceat(vector_gallery.astype(np.int64), starts) > 0 if n_u else np.zeros(0, bool)
    starts, stops = starts[has_gallery], stops[has_gallery]
    run_tile = starts // TILE
    runs = np.stack([starts % TILE, stops - run_tile * TILE, vector_bucket[starts]], axis=1).astype(np.int64)
    run_offsets = np.zeros(n_tiles + 1, np.int64)
    np.cumsum(np.bincount(run_tile, minlength=n_tiles), out=run_offsets[1:])
    ks = tuple(sorted(set(replicate_ks)))
    wanted = {m.column for m in query_columns(ks) if m.kind in ("mean", "hit")}
    columns, kernels, cutoffs = metric_plan(list(ks))
    at = [j for j, c in enumerate(columns[1:len(kernels) + 1]) if c in wanted]
    weight = np.ones(q_pos.size, np.int64) if expand is None else np.bincount(expand, minlength=q_pos.size)
    return dict(
        gallery_by_bucket=((vector_bucket[None, :] == buckets) & vector_gallery[None, :]).astype(np.uint8),
        group_gallery_by_bucket=((group_bucket[None, :] == buckets) & (groups.is_gallery[None, :] != 0)).astype(
            np.uint8),
        tile_buckets=tile_buckets, bucket_runs=runs.reshape(-1, 3), bucket_run_offsets=run_offsets,
        query_bucket=bucket_c[q_pos].astype(np.int64), query_weight=weight.astype(np.int64),
        replicate_columns=tuple(columns[1 + j] for j in at), replicate_kernels=kernels[at],
        replicate_cutoffs=cutoffs[at])


@dataclass(frozen=True)
class ItemGroups:
    """Items of one vector with one class code and the same query / gallery flags (see
    :class:`Setup`), ordered by (vector, class code, query flag, gallery flag); ``of_item``: each
    item position's group."""

    offsets: np.ndarray
    label: np.ndarray
    is_query: np.ndarray
    is_gallery: np.ndarray
    count: np.ndarray
    item: np.ndarray
    of_item: np.ndarray


def item_groups(item_u: np.ndarray, uptr: np.ndarray, lab: np.ndarray, isq: np.ndarray,
                isg: np.ndarray) -> ItemGroups:
    """The item groups of the canonical layout. Two items of one group rank the same gallery
    (the other one stands in its place): their every metric is equal, so the pass ranks one query
    per group, and the kernels visit the pairs of two groups once, with the groups' counts as
    weights, instead of every item pair (a collapsed embedding: one vector, one group per class)."""
    n = lab.shape[0]
    if uptr.shape[0] - 1 == n:  # one item per vector: each its own group
        one = np.ones(n, np.int64)
        return ItemGroups(np.arange(n + 1, dtype=np.int64), lab, isq.astype(np.uint8), isg.astype(np.uint8), one,
                          np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64))
    order = np.lexsort((np.arange(n), isg, isq, lab, item_u))
    key = np.stack([item_u[order], lab[order], isq[order], isg[order]])
    new = np.ones(n, bool)
    new[1:] = (key[:, 1:] != key[:, :-1]).any(axis=0)
    starts = np.nonzero(new)[0]
    first = order[starts]  # the group's lowest item position (positions ascend within a group in order)
    of_item = np.empty(n, np.int64)
    of_item[order] = np.cumsum(new) - 1
    offsets = np.searchsorted(item_u[first], np.arange(uptr.shape[0]))
    return ItemGroups(offsets.astype(np.int64), lab[first], isq[first].astype(np.uint8), isg[first].astype(np.uint8),
                      np.diff(np.append(starts, n)).astype(np.int64), first.astype(np.int64), of_item)


def ranked_queries(groups: ItemGroups, all_q: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(the item positions of the queries the pass ranks: each query group's first item,
    ascending; for each query of ``all_q``, the index of its group's ranked query, or None when
    every query is ranked)."""
    reps = groups.item[groups.of_item[all_q]]
    if np.array_equal(reps, all_q):
        return all_q, None
    q_pos = np.unique(reps)
    return q_pos, np.searchsorted(q_pos, reps)


def positive_entries(groups: ItemGroups, labels: np.ndarray, q_pos: np.ndarray) -> np.ndarray:
    """Phase-1 positive-list entries of each ranked query (class codes ``labels``, positions
    ``q_pos``): one per same-class gallery group it sees, its own group included when it holds
    another item. Equal to R when every vector is one item."""
    g = groups.of_item[q_pos]
    n_codes = int(max(groups.label.max(initial=-1), labels.max(initial=-1))) + 1
    gal = np.bincount(groups.label[groups.is_gallery != 0], minlength=n_codes)
    own = groups.is_gallery[g].astype(np.int64)
    return gal[labels] - own + (own & (groups.count[g] > 1))


# the smallest normal number: when even the largest possible score (or distance) is below it,
# the scores are subnormal or zero and rank at random; above it they rank as given (a stricter
# bound refused dot products of vectors near 1e-17 that ranked exactly)
_SMALLEST_SCORE = {np.dtype(t): float(np.finfo(t).tiny) for t in (np.float32, np.float64)}


def _underflow(similarity: str, dtype: np.dtype, X: np.ndarray) -> None:
    """Refuse embeddings whose dot or euclidean scores underflow the score dtype (they would tie
    at 0, a random ranking); vectors that are all the same (euclidean, every distance truly 0)
    pass."""
    X64 = np.asarray(X, np.float64)
    if similarity == "euclidean":
        shift = euclidean_shift(X64)
        X64 = X64 if shift is None else X64 - shift
        if not np.any(X64 != X64[:1]):
            return
    top = float(np.max(np.abs(X64))) if X64.size else 0.0
    if top == 0.0:
        return  # all-zero vectors: every score is truly 0
    raise InputError("embeddings", f"the {similarity} scores of these vectors underflow {np.dtype(dtype).name} (the "
                     f"largest value is {top:.3g}), so nearly all of them would tie at 0.",
                     "multiply the embeddings by a constant (no ranking changes), or use cosine similarity.")


def _overflow(similarity: str, dtype: np.dtype, X: np.ndarray) -> None:
    """Refuse embeddings whose scores do not fit the score dtype (they would become infinities,
    all tied): scaling them down changes no ranking."""
    X64 = np.asarray(X, np.float64)
    top = np.max(np.abs(X64), axis=1, keepdims=True)  # the norm without overflowing its squares
    top[top == 0] = 1.0
    norm = float(np.max(top[:, 0] * np.sqrt(np.add.reduce((X64 / top) ** 2, axis=1))))
    in64 = dtype == np.float32 and norm * norm < float(np.finfo(np.float64).max)  # dot, and euclidean's squares
    raise InputError("embeddings", f"the {similarity} scores of these vectors overflow {np.dtype(dtype).name} "
                     f"(the largest vector norm is {norm:.3g}), so they would all tie at infinity.",
                     "divide the embeddings by a constant (no ranking changes)" +
                     (", or compute in double precision (--precision float64, precision='float64')" if in64 else "")
                     + ", or use cosine similarity.")
