"""New cutoffs without a new pass. The metrics at a cutoff k (Precision@k, Recall@K) read only a
query's positive tie blocks that start above rank k (``T < k``; :mod:`analysis_core.metrics.
tie_blocks`). A pass asked to (``cutoff_ranks``) keeps, per query, those of its blocks that start
above a rank ``max_rank`` (:class:`~.results.CutoffBlocks`): three integers per block, at most
min(max_rank, R) blocks per query. Every cutoff up to ``max_rank`` is then recomputed from them by
the very kernel calls of phase 3 (:func:`with_cutoffs`): the same values, in milliseconds.

Memory: ``max_rank`` is the largest rank up to the one asked for whose blocks fit the budget
``cutoff_mb``, bounded before the pass from each query's count of positive entries (so the pass
never holds more), and at least :data:`CUTOFF_FLOOR` (the cutoffs a user picks from: at most
16 + 32 x 12 = 400 bytes per query, about what its per-query results already take).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .cutoff_plan import PREFIX_KERNELS
from .results import CutoffBlocks, PassResult


def block_cutoffs(uoff: np.ndarray, ur: np.ndarray, gt: np.ndarray, eq: np.ndarray, max_rank: int,
                  dtype: np.dtype) -> CutoffBlocks:
    """The :class:`~.results.CutoffBlocks` of one block of queries from its phase-3 input
    (positive-score offsets ``uoff``, multiplicities ``ur``, negatives above ``gt`` and tied
    ``eq``), ``start``/``stop`` local to the block."""
    from .query_metrics import leading_blocks

    nq = uoff.shape[0] - 1
    off = np.zeros(nq + 1, np.int64)
    none = np.zeros(0, dtype)
    leading_blocks(uoff, ur, gt, eq, max_rank, off, none, none, none, False)
    np.cumsum(off, out=off)
    T, t, r = (np.empty(int(off[-1]), dtype) for _ in range(3))
    leading_blocks(uoff, ur, gt, eq, max_rank, off, T, t, r, True)
    return CutoffBlocks(off[:-1].copy(), off[1:].copy(), T, t, r, int(max_rank))


def answers(result: PassResult, ks: tuple[int, ...]) -> bool:
    """Whether :func:`with_cutoffs` can give ``result``'s columns at cutoffs ``ks`` without a pass."""
    from ..metrics.registry import query_columns

    b = result.cutoff_blocks
    return (b is not None and bool(ks) and max(ks) <= b.max_rank
            and all(m.kernel in PREFIX_KERNELS for m in query_columns(tuple(ks)) if m.cutoff == "k"))


def with_recall_at_1(result: PassResult) -> PassResult | None:
    """``result`` with a Recall@1 column: itself when it has one, else its cutoffs 1 from its kept
    tie blocks (:func:`with_cutoffs`); None when it kept none."""
    if "recall_at_1" in result.columns:
        return result
    return with_cutoffs(result, (1,)) if answers(result, (1,)) else None


def with_cutoffs(result: PassResult, ks: tuple[int, ...]) -> PassResult:
    """``result`` with the per-query columns of cutoffs ``ks`` (sorted, distinct) in place of its
    own: equal to a pass with ``ks`` (every other column, curve and histogram is the pass's own;
    the cutoff columns come from the same kernel calls on the same blocks). Needs
    :func:`answers`."""
    from .query_metrics import cutoff_metrics, metric_plan

    if not answers(result, ks):
        raise ValueError(f"this pass kept no tie blocks for cutoffs {ks}: run a pass with them")
    b = result.cutoff_blocks
    assert b is not None  # answers()
    columns, kernels, cutoffs = metric_plan(list(ks))
    at_k = np.nonzero(cutoffs >= 1)[0]  # metric j is column 1 + j; the other cutoff codes are negative
    old = {c: i for i, c in enumerate(result.columns)}
    values = np.empty((result.values.shape[0], len(columns)), np.float64)
    for i, c in enumerate(columns):
        if i - 1 not in at_k:  # R, the metrics over the whole ranking or at R, the tie counts
            values[:, i] = result.values[:, old[c]]
    cut = np.empty((values.shape[0], at_k.size), np.float64)
    cutoff_metrics(b.start, b.stop, b.T, b.t, b.r, kernels[at_k], cutoffs[at_k], cut)
    cut[result.values[:, 0] == 0] = np.nan  # lone queries: no metric, as the pass gives them
    values[:, 1 + at_k] = cut
    return replace(result, values=values, columns=columns, ks=tuple(int(k) for k in ks))

