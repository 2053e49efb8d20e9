"""What a pass and a block of it return, and their exact merge: per-query rows by position,
integer histograms by addition, per-tile score sums by ``math.fsum`` in canonical tile order."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .setup import Setup


@dataclass(frozen=True)
class PassResult:
    """Everything one pass produces for one method.

    ``values[s]`` are the per-query metrics of query ``query_items[s]`` (an input row index),
    columns ``n_positives``, the metric registry's per-query columns, the tie counts; rows of lone
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
    #: each query's leading tie blocks, from which the cutoff columns of any k up to their
    #: ``max_rank`` are recomputed without a pass (:func:`~.cutoffs.with_cutoffs`); None when the
    #: pass kept none (``cutoff_ranks = 0``, or not one rank fitted its memory budget)
    cutoff_blocks: CutoffBlocks | None = None
    #: with ``delete_groups``: for each group g of classes deleted (queries and gallery), the mean
    #: of each of ``replicate_columns`` over the scored queries left (``replicate_means[g]``) and
    #: their number (``replicate_n[g]``): the delete-a-group jackknife's replicates (:mod:`.replicates`)
    replicate_columns: tuple[str, ...] = ()
    replicate_means: np.ndarray | None = None
    replicate_n: np.ndarray | None = None

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


@dataclass(frozen=True)
class CutoffBlocks:
    """The positive tie blocks of each query that start above rank ``max_rank`` (``T < max_rank``;
    definitions of ``T, t, r`` in :mod:`analysis_core.metrics.tie_blocks`): every block that
    Precision@k and Recall@K read for any k <= max_rank. Query s's blocks, in descending score
    order, are ``T[start[s]:stop[s]]`` (and ``t``, ``r`` alike); queries of one item group share
    theirs. At most min(max_rank, distinct positive scores) blocks per query, three integers each."""

    start: np.ndarray
    stop: np.ndarray
    T: np.ndarray
    t: np.ndarray
    r: np.ndarray
    max_rank: int

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.start, self.stop, self.T, self.t, self.r))


@dataclass(frozen=True)
class ReplicateSums:
    """A block's delete-a-group replicate sums (:mod:`.replicates`): for group g and column j, the
    exact sum of the column over the block's scored queries outside g, as the non-overlapping
    partials ``parts[g, j, :nparts[g, j]]`` (what :func:`math.fsum` keeps), and ``n[g]`` those
    queries."""

    parts: np.ndarray
    nparts: np.ndarray
    n: np.ndarray


def merge_replicates(blocks: list[ReplicateSums]) -> tuple[np.ndarray, np.ndarray]:
    """(means (groups, columns), scored queries per group) of the blocks' sums: each sum rounded
    once (``math.fsum`` of every block's partials: the same bits whatever the blocks), divided by
    its queries (NaN without one)."""
    n_groups, nm = blocks[0].nparts.shape
    n = np.sum([b.n for b in blocks], axis=0).astype(np.int64)
    means = np.full((n_groups, nm), np.nan)
    for g in range(n_groups):
        if n[g] == 0:
            continue
        for j in range(nm):
            terms = [x for b in blocks for x in b.parts[g, j, :b.nparts[g, j]].tolist()]
            means[g, j] = math.fsum(terms) / int(n[g])
    return means, n


@dataclass
class BlockResult:
    """What one block of queries gives back: merged exactly by :func:`assemble`."""

    c0: int
    c1: int
    chunk_q: np.ndarray  # indices into setup.query_positions
    values: np.ndarray
    curves: np.ndarray
    hist: np.ndarray  # (2, n_bins) integer counts: [negative, positive]
    tile_keys: np.ndarray  # (P, 2) tiles whose pairs this block binned
    tile_sums: np.ndarray  # (P, 2) their (positive, negative) score sums
    qhist: np.ndarray | None = None  # (queries, 2, n_bins) per-query pair histograms
    qsum: np.ndarray | None = None  # (queries, 2) per-query fixed-point score sums
    cutoffs: CutoffBlocks | None = None  # the block's queries' leading tie blocks (start, stop local)
    replicates: ReplicateSums | None = None  # the block's delete-a-group replicate sums


def tile_arrays(tile_sums: dict) -> tuple[np.ndarray, np.ndarray]:
    keys = sorted(tile_sums)
    return (np.asarray(keys, np.int64).reshape(-1, 2),
            np.asarray([tile_sums[k] for k in keys], np.float64).reshape(-1, 2))


def assemble(setup: Setup, blocks: list[BlockResult]) -> PassResult:
    """Merge block results exactly: per-query rows by position, integer histograms by addition,
    per-tile sums by ``math.fsum`` in canonical tile order. Refuses an incomplete set of blocks."""
    nq = setup.query_positions.size
    values = np.full((nq, len(setup.columns)), np.nan)
    curves = np.full((nq, setup.n_recall), np.nan)
    seen = np.zeros(nq, np.int64)
    hist = np.zeros((2, setup.n_bins), np.int64)
    qhist = np.zeros((nq, 2, setup.n_bins), np.int64) if setup.per_query_pairs else None
    qsum = np.zeros((nq, 2), np.int64) if setup.per_query_pairs else None
    for b in blocks:
        values[b.chunk_q] = b.values
        curves[b.chunk_q] = b.curves
        if setup.per_query_pairs:
            assert qhist is not None and qsum is not None and b.qhist is not None and b.qsum is not None
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
    cut = _merge_cutoffs(setup, blocks)
    reps = [b.replicates for b in blocks if b.replicates is not None]
    rep_means, rep_n = merge_replicates(reps) if setup.n_buckets > 1 and reps else (None, None)
    if setup.query_expand is not None:  # every query of a group has its ranked query's results
        e = setup.query_expand
        values, curves = values[e], curves[e]
        qhist, qsum = (None, None) if qhist is None or qsum is None else (qhist[e], qsum[e])
        if cut is not None:
            cut = replace(cut, start=cut.start[e], stop=cut.stop[e])
    return PassResult(
        query_items=setup.items[setup.all_query_positions], values=values, columns=setup.columns, pr_curves=curves,
        recall_grid=np.arange(setup.n_recall) / (setup.n_recall - 1),
        hist_edges=np.linspace(setup.score_lo, setup.score_hi, setup.n_bins + 1),
        hist_pos=hist[1], hist_neg=hist[0], sum_pos=math.fsum(sums[:, 0].tolist()),
        sum_neg=math.fsum(sums[:, 1].tolist()), ks=tuple(int(k) for k in setup.ks),
        n_unique_vectors=int(setup.vectors.shape[0]), query_hist=qhist,
        query_pair_sums=None if qsum is None else qsum / setup.fixed_point_scale, cutoff_blocks=cut,
        replicate_columns=setup.replicate_columns if rep_means is not None else (), replicate_means=rep_means,
        replicate_n=rep_n,
    )


def _merge_cutoffs(setup: Setup, blocks: list[BlockResult]) -> CutoffBlocks | None:
    """The blocks' :class:`CutoffBlocks` as one, rows by ranked query (None when the pass keeps none)."""
    if setup.cutoff_ranks == 0:
        return None
    nq = setup.query_positions.size
    start = np.zeros(nq, np.int64)
    stop = np.zeros(nq, np.int64)
    parts: list[CutoffBlocks] = []
    base = 0
    for b in blocks:
        if b.cutoffs is None:  # a block without queries (a Dask block pair's histogram)
            continue
        start[b.chunk_q] = b.cutoffs.start + base
        stop[b.chunk_q] = b.cutoffs.stop + base
        base += b.cutoffs.T.size
        parts.append(b.cutoffs)
    dtype = parts[0].T.dtype if parts else np.int64
    T, t, r = (np.concatenate([getattr(p, a) for p in parts]) if parts else np.zeros(0, dtype) for a in "Ttr")
    return CutoffBlocks(start, stop, T, t, r, setup.cutoff_ranks)
