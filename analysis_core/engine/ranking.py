"""Ranking a tile's negatives by counting per positive threshold (compiled, cached, GIL released).

Layout as in :mod:`.kernels`. Used by phase 2 for tiles without shared vectors: after
:func:`.binning.bin_tile` / :func:`.kernels.count_tile_roles` binned the tile's pairs.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernels import bump


@njit(cache=True, nogil=True, fastmath=True)
def _count_above(xm, t):
    """(#{x > t}, #{x >= t}) over the row buffer. int32 accumulators kept int32 by explicit casts
    (numba would widen ``c + bool`` to int64, which LLVM does not vectorise well): each compare
    then becomes one SIMD subtract of its mask, measured 1.4x faster than float32 accumulators
    and 4x faster than int64 ones here. A row has at most TILE = 512 entries: no overflow."""
    c = np.int32(0)
    g = np.int32(0)
    one = np.int32(1)
    zero = np.int32(0)
    for b in range(xm.shape[0]):
        c = np.int32(c + (one if xm[b] > t else zero))
        g = np.int32(g + (one if xm[b] >= t else zero))
    return np.int64(c), np.int64(g)


@njit(cache=True, nogil=True, fastmath=True)
def _row_max(row):
    """The largest score of a non-empty row, in the row's dtype."""
    m = row[0]
    for b in range(1, row.shape[0]):
        m = max(m, row[b])
    return m


@njit(cache=True, nogil=True)
def rank_tile(S, a0, b0, diag, ulab, uq, ug, uslot, uqmin, uoff, uvals, gt, eq, xm, tbuf, how):
    """Rank the negatives of tile S in both directions by :func:`rank_rows`: its rows' queries
    against its columns, then (on the transposed tile, ``tbuf``: a buffer of at least S.size)
    its columns' queries against its rows; the transposition is skipped when no column is a
    query being ranked."""
    na, nb = S.shape
    rank_rows(S, a0, b0, 1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how)
    lowest = np.min(uqmin[b0:b0 + nb])  # +inf: no column is a query being ranked (gallery only)
    tile_max = -np.inf
    for a in range(na):
        tile_max = max(tile_max, _row_max(S[a]))
    if tile_max < lowest:
        return  # no column score reaches its query's lowest positive: nothing to rank
    # the transposed rows that reach no positive are skipped by rank_rows' row maximum: the
    # transposition (0.13 ms a tile) costs less than a column-maximum pass deciding it (0.16 ms)
    rank_rows(transpose(S, tbuf), b0, a0, -1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how)


@njit(cache=True, nogil=True)
def rank_rows(S, a0, b0, side, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how):
    """Rank the negatives of each row of S against the positive scores of the row's query.

    For a query with R distinct positive scores t_0 < ... < t_{R-1} the ranks are counts per
    threshold: C_k = #{negatives x > t_k} and #{x == t_k}; ``gt[k] = C_k - C_{k+1}`` and
    ``eq[k]`` are exactly what :func:`_bump` gives one negative at a time. Three ways per row:

    * counting: R branch-free vectorised passes over the row; the cost is R x row length
      whatever the scores, i.e. it does not grow with how hard the data is;
    * cells (:func:`_rank_by_cells`): each score's place among the R thresholds read off a table
      of 2R cells, a constant cost per score whatever R (large classes: R in the hundreds);
    * search: each of the m negatives reaching t_0 placed by binary search, about log2 R
      unpredictable branches each: cheap when m is small (easy data), slow when m ~ row length.

    ``how``: 0 per row, whichever costs least by a measured model (:func:`_way`); 1 counting
    always; 2 cells always (the tests pin every way against the others). When every column is a
    gallery item (leave-one-out, a query-only tile against a gallery-only one) the counting
    passes run on the row itself and the row's few positives are taken off the counts, instead of
    on a masked copy of the row.

    ``side``: 0 every column; 1 only columns b > a (a diagonal tile); -1 only b < a (the
    transpose of a diagonal tile). Tiles without shared vectors only (``ulab >= 0``).
    ``xm``: a per-worker buffer of S's dtype and at least ``S.shape[1]`` entries."""
    na, nb = S.shape
    xrow = xm[:nb]
    # masks as additions and stores, not selects: LLVM vectorises ``row + pen`` (0.13 ns an
    # element here) but not a per-element select (0.8 ns). pen: -inf for non-gallery columns
    # (x + 0 is x, up to the sign of a zero, which no comparison sees).
    pen = np.where(ug[b0:b0 + nb] != 0, 0.0, -np.inf).astype(S.dtype)
    all_gallery = np.all(pen == 0.0)  # then a row is counted in place, its positives taken off
    pv = np.empty(nb, S.dtype)
    lut = np.empty(0, np.int64)  # the cells' tables (_rank_by_cells), grown as needed
    tfirst = np.empty(0, np.float64)
    multi = np.empty(0, np.uint8)
    jh = np.empty(0, np.int64)
    cb = np.empty(nb, np.int32)
    labc = ulab[b0:b0 + nb]
    by_class = np.argsort(labc, kind="mergesort")  # the same-class columns of a row: one range
    sorted_lab = labc[by_class]
    for a in range(na):
        ua = a0 + a
        s = uslot[ua]
        if s < 0 or uq[ua] == 0:
            continue
        o0 = uoff[s]
        o1 = uoff[s + 1]
        if o1 == o0:
            continue
        row = S[a]
        t0 = uvals[o0]
        if _row_max(row) < t0:
            continue  # nothing in the row reaches a positive (most rows of easy data)
        la = ulab[ua]
        p0 = np.searchsorted(sorted_lab, la)
        p1 = np.searchsorted(sorted_lab, la, side="right")
        R = o1 - o0
        # the columns ranked: b > a (side 1), b < a (side -1) or all, the row's positives apart
        lo_b = a + 1 if side == 1 else 0
        hi_b = a if side == -1 else nb
        if all_gallery and hi_b > lo_b:
            # counting on the row itself (no masked copy: one pass less), minus what its positives
            # in [lo_b, hi_b) add: the same counts as on the masked copy
            view = row[lo_b:hi_b]
            _, m = _count_above(view, t0)  # the row's positives included: decides the way only
            if m == 0:
                continue
            if _way(how, m, R, nb) == COUNT:
                n_pv = 0  # the row's positive scores in [lo_b, hi_b), ascending
                for p in range(p0, p1):
                    b = by_class[p]
                    if lo_b <= b < hi_b:
                        pv[n_pv] = row[b]
                        n_pv += 1
                if n_pv > 1:
                    pv[:n_pv].sort()
                if m == n_pv - np.searchsorted(pv[:n_pv], t0):
                    continue  # only positives reach t_0
                above = 0
                i_gt = i_ge = n_pv  # positives > t / >= t: pv[i_gt:], pv[i_ge:], t descending
                for k in range(o1 - 1, o0 - 1, -1):
                    t = uvals[k]
                    while i_gt > 0 and pv[i_gt - 1] > t:
                        i_gt -= 1
                    while i_ge > 0 and pv[i_ge - 1] >= t:
                        i_ge -= 1
                    c, g = _count_above(view, t)
                    c -= n_pv - i_gt
                    g -= n_pv - i_ge
                    eq[k] += g - c
                    gt[k] += c - above
                    above = c
                continue
        for b in range(nb):
            xrow[b] = row[b] + pen[b]
        xrow[:lo_b] = -np.inf  # the diagonal tile: pairs (a, b > a) only; the item itself never
        xrow[hi_b:] = -np.inf
        for p in range(p0, p1):
            xrow[by_class[p]] = -np.inf  # positives are not ranked
        _, m = _count_above(xrow, t0)
        if m == 0:
            continue
        way = _way(how, m, R, nb)
        if way == COUNT:
            above = 0  # C_{k+1}, from the highest threshold down
            for k in range(o1 - 1, o0 - 1, -1):
                c, g = _count_above(xrow, uvals[k])
                eq[k] += g - c
                gt[k] += c - above
                above = c
        elif way == CELLS:
            if lut.shape[0] < 2 * R + 2:
                lut = np.empty(2 * R + 2, np.int64)
                tfirst = np.empty(2 * R + 2, np.float64)
                multi = np.empty(2 * R + 2, np.uint8)
                jh = np.empty(2 * R + 2, np.int64)
            _rank_by_cells(xrow, uvals, o0, o1, gt, eq, lut, tfirst, multi, cb, jh)
        else:
            for b in range(nb):
                x = xrow[b]
                if x >= t0:
                    bump(s, x, uoff, uvals, gt, eq)


SEARCH, COUNT, CELLS = 0, 1, 2
#: the cost of ranking one score by cells, in counting compares (one threshold, one score):
#: measured here on real rows (near-chance data, R ~ 105, every row different: mispredicted
#: branches included) ~12 ns a score against 0.135 ns a compare, so cells win from R ~ 90 on,
#: 10x at R ~ 1000 (ten classes of a thousand, CIFAR-10's test set)
CELL_COST = 90


@njit(cache=True, nogil=True)
def _way(how, m, R, nb):
    """How a row with R distinct positive scores, m negatives reaching the lowest, of nb
    columns is ranked: SEARCH, COUNT or CELLS (costs in counting compares; a search step ~64,
    measured ~12 ns)."""
    if how == 1:
        return COUNT
    if how == 2:
        return CELLS if R >= 2 else COUNT  # one threshold: one counting pass
    count = R * nb
    search = 64 * m * (int(np.log2(R)) + 1)
    cells = CELL_COST * nb + 4 * R
    if search <= count and search <= cells:
        return SEARCH
    return COUNT if count <= cells else CELLS


@njit(cache=True, nogil=True)
def _rank_by_cells(xrow, uvals, o0, o1, gt, eq, lut, tfirst, multi, cb, jh):
    """Rank the row's scores (masked ones are -inf) against the R >= 2 distinct ascending
    thresholds ``uvals[o0:o1]`` through a table of G = 2 min(R, row length) cells over
    [t_0, t_{R-1}].

    A score's cell is ``min((x - t_0) * scale, G - 1)`` truncated, in float64: monotone in x, and
    the thresholds' cells come from the same arithmetic, so a threshold in a lower cell is below
    the score, one in a higher cell above it, and only the thresholds of the score's own cell are
    compared exactly: one compare when the cell holds at most one (``tfirst``, +inf if none; no
    branch), a short loop when it holds more (``multi``). Then j = #{t_k < x}: the score is above
    t_0..t_{j-1} (``gt[j - 1] += 1``: C_{j-1} - C_j counts it) and ties t_j if equal. Table index
    c + 1 is cell c, index 0 the scores below t_0. Buffers: ``lut`` int64 and ``tfirst`` float64
    and ``multi`` uint8 of at least 2R + 2, ``cb`` int32 of the row's length, ``jh`` int64 of R + 1."""
    R = o1 - o0
    G = 2 * min(R, xrow.shape[0])  # cells: about one threshold each, or one score each
    t0 = np.float64(uvals[o0])
    scale = G / (np.float64(uvals[o1 - 1]) - t0)
    top = np.float64(G - 1)
    lut[:G + 2] = 0
    tfirst[:G + 1] = np.inf
    multi[:G + 1] = 0
    for k in range(o0, o1):
        c = np.int64(min((np.float64(uvals[k]) - t0) * scale, top)) + 1
        if lut[c + 1] == 0:
            tfirst[c] = uvals[k]
        else:
            multi[c] = 1
        lut[c + 1] += 1
    for c in range(G + 1):
        lut[c + 1] += lut[c]  # lut[c]: thresholds in the cells below index c
    for b in range(xrow.shape[0]):  # vectorised: the conversion to int32 is SIMD on AVX2
        v = (np.float64(xrow[b]) - t0) * scale
        cb[b] = np.int32(min(max(v + 1.0, 0.0), top + 1.0))
    jh[:R + 1] = 0
    for b in range(xrow.shape[0]):
        c = cb[b]
        x = xrow[b]
        j = lut[c]
        if multi[c]:
            e = lut[c + 1]
            while j < e and uvals[o0 + j] < x:
                j += 1
            if j < e and uvals[o0 + j] == x:
                eq[o0 + j] += 1
        else:
            tf = tfirst[c]
            j += 1 if x > tf else 0
            if x == tf:
                eq[o0 + j] += 1
        jh[j] += 1
    for j in range(1, R + 1):
        gt[o0 + j - 1] += jh[j]


@njit(cache=True, nogil=True)
def transpose(S, out):
    """``S.T`` into the buffer ``out``, in 4 x 8 blocks written whole (LLVM turns each block into
    register shuffles: measured 2.6x faster here than a row of 16-element strips, 0.16 against
    0.42 ms for a 512 x 512 float32 tile); the ragged edges element by element."""
    na, nb = S.shape
    T = out[:na * nb].reshape(nb, na)
    nb8 = nb - nb % 8
    na4 = na - na % 4
    for b0 in range(0, nb8, 8):
        for a0 in range(0, na4, 4):
            for bb in range(8):
                for aa in range(4):
                    T[b0 + bb, a0 + aa] = S[a0 + aa, b0 + bb]
        for a in range(na4, na):
            for b in range(b0, b0 + 8):
                T[b, a] = S[a, b]
    for b in range(nb8, nb):
        for a in range(na):
            T[b, a] = S[a, b]
    return T
