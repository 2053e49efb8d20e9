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
def _count_at_least(xm, t):
    """#{x >= t} over the row buffer: whether a row reaches a threshold, as a count (the int32
    accumulator of :func:`_count_above` vectorises; a running maximum does not: measured 5x
    slower)."""
    g = np.int32(0)
    one = np.int32(1)
    zero = np.int32(0)
    for b in range(xm.shape[0]):
        g = np.int32(g + (one if xm[b] >= t else zero))
    return np.int64(g)


@njit(cache=True, nogil=True)
def rank_tile(S, a0, b0, diag, ulab, uq, ug, uslot, uqmin, uoff, uvals, gt, eq, xm, tbuf, how):
    """Rank the negatives of tile S in both directions by :func:`rank_rows`: its rows' queries
    against its columns, then (on the transposed tile, ``tbuf``: a buffer of at least S.size)
    its columns' queries against its rows; the transposition is skipped when no column is a
    query being ranked."""
    rank_rows(S, a0, b0, 1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how)
    if not _columns_reach(S, a0, b0, ug, uqmin):
        return
    # the transposed rows that reach no positive are skipped by rank_rows' row maximum: the
    # transposition (0.13 ms a tile) costs less than a column-maximum pass deciding it (0.16 ms)
    rank_rows(transpose(S, tbuf), b0, a0, -1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how)


@njit(cache=True, nogil=True)
def _columns_reach(S, a0, b0, ug, uqmin):
    """Whether the transposed tile has anything to rank: a column that is a query being ranked
    (its lowest positive score finite), a row in the gallery, and a score reaching the lowest of
    those positive scores."""
    na, nb = S.shape
    lowest = np.min(uqmin[b0:b0 + nb])  # +inf: no column is a query being ranked (gallery only)
    if lowest == np.inf or not np.any(ug[a0:a0 + na]):
        return False
    for a in range(na):
        if _count_at_least(S[a], lowest) > 0:
            return True
    return False  # no column score reaches its query's lowest positive: nothing to rank


@njit(cache=True, nogil=True)
def rank_tile_runs(S, a0, b0, diag, ulab, uq, ug, uslot, uqmin, uoff, uvals, gt2, eq2, xm, tbuf, how, col_runs,
                   row_runs):
    """:func:`rank_tile` for a pass with delete-a-group replicates (:mod:`.replicates`): the
    negatives of each run of columns of one bucket (``col_runs``: rows ``[start, stop, bucket]``,
    positions in the tile) into that bucket's counts ``gt2[bucket]``, ``eq2[bucket]``; then, on the
    transposed tile, the negatives of each run of rows (``row_runs``) likewise. A bucket's
    vectors are contiguous in the canonical order, so a tile holds one run or a few: about one
    ranking's cost."""
    for k in range(col_runs.shape[0]):
        b = col_runs[k, 2]
        rank_rows(S, a0, b0, 1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt2[b], eq2[b], xm, how,
                  col_runs[k, 0], col_runs[k, 1])
    if row_runs.shape[0] == 0 or not _columns_reach(S, a0, b0, ug, uqmin):
        return
    T = transpose(S, tbuf)
    for k in range(row_runs.shape[0]):
        b = row_runs[k, 2]
        rank_rows(T, b0, a0, -1 if diag else 0, ulab, uq, ug, uslot, uoff, uvals, gt2[b], eq2[b], xm, how,
                  row_runs[k, 0], row_runs[k, 1])


@njit(cache=True, nogil=True)
def rank_rows(S, a0, b0, side, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how, c_lo=0, c_hi=-1):
    """Rank the negatives of each row of S against the positive scores of the row's query.

    For a query with R distinct positive scores t_0 < ... < t_{R-1} the ranks are counts per
    threshold: C_k = #{negatives x > t_k} and #{x == t_k}; ``gt[k] = C_k - C_{k+1}`` and
    ``eq[k]`` are exactly what :func:`_bump` gives one negative at a time. Three ways per row:

    * counting: R branch-free vectorised passes over the row; the cost is R x row length
      whatever the scores, i.e. it does not grow with how hard the data is;
    * cells (:func:`_rank_by_cells`): each score's place among the R thresholds read off a table
      of 2 min(R, row length) cells, ~5.5 ns a score plus ~2.5 ns a threshold (R from ~45 on);
    * search: each of the m negatives reaching t_0 placed by binary search, about log2 R
      unpredictable branches each: cheap when m is small (easy data), slow when m ~ row length.

    ``how``: 0 per row, whichever costs least by a measured model (:func:`_way`); 1 counting
    always; 2 cells always; 3 search always (the tests pin every way against the others). When
    every column is a gallery item (leave-one-out, a query-only tile against a gallery-only one)
    counting and search run on the row itself and what the row's few positives add is taken off,
    instead of on a masked copy of the row.

    ``side``: 0 every column; 1 only columns b > a (a diagonal tile); -1 only b < a (the
    transpose of a diagonal tile); and only columns in ``[c_lo, c_hi)`` (-1: the last).
    Tiles without shared vectors only (``ulab >= 0``).
    ``xm``: a per-worker buffer of S's dtype and at least ``S.shape[1]`` entries."""
    na, nb = S.shape
    c_hi = nb if c_hi < 0 else min(c_hi, nb)
    if c_hi <= c_lo or not np.any(ug[b0 + c_lo:b0 + c_hi]):
        return  # no column is in the gallery ranked
    # masks as additions and stores, not selects: LLVM vectorises ``row + pen`` (0.13 ns an
    # element here) but not a per-element select (0.8 ns). pen: -inf for non-gallery columns
    # (x + 0 is x, up to the sign of a zero, which no comparison sees).
    pen = np.where(ug[b0:b0 + nb] != 0, 0.0, -np.inf).astype(S.dtype)
    all_gallery = np.all(pen[c_lo:c_hi] == 0.0)  # then a row is counted in place, its positives taken off
    pv = np.empty(nb, S.dtype)
    base = np.empty(0, np.int32)  # the cells' tables (_rank_by_cells), grown as needed
    tpad = np.empty(0, S.dtype)
    jh = np.empty(0, np.int32)
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
        # the columns ranked: b > a (side 1), b < a (side -1) or all, the row's positives apart
        lo_b = max(a + 1 if side == 1 else 0, c_lo)
        hi_b = min(a if side == -1 else nb, c_hi)
        if hi_b <= lo_b:
            continue
        view = row[lo_b:hi_b]
        m = _count_at_least(view, t0)  # the row's positives included
        if m == 0:
            continue  # nothing in the row reaches a positive (most rows of easy data)
        la = ulab[ua]
        p0 = np.searchsorted(sorted_lab, la)
        p1 = np.searchsorted(sorted_lab, la, side="right")
        R = o1 - o0
        if all_gallery:
            # ranking the row itself (no masked copy: one pass less), minus what its positives in
            # [lo_b, hi_b) add: the same counts as on the masked copy (m decides the way only)
            way = _way(how, m, R, nb)
            if way == SEARCH:
                for b in range(view.shape[0]):
                    x = view[b]
                    if x >= t0:
                        bump(s, x, uoff, uvals, gt, eq)
                for p in range(p0, p1):
                    b = by_class[p]
                    if lo_b <= b < hi_b and row[b] >= t0:
                        bump(s, row[b], uoff, uvals, gt, eq, -1)
                continue
            if way == COUNT:
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
        # the columns ranked, masked: [lo_b, hi_b) (a diagonal tile: pairs (a, b > a) only; the
        # item itself never)
        w = hi_b - lo_b
        xrow = xm[:w]
        for b in range(w):
            xrow[b] = row[lo_b + b] + pen[lo_b + b]
        for p in range(p0, p1):
            b = by_class[p]
            if lo_b <= b < hi_b:
                xrow[b - lo_b] = -np.inf  # positives are not ranked
        m = _count_at_least(xrow, t0)
        if m == 0:
            continue
        way = _way(how, m, R, w)
        if way == COUNT:
            above = 0  # C_{k+1}, from the highest threshold down
            for k in range(o1 - 1, o0 - 1, -1):
                c, g = _count_above(xrow, uvals[k])
                eq[k] += g - c
                gt[k] += c - above
                above = c
        elif way == CELLS:
            if tpad.shape[0] < R + CELL_SLOTS:
                base = np.empty(2 * R + 2, np.int32)
                tpad = np.empty(R + CELL_SLOTS, S.dtype)
                jh = np.empty(SUB_HISTOGRAMS * (R + 1), np.int32)
            _rank_by_cells(xrow, uvals, o0, o1, gt, eq, base, tpad, cb, jh)
        else:
            for b in range(w):
                x = xrow[b]
                if x >= t0:
                    bump(s, x, uoff, uvals, gt, eq)


SEARCH, COUNT, CELLS = 0, 1, 2
#: costs per row in counting compares (one threshold against one score of the row: 0.064 ns
#: here, AVX2), measured on 512-score rows with every row different (R = 1 ... 512, m = 1 ... 500):
#: a search scans the row with a branch per score (SEARCH_SCAN a score, ~0.8 ns) and places each
#: of the m scores reaching t_0 by binary search (SEARCH_STEP a step, ~10 ns); cells cost ~5 ns a
#: score (CELL_COST) plus ~4.5 ns a threshold for the row's table (CELL_TABLE_COST). Counting then
#: wins up to R ~ 90 at any m (search only for larger R and few scores reaching t_0), cells from
#: there on, 3.3x faster at R = 512 (ten classes of a thousand, CIFAR-10's test set: ~6x)
SEARCH_SCAN = 12
SEARCH_STEP = 150
CELL_COST = 80
CELL_TABLE_COST = 70
CELL_SLOTS = 4  # thresholds a score is compared with before any branch (see _rank_by_cells)
SUB_HISTOGRAMS = 4


@njit(cache=True, nogil=True)
def _way(how, m, R, nb):
    """How a row with R distinct positive scores, m negatives reaching the lowest, of nb
    columns is ranked: SEARCH, COUNT or CELLS, whichever the measured costs above make cheapest;
    ``how`` 1, 2, 3 force counting, cells, search (tests pin every way against the others)."""
    if how == 1:
        return COUNT
    if how == 2:
        return CELLS if R >= 2 else COUNT  # one threshold: one counting pass
    if how == 3:
        return SEARCH
    count = R * nb
    search = SEARCH_SCAN * nb + SEARCH_STEP * m * (int(np.log2(R)) + 1)
    cells = CELL_COST * nb + CELL_TABLE_COST * R if R >= 2 else count
    if search <= count and search <= cells:
        return SEARCH
    return COUNT if count <= cells else CELLS


@njit(cache=True, nogil=True)
def _rank_by_cells(xrow, uvals, o0, o1, gt, eq, base, tpad, cb, jh):
    """Rank the row's scores (masked ones are -inf) against the R >= 2 distinct ascending
    thresholds ``uvals[o0:o1]`` through a table of G = 2 min(R, row length) cells over
    [t_0, t_{R-1}].

    A score's cell is ``floor(min(max((x - t_0) * scale, -1), G - 1)) + 1``, in float64 (cell 0:
    below t_0); a threshold's by the same arithmetic (cells 1..G). The cell is monotone in the
    value, so a threshold in a lower cell is below the score and one in a higher cell above it:
    with ``base[c]`` = the thresholds in the cells below c, j = #{t_k < x} is ``base[c]`` plus
    the count of the thresholds t_{base[c]}, t_{base[c] + 1}, ... below x, which are those of
    the score's own cell (the ones after it are above x). The first CELL_SLOTS of them are
    compared without a branch (``tpad``: the thresholds and CELL_SLOTS +inf after them), a loop
    takes the rare crowded cell. The score is then above t_0..t_{j-1} (``gt[j - 1] += 1``: C_{j-1}
    - C_j counts it) and ties t_j if equal.

    Three passes over the row, each without stores that the next iteration's loads could depend
    on (a fused loop measured 3x slower): cells (SIMD), j (indices as unsigned integers: no
    negative-index wraparound code), then a histogram of j kept in SUB_HISTOGRAMS interleaved
    copies (consecutive scores rarely increment the same counter). ~5.5 ns a score plus ~2.5 ns
    a threshold here, against 12 ns a score for one cell lookup with a branch per crowded cell.
    Buffers: ``base`` int32 of at least 2 min(R, row length) + 2, ``tpad`` of the row's dtype and
    at least R + CELL_SLOTS, ``cb`` int32 of the row's length, ``jh`` int32 of at least
    SUB_HISTOGRAMS (R + 1)."""
    R = o1 - o0
    nb = xrow.shape[0]
    G = 2 * min(R, nb)
    t0 = np.float64(uvals[o0])
    scale = G / (np.float64(uvals[o1 - 1]) - t0)
    if not scale < np.inf:  # thresholds a few subnormal steps apart (float64 only): search each score
        for b in range(nb):
            j = np.searchsorted(uvals[o0:o1], xrow[b])  # #{t < x}
            if j > 0:
                gt[o0 + j - 1] += 1
            if j < R and uvals[o0 + j] == xrow[b]:
                eq[o0 + j] += 1
        return
    top = np.float64(G - 1)
    for k in range(R):
        tpad[k] = uvals[o0 + k]
    for k in range(R, R + CELL_SLOTS):
        tpad[k] = np.inf
    base[:G + 2] = 0
    for k in range(R):  # threshold k in cell c_k: base[c] = #{k: c_k < c}, a prefix sum of counts
        base[np.uint64(np.int64(min((np.float64(tpad[k]) - t0) * scale, top)) + 2)] += 1
    for c in range(1, G + 2):
        base[c] += base[c - 1]
    for b in range(nb):  # vectorised: the conversion to int32 is SIMD on AVX2
        v = (np.float64(xrow[b]) - t0) * scale
        cb[b] = np.int32(np.floor(min(max(v, -1.0), top))) + 1
    one = np.uint64(1)
    for b in range(nb):  # cb[b] becomes j
        x = xrow[b]
        j = np.uint64(base[np.uint64(cb[b])])
        n = np.int32(x > tpad[j]) + np.int32(x > tpad[j + one]) + np.int32(x > tpad[j + np.uint64(2)]) \
            + np.int32(x > tpad[j + np.uint64(3)])
        j += np.uint64(n)
        while tpad[j] < x:  # a cell of more than CELL_SLOTS thresholds (tpad[R] = +inf stops it)
            j += one
        cb[b] = np.int32(j)
    r1 = np.uint64(R + 1)
    jh[:SUB_HISTOGRAMS * (R + 1)] = 0
    n4 = nb - nb % SUB_HISTOGRAMS
    for b in range(0, n4, SUB_HISTOGRAMS):
        jh[np.uint64(cb[b])] += 1
        jh[r1 + np.uint64(cb[b + 1])] += 1
        jh[np.uint64(2) * r1 + np.uint64(cb[b + 2])] += 1
        jh[np.uint64(3) * r1 + np.uint64(cb[b + 3])] += 1
    for b in range(n4, nb):
        jh[np.uint64(cb[b])] += 1
    for b in range(nb):
        j = np.uint64(cb[b])
        if tpad[j] == xrow[b]:
            eq[o0 + j] += 1
    w = R + 1
    for j in range(1, w):
        gt[o0 + j - 1] += jh[j] + jh[w + j] + jh[2 * w + j] + jh[3 * w + j]


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
