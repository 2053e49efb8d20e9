"""Phase 2's compiled loops: a tile's pairs binned and its negatives ranked, in general and per
role case (numba, cached on disk, GIL released).

Layout shared by all kernels (built by :func:`analysis_core.engine.setup.prepare`):

* unique vectors are the rows/columns of the similarity tiles; the items of vector ``u`` form the
  item groups ``gptr[u]:gptr[u+1]`` (items with one class code and the same roles), each with
  its class code ``glab``, query / gallery flags ``gq``/``gg``, item count ``gn`` and first item
  position ``gitem`` (:class:`~.setup.Setup`); only a group's first item is a ranked query;
* per item position ``p``: ``slot[p]`` its query slot (or -1), ``qmin[p]`` its lowest positive
  score (+inf: not ranked);
* per query slot ``s``: its distinct positive scores ``uvals[uoff[s]:uoff[s+1]]`` ascending, with
  multiplicities ``ur``; ``gt``/``eq`` count the negatives above / equal to each of them.

Every count is an integer and every float sum is per tile (fixed order), so results do not depend
on how tiles are spread over threads. Scores are float32 or float64 (the ``precision`` option): the
kernels take the tile's dtype, and numba compiles (and caches) one version per dtype.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True, inline="always")
def bump(s, x, uoff, uvals, gt, eq, d=1):
    """Add ``d`` (a negative score x of query slot s: 1; one taken back off: -1) to the count of
    the positive score x ties and of the highest one below x (found by binary search)."""
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
        eq[lo] += d
    if lo > o0:
        gt[lo - 1] += d


@njit(cache=True, nogil=True, fastmath=True)
def _row_sums(row, b_start, la, qa, ga, b0, ulab, uq, ug):
    """Sums of the row's valid positive and negative pair scores (fast-path columns only).
    fastmath lets LLVM vectorise the reduction; the order is fixed by the compiled code and the
    canonical tile shape, so the result is still reproducible bit for bit."""
    spos = 0.0
    sneg = 0.0
    for b in range(b_start, row.shape[0]):
        ub = b0 + b
        lb = ulab[ub]
        ok = ((qa & ug[ub]) | (uq[ub] & ga)) != 0 and lb >= 0
        x = np.float64(row[b])
        spos += x if (ok and lb == la) else 0.0
        sneg += x if (ok and lb != la) else 0.0
    return spos, sneg


@njit(cache=True, nogil=True, inline="always")
def _fixed(x, fx):
    """A score on a fixed-point grid (``fx`` steps per unit): integer sums are exact, so per-query
    sums do not depend on the order tiles were processed in."""
    return np.int64(np.rint(np.float64(x) * fx))


@njit(cache=True, nogil=True)
def _pair_items(x, k, ua, ub, gptr, glab, gq, gg, gn, gitem, slot, uoff, uvals, qmin, gt, eq, hist, count_pairs,
                sums, qh, qs, fx):
    """Slow path for vectors shared by several items (exact duplicates): the pairs of vectors ua
    and ub (score x, bin k) per pair of item groups (see :class:`~.setup.Setup`), each standing
    for the product of their counts (a group with itself: its items' pairs), so a collapsed
    embedding costs its groups, not its items, squared. A group's ranked query (its first item,
    ``slot >= 0``) gets one count per gallery item of the other group. With per-query accumulators
    (``qh.shape[0] > 0``), each (query, gallery item) pair is also added to that query's histogram
    ``qh[slot, same, bin]`` and fixed-point sums ``qs[slot, same]``."""
    per_query = qh.shape[0] > 0
    for g in range(gptr[ua], gptr[ua + 1]):
        for h in range(g if ua == ub else gptr[ub], gptr[ub + 1]):
            qp = gq[g] != 0 and gg[h] != 0  # g's items rank h's
            pq = gq[h] != 0 and gg[g] != 0 and g != h  # h's rank g's (within one group: the same pairs)
            if not (qp or pq):
                continue
            # pairs, and gallery items each of g's (h's) queries ranks in the other group
            if g == h:
                n_pairs = gn[g] * (gn[g] - 1) // 2
                to_g, to_h = gn[g] - 1, 0
            else:
                n_pairs = gn[g] * gn[h]
                to_g, to_h = gn[h], gn[g]
            if n_pairs == 0:
                continue
            same = glab[g] == glab[h]
            sg = slot[gitem[g]]
            sh = slot[gitem[h]]
            if per_query:
                s_ = np.int64(same)
                if qp and sg >= 0:
                    qh[sg, s_, k] += to_g
                    qs[sg, s_] += _fixed(x, fx) * to_g
                if pq and sh >= 0:
                    qh[sh, s_, k] += to_h
                    qs[sh, s_] += _fixed(x, fx) * to_h
            if count_pairs:
                hist[0 if not same else 1, 0, k] += n_pairs
                sums[1 if not same else 0] += x * n_pairs
            if not same:
                if qp and x >= qmin[gitem[g]]:
                    bump(sg, x, uoff, uvals, gt, eq, to_g)
                if pq and x >= qmin[gitem[h]]:
                    bump(sh, x, uoff, uvals, gt, eq, to_h)


@njit(cache=True, nogil=True)
def count_tile(S, a0, b0, diag, gptr, glab, gq, gg, gn, gitem, slot, uoff, uvals, qmin, ulab, uq, ug, uslot,
               uqmin, gt, eq, hist, lo, inv_width, sums, count_pairs, qh, qs, fx):
    """Phase 2: for tile S (unique rows a0.., columns b0..), rank every negative against its
    query's positive scores (both directions of the pair), and bin every counted pair.

    Per unique vector u with exactly one item, ``ulab[u]`` (-1 if several items share u),
    ``uq``/``ug`` (query/gallery flags), ``uslot`` and ``uqmin`` (lowest positive score of its
    query, +inf if none) describe that item, so the common case reads small contiguous arrays;
    shared vectors go through ``_pair_items``. ``hist[same, lane, bin]`` has 4 interleaved lanes
    so consecutive pairs in the same bin do not wait on each other's increments.
    Queries outside the chunk being evaluated have ``qmin = +inf`` and are never ranked;
    ``count_pairs``: whether the tile's pairs go to the histograms and ``sums``.
    ``qh``, ``qs``, ``fx``: per-query pair histograms and fixed-point sums (see ``_pair_items``;
    empty ``qh`` = not wanted).
    """
    na, nb = S.shape
    per_query = qh.shape[0] > 0
    top = hist.shape[2] - 1
    shared_cols = np.nonzero(ulab[b0:b0 + nb] < 0)[0]
    cand = np.empty(nb, np.int64)
    for a in range(na):
        ua = a0 + a
        la = ulab[ua]
        row = S[a]
        if la < 0:  # the row's vector is shared by several items: every element the slow way
            for b in range(a if diag else 0, nb):
                x = row[b]
                k = min(max(int((x - lo) * inv_width), 0), top)
                _pair_items(x, k, ua, b0 + b, gptr, glab, gq, gg, gn, gitem, slot, uoff, uvals, qmin, gt, eq, hist,
                            count_pairs, sums, qh, qs, fx)
            continue
        qa = uq[ua]
        ga = ug[ua]
        ma = uqmin[ua]
        b_start = a + 1 if diag else 0  # a diagonal element is the item itself
        if count_pairs:
            sp, sn = _row_sums(row, b_start, la, qa, ga, b0, ulab, uq, ug)
            sums[0] += sp
            sums[1] += sn
        # hot loop: no calls; the rare negatives that reach a positive's score are buffered
        nc = 0
        for b in range(b_start, nb):
            ub = b0 + b
            lb = ulab[ub]
            if lb < 0:
                continue
            x = row[b]
            valid = (qa & ug[ub]) | (uq[ub] & ga)
            same = la == lb
            if count_pairs:
                k = min(max(int((x - lo) * inv_width), 0), top)
                hist[np.int64(same), b & 3, k] += valid
            if per_query and valid:
                k = min(max(int((x - lo) * inv_width), 0), top)
                s_ = np.int64(same)
                if qa and ug[ub] and uslot[ua] >= 0:
                    qh[uslot[ua], s_, k] += 1
                    qs[uslot[ua], s_] += _fixed(x, fx)
                if uq[ub] and ga and uslot[ub] >= 0:
                    qh[uslot[ub], s_, k] += 1
                    qs[uslot[ub], s_] += _fixed(x, fx)
            if (not same) and valid and (x >= ma or x >= uqmin[ub]):
                cand[nc] = b
                nc += 1
        for c in range(nc):
            b = cand[c]
            ub = b0 + b
            x = row[b]
            if x >= ma and qa and ug[ub]:
                bump(uslot[ua], x, uoff, uvals, gt, eq)
            if x >= uqmin[ub] and uq[ub] and ga:
                bump(uslot[ub], x, uoff, uvals, gt, eq)
        for c in range(shared_cols.shape[0]):
            b = shared_cols[c]
            if b < b_start:
                continue
            x = row[b]
            k = min(max(int((x - lo) * inv_width), 0), top)
            _pair_items(x, k, ua, b0 + b, gptr, glab, gq, gg, gn, gitem, slot, uoff, uvals, qmin, gt, eq, hist,
                        count_pairs, sums, qh, qs, fx)


@njit(cache=True, nogil=True)
def count_tile_loo(S, a0, b0, diag, ulab, uslot, uqmin, uoff, uvals, gt, eq, hist, lo, inv_width, sums, cand,
                   count_pairs):
    """Phase 2 of ``kernel="search"`` for tiles of one item per vector whose every pair is a
    (query, gallery) pair (:func:`.phases.one_direction_tile`). Same results as :func:`count_tile`,
    about three times faster: the hot loop only bins the pair and flags the negatives that reach a
    positive's score (``cand``, a per-worker buffer of at least ``S.size`` rows), which are ranked
    afterwards by binary search. (The default kernel bins such tiles with
    :func:`.binning.bin_tile` and ranks them with :func:`.ranking.rank_tile`.)"""
    na, nb = S.shape
    top = hist.shape[2] - 1
    spos = 0.0
    sneg = 0.0
    nc = 0
    for a in range(na):
        ua = a0 + a
        la = ulab[ua]
        ma = uqmin[ua]
        row = S[a]
        sp = 0.0
        sn = 0.0
        for b in range(a + 1 if diag else 0, nb):
            x = row[b]
            ub = b0 + b
            if la == ulab[ub]:
                if count_pairs:
                    hist[1, b & 3, min(max(int((x - lo) * inv_width), 0), top)] += 1
                    sp += x
            else:
                if count_pairs:
                    hist[0, b & 3, min(max(int((x - lo) * inv_width), 0), top)] += 1
                    sn += x
                if x >= ma or x >= uqmin[ub]:
                    cand[nc, 0] = a
                    cand[nc, 1] = b
                    nc += 1
        spos += sp
        sneg += sn
    for c in range(nc):
        a = cand[c, 0]
        b = cand[c, 1]
        x = S[a, b]
        if x >= uqmin[a0 + a]:
            bump(uslot[a0 + a], x, uoff, uvals, gt, eq)
        if x >= uqmin[b0 + b]:
            bump(uslot[b0 + b], x, uoff, uvals, gt, eq)
    sums[0] = spos
    sums[1] = sneg


@njit(cache=True, nogil=True)
def count_tile_roles(S, a0, b0, diag, ulab, uq, ug, uslot, uqmin, uoff, uvals, gt, eq, hist, lo, inv_width, sums,
                     cand, count_pairs, qh, qs, fx, rank):
    """Phase 2 for a tile without shared vectors when items have roles (query / gallery flags, e.g.
    a query sample against the whole gallery): :func:`count_tile_loo`'s single pass, plus the
    role checks of :func:`count_tile` and its optional per-query accumulators. Same results as
    :func:`count_tile`. ``rank = False``: no ranking (done by :func:`rank_rows`)."""
    na, nb = S.shape
    top = hist.shape[2] - 1
    per_query = qh.shape[0] > 0
    spos = 0.0
    sneg = 0.0
    nc = 0
    for a in range(na):
        ua = a0 + a
        la = ulab[ua]
        ma = uqmin[ua]
        qa = uq[ua]
        ga = ug[ua]
        sa = uslot[ua]
        row = S[a]
        sp = 0.0
        sn = 0.0
        for b in range(a + 1 if diag else 0, nb):
            ub = b0 + b
            ab = qa & ug[ub]  # a ranks b
            ba = uq[ub] & ga  # b ranks a
            if (ab | ba) == 0:
                continue
            x = row[b]
            same = la == ulab[ub]
            if count_pairs or per_query:
                k = min(max(int((x - lo) * inv_width), 0), top)
                s_ = np.int64(same)
                if count_pairs:
                    hist[s_, b & 3, k] += 1
                    if same:
                        sp += x
                    else:
                        sn += x
                if per_query:
                    if ab and sa >= 0:
                        qh[sa, s_, k] += 1
                        qs[sa, s_] += _fixed(x, fx)
                    sb = uslot[ub]
                    if ba and sb >= 0:
                        qh[sb, s_, k] += 1
                        qs[sb, s_] += _fixed(x, fx)
            if rank and (not same) and ((ab and x >= ma) or (ba and x >= uqmin[ub])):
                cand[nc, 0] = a
                cand[nc, 1] = b
                nc += 1
        spos += sp
        sneg += sn
    for c in range(nc):
        a = cand[c, 0]
        b = cand[c, 1]
        x = S[a, b]
        ua = a0 + a
        ub = b0 + b
        if uq[ua] and ug[ub] and x >= uqmin[ua]:
            bump(uslot[ua], x, uoff, uvals, gt, eq)
        if uq[ub] and ug[ua] and x >= uqmin[ub]:
            bump(uslot[ub], x, uoff, uvals, gt, eq)
    sums[0] = spos
    sums[1] = sneg
