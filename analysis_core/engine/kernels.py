"""Compiled inner loops of the streamed pass (numba, cached on disk, GIL released).

Layout shared by all kernels (built by :mod:`analysis_core.engine.core`):

* unique vectors are the rows/columns of the similarity tiles; ``uptr[u]:uptr[u+1]`` are the
  positions (in canonical item order) of the items whose vector is ``u``;
* per item position ``p``: ``lab[p]`` class code, ``isq[p]``/``isg[p]`` query / gallery flags,
  ``slot[p]`` its query slot (or -1);
* per query slot ``s``: its distinct positive scores ``uvals[uoff[s]:uoff[s+1]]`` ascending, with
  multiplicities ``ur``; ``gt``/``eq`` count the negatives above / equal to each of them.

Every count is an integer and every float sum is per tile (fixed order), so results do not depend
on how tiles are spread over threads.
"""

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
def collect_positive_scores(S, a0, b0, diag, uptr, lab, isq, isg, slot, toff, fill, thr):
    """Phase 1: write every (query, positive) score of tile S into the query's threshold list."""
    na, nb = S.shape
    for a in range(na):
        ua = a0 + a
        for b in range(a if diag else 0, nb):
            ub = b0 + b
            x = S[a, b]
            for p in range(uptr[ua], uptr[ua + 1]):
                for q in range(p + 1 if ua == ub else uptr[ub], uptr[ub + 1]):
                    if lab[p] != lab[q]:
                        continue
                    if isq[p] and isg[q]:
                        s = slot[p]
                        thr[toff[s] + fill[s]] = x
                        fill[s] += 1
                    if isq[q] and isg[p]:
                        s = slot[q]
                        thr[toff[s] + fill[s]] = x
                        fill[s] += 1


@njit(cache=True, nogil=True)
def distinct_thresholds(thr, toff):
    """Sort each query's positive scores and merge equal ones: (uvals, ur, uoff)."""
    nq = toff.shape[0] - 1
    uvals = np.empty(thr.shape[0], np.float32)
    ur = np.empty(thr.shape[0], np.int64)
    uoff = np.empty(nq + 1, np.int64)
    w = 0
    for s in range(nq):
        uoff[s] = w
        v = np.sort(thr[toff[s]:toff[s + 1]])
        for i in range(v.shape[0]):
            if i > 0 and v[i] == uvals[w - 1]:
                ur[w - 1] += 1
            else:
                uvals[w] = v[i]
                ur[w] = 1
                w += 1
    uoff[nq] = w
    return uvals[:w].copy(), ur[:w].copy(), uoff


@njit(cache=True, nogil=True, inline="always")
def _bump(s, x, uoff, uvals, gt, eq):
    o0 = uoff[s]
    o1 = uoff[s + 1]
    lo = o0
    hi = o1
    while lo < hi:
        mid = (lo + hi) >> 1
        if uvals[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    if lo < o1 and uvals[lo] == x:
        eq[lo] += 1
    if lo > o0:
        gt[lo - 1] += 1


@njit(cache=True, nogil=True)
def count_tile(S, a0, b0, diag, uptr, lab, isq, isg, slot, uoff, uvals, qmin, ufast, gt, eq,
               hist, lo, inv_width, sums, rows_in, cols_in, count_pairs):
    """Phase 2: for tile S (unique rows a0.., columns b0..), rank every negative against its
    query's positive scores (both directions of the pair), and bin every counted pair.

    ``qmin[p]`` is the lowest positive score of item p's query (+inf if none), a one-load
    rejection of the many negatives that rank below every positive. ``rows_in``/``cols_in`` say
    whether the queries of the tile's rows/columns are evaluated in this pass; ``count_pairs``
    whether this tile's pairs go to the histograms. ``sums`` receives this tile's sums of
    positive and negative pair scores (float64, summed in the tile's fixed order).
    ``ufast`` holds, per unique vector with exactly one item, that item's (label, query?,
    gallery?, slot, qmin) as float64 columns (label -1 marks a vector shared by several items),
    so the common case reads one contiguous row instead of chasing ``uptr``.
    """
    na, nb = S.shape
    # hist[same, lane, bin]: 4 interleaved lanes so that consecutive pairs landing in the same
    # bin do not wait on each other's increments
    nbins = hist.shape[2]
    spos = 0.0
    sneg = 0.0
    for a in range(na):
        ua = a0 + a
        pa0 = uptr[ua]
        pa1 = uptr[ua + 1]
        single_a = pa1 - pa0 == 1
        # row item (fast path: one item per unique vector)
        la = lab[pa0]
        qa = isq[pa0]
        ga = isg[pa0]
        sa = slot[pa0]
        ma = qmin[pa0]
        for b in range(a if diag else 0, nb):
            ub = b0 + b
            x = S[a, b]
            lb = ufast[ub, 0]
            if single_a and lb >= 0 and ua != ub:
                qp = qa and ufast[ub, 2] > 0
                pq = ufast[ub, 1] > 0 and ga
                if not (qp or pq):
                    continue
                k = int((x - lo) * inv_width)
                if k < 0:
                    k = 0
                elif k >= nbins:
                    k = nbins - 1
                if la == lb:
                    if count_pairs:
                        hist[1, b & 3, k] += 1
                        spos += x
                else:
                    if count_pairs:
                        hist[0, b & 3, k] += 1
                        sneg += x
                    if qp and rows_in and x >= ma:
                        _bump(sa, x, uoff, uvals, gt, eq)
                    if pq and cols_in and x >= ufast[ub, 4]:
                        _bump(np.int64(ufast[ub, 3]), x, uoff, uvals, gt, eq)
                continue
            pb0 = uptr[ub]
            pb1 = uptr[ub + 1]
            k = int((x - lo) * inv_width)
            if k < 0:
                k = 0
            elif k >= nbins:
                k = nbins - 1
            for p in range(pa0, pa1):
                for q in range(p + 1 if ua == ub else pb0, pb1):
                    qp = isq[p] and isg[q]
                    pq = isq[q] and isg[p]
                    if not (qp or pq):
                        continue
                    if lab[p] == lab[q]:
                        if count_pairs:
                            hist[1, 0, k] += 1
                            spos += x
                    else:
                        if count_pairs:
                            hist[0, 0, k] += 1
                            sneg += x
                        if qp and rows_in and x >= qmin[p]:
                            _bump(slot[p], x, uoff, uvals, gt, eq)
                        if pq and cols_in and x >= qmin[q]:
                            _bump(slot[q], x, uoff, uvals, gt, eq)
    sums[0] = spos
    sums[1] = sneg


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
