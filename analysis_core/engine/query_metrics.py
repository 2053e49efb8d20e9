"""Phase 3, compiled: a query's positive tie blocks rebuilt from its phase-2 counts, and every
per-query metric evaluated on them (definitions in :mod:`analysis_core.metrics.tie_blocks`).

numba's on-disk cache of this module holds the tie-block kernels compiled into it, and is
invalidated only when this file changes (not when :mod:`~analysis_core.metrics.tie_blocks` does):
a change there needs a change here (this note was last edited for the tie blocks kept for new
cutoffs, :func:`leading_blocks`)."""

from __future__ import annotations

from typing import cast

import numpy as np
from numba import njit

from ..metrics.tie_blocks import (
    ap_bounds,
    expected_ap,
    expected_hit_at,
    expected_ndcg,
    expected_precision_at,
    expected_reciprocal_rank,
    pr_curve,
)

#: the tie-block kernels phase 3 evaluates, by the name the metric registry
#: (:mod:`analysis_core.metrics.registry`) gives them; a new metric's kernel adds its name here and
#: its line in :func:`evaluate_kernel`. Ids are literals in this file, so numba's on-disk cache of
#: this module is invalidated whenever the dispatch changes.
KERNEL_IDS = {"expected_ap": 0, "ap_lower": 1, "ap_upper": 2, "expected_precision_at": 3, "expected_hit_at": 4,
              "expected_reciprocal_rank": 5, "expected_ndcg": 6}
#: cutoff codes: the whole ranking, the query's R; any other value is the rank k itself
CUT_ALL = -1
CUT_R = -2
#: columns phase 3 writes besides the registry's metrics: R first, the tie counts last
LEADING = ("n_positives",)
TRAILING = ("n_mixed_tie_blocks", "n_tied_negatives")


@njit(cache=True, nogil=True)
def evaluate_kernel(kernel, T, t, r, cutoff, ap_lo, ap_hi):
    """The value of kernel ``kernel`` (an id of :data:`KERNEL_IDS`) on one query's tie blocks."""
    if kernel == 0:
        return expected_ap(T, t, r, cutoff)
    if kernel == 1:
        return ap_lo
    if kernel == 2:
        return ap_hi
    if kernel == 3:
        return expected_precision_at(T, t, r, cutoff)
    if kernel == 4:
        return expected_hit_at(T, t, r, cutoff)
    if kernel == 5:
        return expected_reciprocal_rank(T, t, r)
    if kernel == 6:
        return expected_ndcg(T, t, r, cutoff)
    return np.nan


@njit(cache=True, nogil=True)
def tie_blocks_of(o0, nb, ur, gt, eq, T, t, r):
    """A query's positive tie blocks ``T, t, r[:nb]`` (descending score order) from its counts at
    its distinct positive scores ``o0 .. o0 + nb - 1`` (ascending; ``ur`` their multiplicities,
    ``gt`` the negatives between each and the next, ``eq`` those tied with it); returns (R, mixed
    tie blocks, tied negatives)."""
    neg_above = 0
    pos_above = 0
    mixed = 0
    tied_neg = 0
    for c in range(nb):  # descending score order = ascending index from the end
        i = o0 + nb - 1 - c
        neg_above += gt[i]
        T[c] = pos_above + neg_above
        r[c] = ur[i]
        t[c] = ur[i] + eq[i]
        pos_above += ur[i]
        if eq[i] > 0:
            mixed += 1
            tied_neg += eq[i]
    return pos_above, mixed, tied_neg


@njit(cache=True, nogil=True)
def query_metrics(uoff, uvals, ur, gt, eq, kernels, cutoffs, n_points, interpolated, out, curves):
    """Phase 3: per query slot, rebuild its positive tie blocks and evaluate every metric.

    ``out`` columns: R, then metric j = kernel ``kernels[j]`` at cutoff ``cutoffs[j]`` (the
    registry's per-query columns), then mixed tie blocks and tied negatives.
    """
    nq = uoff.shape[0] - 1
    nm = kernels.shape[0]
    for s in range(nq):
        o0 = uoff[s]
        nb = uoff[s + 1] - o0
        if nb == 0:
            for c in range(out.shape[1]):
                out[s, c] = np.nan
            out[s, 0] = 0
            for c in range(n_points):
                curves[s, c] = np.nan
            continue
        T = np.empty(nb, np.int64)
        t = np.empty(nb, np.int64)
        r = np.empty(nb, np.int64)
        R, mixed, tied_neg = tie_blocks_of(o0, nb, ur, gt, eq, T, t, r)
        lo, hi = ap_bounds(T, t, r)
        out[s, 0] = R
        for j in range(nm):
            cut = cutoffs[j]
            if cut == CUT_ALL:
                cut = np.iinfo(np.int64).max
            elif cut == CUT_R:
                cut = R
            out[s, 1 + j] = evaluate_kernel(kernels[j], T, t, r, cut, lo, hi)
        out[s, 1 + nm] = mixed
        out[s, 2 + nm] = tied_neg
        curves[s, :] = pr_curve(T, t, r, n_points, interpolated)


@njit(cache=True, nogil=True)
def leading_blocks(uoff, ur, gt, eq, max_rank, off, T, t, r, fill):
    """Each query slot's positive tie blocks that start above rank ``max_rank`` (``T < max_rank``),
    rebuilt as :func:`query_metrics` rebuilds them: all that a metric at a cutoff k <= max_rank
    reads (:func:`~analysis_core.metrics.tie_blocks.expected_precision_at` stops at the first
    block with ``T >= k``, :func:`~analysis_core.metrics.tie_blocks.expected_hit_at` reads the
    first block only). Without ``fill`` it writes each slot's count to ``off[s + 1]``; with it,
    slot s's blocks to ``T, t, r[off[s]:off[s + 1]]``."""
    nq = uoff.shape[0] - 1
    for s in range(nq):
        o0 = uoff[s]
        nb = uoff[s + 1] - o0
        neg_above = 0
        pos_above = 0
        n = 0
        for c in range(nb):  # descending score order, as in query_metrics
            i = o0 + nb - 1 - c
            neg_above += gt[i]
            if pos_above + neg_above >= max_rank:
                break  # T only grows: no later block starts above max_rank either
            if fill:
                j = off[s] + n
                T[j] = pos_above + neg_above
                t[j] = ur[i] + eq[i]
                r[j] = ur[i]
            n += 1
            pos_above += ur[i]
        if not fill:
            off[s + 1] = n


@njit(cache=True, nogil=True)
def cutoff_metrics(start, stop, T, t, r, kernels, cutoffs, out):
    """``out[s, j]``: kernel ``kernels[j]`` at rank ``cutoffs[j]`` on the blocks
    ``T, t, r[start[s]:stop[s]]`` of :func:`leading_blocks` (every cutoff at most their
    ``max_rank``), by the same call as :func:`query_metrics` makes: the same values."""
    for s in range(start.shape[0]):
        a = start[s]
        b = stop[s]
        for j in range(kernels.shape[0]):
            out[s, j] = evaluate_kernel(kernels[j], T[a:b], t[a:b], r[a:b], cutoffs[j], 0.0, 0.0)


def metric_plan(ks, hit_rates_only: bool = False) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """(output columns, kernel ids, cutoff codes) of phase 3 for cutoffs ``ks``, from the registry;
    ``hit_rates_only``: the Recall@K columns only (see :func:`~.core.run_pass`)."""
    from ..metrics.registry import query_columns

    metrics = query_columns(tuple(int(k) for k in ks))
    if hit_rates_only:
        metrics = [m for m in metrics if m.kernel == "expected_hit_at"]
    code = {"all": CUT_ALL, "R": CUT_R}
    # every per-query metric has a kernel and a column (query_columns)
    kernels = np.array([KERNEL_IDS[cast(str, m.kernel)] for m in metrics], np.int64)
    cutoffs = np.array([m.k if m.cutoff == "k" else code[m.cutoff] for m in metrics], np.int64)
    return LEADING + tuple(cast(str, m.column) for m in metrics) + TRAILING, kernels, cutoffs
