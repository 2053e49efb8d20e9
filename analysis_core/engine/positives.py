"""Phase 1's compiled loops: every query's positive scores, gathered from the tiles holding
same-class pairs, then sorted with equal scores merged (or only each query's top score, for hit rates
only); cached, GIL released. Layout as in :mod:`.kernels`."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def collect_positive_scores(S, a0, b0, diag, uptr, lab, isq, isg, slot, toff, fill, thr):
    """Phase 1: write every (query, positive) score of tile S into the query's threshold list
    (queries with ``slot >= 0``: those of the chunk being evaluated). Each list is sorted or
    reduced to its maximum afterwards, so the order of the writes does not matter.

    A tile whose vectors are one item each visits only each row's same-class columns (found in
    the columns' labels sorted once: one range per row), not its every pair: a query sample's or
    a query/gallery split's query tiles hold positives in every tile, and visiting every pair cost
    about as much as ranking."""
    na, nb = S.shape
    single = True
    for u in range(a0, a0 + na):
        single &= uptr[u + 1] - uptr[u] == 1
    for u in range(b0, b0 + nb):
        single &= uptr[u + 1] - uptr[u] == 1
    if single:
        col_lab = np.empty(nb, lab.dtype)
        for b in range(nb):
            col_lab[b] = lab[uptr[b0 + b]]
        by_class = np.argsort(col_lab, kind="mergesort")
        sorted_lab = col_lab[by_class]
        for a in range(na):
            p = uptr[a0 + a]
            la = lab[p]
            for t in range(np.searchsorted(sorted_lab, la), np.searchsorted(sorted_lab, la, side="right")):
                b = by_class[t]
                if diag and b <= a:
                    continue  # the pair is row b's (b < a), or the item itself
                q = uptr[b0 + b]
                _record(S[a, b], p, q, isq, isg, slot, toff, fill, thr)
        return
    for a in range(na):
        ua = a0 + a
        for b in range(a if diag else 0, nb):
            ub = b0 + b
            x = S[a, b]
            for p in range(uptr[ua], uptr[ua + 1]):
                for q in range(p + 1 if ua == ub else uptr[ub], uptr[ub + 1]):
                    if lab[p] == lab[q]:
                        _record(x, p, q, isq, isg, slot, toff, fill, thr)


@njit(cache=True, nogil=True, inline="always")
def _record(x, p, q, isq, isg, slot, toff, fill, thr):
    """Same-class items p and q with score x: x is a positive score of each of them that is a
    query of the chunk ranking the other."""
    if isq[p] and isg[q] and slot[p] >= 0:
        s = slot[p]
        thr[toff[s] + fill[s]] = x
        fill[s] += 1
    if isq[q] and isg[p] and slot[q] >= 0:
        s = slot[q]
        thr[toff[s] + fill[s]] = x
        fill[s] += 1


@njit(cache=True, nogil=True)
def distinct_thresholds(thr, toff):
    """Sort each query's positive scores and merge equal ones: (uvals, ur, uoff)."""
    nq = toff.shape[0] - 1
    uvals = np.empty_like(thr)  # the scores' dtype (float32, or float64 with that precision)
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


@njit(cache=True, nogil=True)
def top_thresholds(thr, toff):
    """Each query's highest positive score and how many positives have it, as (uvals, ur, uoff)
    in the layout of :func:`distinct_thresholds` with only its last entry per query: the top
    tie block that holds a positive, all a hit rate depends on. No sort: a pass over the scores."""
    nq = toff.shape[0] - 1
    uvals = np.empty(nq, thr.dtype)
    ur = np.empty(nq, np.int64)
    uoff = np.empty(nq + 1, np.int64)
    w = 0
    for s in range(nq):
        uoff[s] = w
        if toff[s + 1] == toff[s]:
            continue
        m = thr[toff[s]]
        c = 0
        for i in range(toff[s], toff[s + 1]):
            x = thr[i]
            if x > m:
                m = x
                c = 1
            elif x == m:
                c += 1
        uvals[w] = m
        ur[w] = c
        w += 1
    uoff[nq] = w
    return uvals[:w].copy(), ur[:w].copy(), uoff
