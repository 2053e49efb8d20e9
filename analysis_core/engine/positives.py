"""Phase 1's compiled loops: every query's positive scores, gathered from the tiles holding
same-class pairs, then sorted with equal scores merged (or only each query's top score, for hit rates
only); cached, GIL released. Layout as in :mod:`.kernels`."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def collect_positive_scores(S, a0, b0, diag, uptr, lab, isq, isg, slot, toff, fill, thr):
    """Phase 1: write every (query, positive) score of tile S into the query's threshold list
    (queries with ``slot >= 0``: those of the chunk being evaluated)."""
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


def load_compiled_code() -> None:
    """Start numba in this process (its first call costs ~0.5 s: target set-up and imports) by
    loading one small kernel's cached machine code, with the argument types the pass uses."""
    thr = np.zeros(1, np.float32)
    distinct_thresholds(thr, np.array([0, 1], np.int64))
