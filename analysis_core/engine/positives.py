"""Phase 1's compiled loops: every query's positive scores, gathered from the tiles holding
same-class pairs, then sorted with equal scores merged (or only each query's top score, for hit rates
only); cached, GIL released. Layout as in :mod:`.kernels`."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def collect_positive_scores(S, a0, b0, diag, gptr, glab, gq, gg, gn, gitem, slot, toff, fill, thr, thw):
    """Phase 1: write every (query, positive) score of tile S into the query's threshold list
    (queries with ``slot >= 0``: those of the chunk being evaluated), per item group (see
    :class:`~.setup.Setup`): a query's positives in a group of n items are one entry of weight n
    in ``thw`` (empty: every group is one item, every weight 1). Each list is sorted or reduced to
    its maximum afterwards, so the order of the writes does not matter.

    A tile whose vectors are one item each visits only each row's same-class columns (found in
    the columns' labels sorted once: one range per row), not its every pair: a query sample's or
    a query/gallery split's query tiles hold positives in every tile, and visiting every pair cost
    about as much as ranking. Other tiles visit every pair of groups of a pair of vectors: the
    cost of a collapsed embedding is its number of groups, not of items, squared."""
    na, nb = S.shape
    single = True
    for u in range(a0, a0 + na):
        single &= gptr[u + 1] - gptr[u] == 1 and gn[gptr[u]] == 1
    for u in range(b0, b0 + nb):
        single &= gptr[u + 1] - gptr[u] == 1 and gn[gptr[u]] == 1
    if single:
        col_lab = np.empty(nb, glab.dtype)
        for b in range(nb):
            col_lab[b] = glab[gptr[b0 + b]]
        by_class = np.argsort(col_lab, kind="mergesort")
        sorted_lab = col_lab[by_class]
        for a in range(na):
            g = gptr[a0 + a]
            la = glab[g]
            for t in range(np.searchsorted(sorted_lab, la), np.searchsorted(sorted_lab, la, side="right")):
                b = by_class[t]
                if diag and b <= a:
                    continue  # the pair is row b's (b < a), or the item itself
                h = gptr[b0 + b]
                _record(S[a, b], gitem[g], gitem[h], gq[g], gg[g], gq[h], gg[h], 1, 1, slot, toff, fill, thr, thw)
        return
    for a in range(na):
        ua = a0 + a
        for b in range(a if diag else 0, nb):
            ub = b0 + b
            x = S[a, b]
            for g in range(gptr[ua], gptr[ua + 1]):
                for h in range(g if ua == ub else gptr[ub], gptr[ub + 1]):
                    if glab[g] != glab[h]:
                        continue
                    if g == h:  # the group's items are each other's positives
                        if gq[g] and gg[g] and gn[g] > 1:
                            _add(x, slot[gitem[g]], gn[g] - 1, toff, fill, thr, thw)
                        continue
                    _record(x, gitem[g], gitem[h], gq[g], gg[g], gq[h], gg[h], gn[g], gn[h], slot, toff, fill,
                            thr, thw)


@njit(cache=True, nogil=True, inline="always")
def _record(x, p, q, qp, gp, qq, gq_, n_p, n_q, slot, toff, fill, thr, thw):
    """Same-class groups of first items p and q (flags qp, gp / qq, gq_, sizes n_p, n_q) with
    score x: x is a positive score of each of them that is a query of the chunk ranking the other,
    as often as the other group has items."""
    if qp and gq_:
        _add(x, slot[p], n_q, toff, fill, thr, thw)
    if qq and gp:
        _add(x, slot[q], n_p, toff, fill, thr, thw)


@njit(cache=True, nogil=True, inline="always")
def _add(x, s, w, toff, fill, thr, thw):
    """Entry x of weight w in query slot s's list (nothing when s < 0: not in the chunk)."""
    if s < 0:
        return
    i = toff[s] + fill[s]
    thr[i] = x
    if thw.shape[0] > 0:
        thw[i] = w
    fill[s] += 1


@njit(cache=True, nogil=True)
def distinct_thresholds(thr, thw, toff):
    """Sort each query's positive scores and merge equal ones, adding their weights ``thw``
    (empty: every weight 1): (uvals, ur, uoff)."""
    nq = toff.shape[0] - 1
    uvals = np.empty_like(thr)  # the scores' dtype (float32, or float64 with that precision)
    ur = np.empty(thr.shape[0], np.int64)
    uoff = np.empty(nq + 1, np.int64)
    weighted = thw.shape[0] > 0
    w = 0
    for s in range(nq):
        uoff[s] = w
        seg = thr[toff[s]:toff[s + 1]]
        order = np.empty(0, np.int64)
        if weighted:
            order = np.argsort(seg, kind="mergesort")
            v = seg[order]
        else:
            v = np.sort(seg)
        for i in range(v.shape[0]):
            n = thw[toff[s] + order[i]] if weighted else 1
            if i > 0 and v[i] == uvals[w - 1]:
                ur[w - 1] += n
            else:
                uvals[w] = v[i]
                ur[w] = n
                w += 1
    uoff[nq] = w
    return uvals[:w].copy(), ur[:w].copy(), uoff


@njit(cache=True, nogil=True)
def top_thresholds(thr, thw, toff):
    """Each query's highest positive score and how many positives have it (weights ``thw`` as in
    :func:`distinct_thresholds`), as (uvals, ur, uoff) in the layout of :func:`distinct_thresholds`
    with only its last entry per query: the top tie block that holds a positive, all a hit rate
    depends on. No sort: a pass over the scores."""
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
            n = thw[i] if thw.shape[0] > 0 else 1
            if x > m:
                m = x
                c = n
            elif x == m:
                c += n
        uvals[w] = m
        ur[w] = c
        w += 1
    uoff[nq] = w
    return uvals[:w].copy(), ur[:w].copy(), uoff
