"""Phase 3, compiled: a query's positive tie blocks rebuilt from its phase-2 counts, and every
per-query metric evaluated on them (definitions in :mod:`analysis_core.metrics.tie_blocks`)."""

from __future__ import annotations

import numpy as np
from numba import njit

from ..metrics.tie_blocks import (
    ap_bounds,
    expected_ap,
    expected_hit_at,
    expected_precision_at,
    expected_reciprocal_rank,
    pr_curve,
)


@njit(cache=True, nogil=True)
def query_metrics(uoff, uvals, ur, gt, eq, ks, n_points, interpolated, out, curves):
    """Phase 3: per query slot, rebuild its positive tie blocks and evaluate every metric.

    ``out`` columns: R, E[AP], AP-, AP+, MAP@R, R-precision, RR, mixed tie blocks,
    tied negatives, then P@k and Recall@k for each k in ``ks``.
    """
    nq = uoff.shape[0] - 1
    nk = ks.shape[0]
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
        R = pos_above
        lo, hi = ap_bounds(T, t, r)
        out[s, 0] = R
        out[s, 1] = expected_ap(T, t, r, np.iinfo(np.int64).max)
        out[s, 2] = lo
        out[s, 3] = hi
        out[s, 4] = expected_ap(T, t, r, R)
        out[s, 5] = expected_precision_at(T, t, r, R)
        out[s, 6] = expected_reciprocal_rank(T, t, r)
        out[s, 7] = mixed
        out[s, 8] = tied_neg
        for j in range(nk):
            out[s, 9 + j] = expected_precision_at(T, t, r, ks[j])
            out[s, 9 + nk + j] = expected_hit_at(T, t, r, ks[j])
        curves[s, :] = pr_curve(T, t, r, n_points, interpolated)
