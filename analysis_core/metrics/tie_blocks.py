"""Per-query ranking metrics from the tie blocks of one query's ranking (definitions: docs/metrics.md,
"Ties and metric definitions").

Every function takes the blocks that contain at least one positive, in descending score order:

* ``T[c]``: gallery items strictly ahead of block c (positives and negatives),
* ``t[c]``: items in block c (a maximal run of equal scores),
* ``r[c]``: positives in block c,

and ``R = r.sum()``. Blocks without positives never contribute to these metrics except through
``T`` of the blocks after them, so they need not be listed. All metrics are **expectations over
the uniformly random order of tied items** (the order an unbiased tie-breaker would give), which
makes them deterministic; ``ap_bounds`` gives the best and worst tie orders.

These functions are compiled with numba and called by the engine for every query; the plain
Python docstrings below are the definitions.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: blocks of up to this many ranks are summed term by term; longer ones in closed form
#: (:func:`_affine_over_ranks`), so a query's cost is its number of tie blocks, not their size
SUMMED_RANKS = 64


@njit(cache=True, nogil=True)
def _harmonic_difference(T, J):
    """``H(T+J) - H(T) = sum_{j=1..J} 1/(T+j)``: term by term below SUMMED_RANKS ranks past 64,
    beyond by the asymptotic expansion ``H(n) = ln n + gamma + 1/(2n) - 1/(12n^2) + 1/(120n^4)
    - 1/(252n^6) + O(n^-8)`` taken between two arguments >= 64 (its remainder there is below
    1e-16 of the sum) with ``ln(b/a)`` as ``log1p((b-a)/a)``."""
    acc = 0.0
    a = T
    while a < 64 and a < T + J:  # small arguments term by term
        a += 1
        acc += 1.0 / a
    b = T + J
    if b - a <= SUMMED_RANKS:
        for n in range(a + 1, b + 1):
            acc += 1.0 / n
        return acc
    fa = float(a)
    fb = float(b)
    ia2 = 1.0 / (fa * fa)
    ib2 = 1.0 / (fb * fb)
    tail = (0.5 / fb - 0.5 / fa) - (ib2 - ia2) / 12.0 + (ib2 * ib2 - ia2 * ia2) / 120.0 \
        - (ib2 * ib2 * ib2 - ia2 * ia2 * ia2) / 252.0
    return acc + np.log1p((fb - fa) / fa) + tail


@njit(cache=True, nogil=True)
def _affine_over_ranks(a, slope, T, J):
    """``sum_{j=1..J} (a + (j-1) slope) / (T+j)``, the sum over the ranks of one tie block that
    every AP formula here is made of. Up to SUMMED_RANKS terms it is summed term by term, beyond
    in closed form: ``a + (j-1) slope = slope (T+j) + (a - slope (T+1))``, so the sum is
    ``J slope + (a - slope (T+1)) (H(T+J) - H(T))`` with H the harmonic numbers (McSherry &
    Najork, ECIR 2008, sum E[AP] over a tie block the same way). Relative error below about
    1e-16 (T+J)/a from the cancellation of the two terms."""
    if J <= SUMMED_RANKS:
        acc = 0.0
        for j in range(1, J + 1):
            acc += (a + (j - 1) * slope) / (T + j)
        return acc
    return J * slope + (a - slope * (T + 1.0)) * _harmonic_difference(T, J)


@njit(cache=True, nogil=True)
def ap_bounds(T, t, r):
    """Average precision under the best and the worst order of tied items.

    ``AP+ = (1/R) sum_c sum_{i=1..r_c} (R_{c-1}+i)/(T_{c-1}+i)`` (positives first in each block),
    ``AP- = (1/R) sum_c sum_{i=1..r_c} (R_{c-1}+i)/(T_{c-1}+t_c-r_c+i)`` (positives last).
    Returns ``(AP-, AP+)``. Nicolaou et al. call their means mAP- and mAP+
    (A. Nicolaou, S. Dey, V. Christlein, A. Maier and D. Karatzas, "Non-deterministic Behavior of
    Ranking-based Metrics when Evaluating Embeddings", RRPR 2018, LNCS 11455, Springer, 2019).
    """
    R = 0
    for c in range(r.shape[0]):
        R += r[c]
    lo = 0.0
    hi = 0.0
    before = 0
    for c in range(r.shape[0]):
        if r[c] <= SUMMED_RANKS:
            for i in range(1, r[c] + 1):
                hi += (before + i) / (T[c] + i)
                lo += (before + i) / (T[c] + t[c] - r[c] + i)
        else:
            hi += _affine_over_ranks(before + 1.0, 1.0, T[c], r[c])
            lo += _affine_over_ranks(before + 1.0, 1.0, T[c] + t[c] - r[c], r[c])
        before += r[c]
    return lo / R, hi / R


@njit(cache=True, nogil=True)
def expected_ap(T, t, r, cutoff):
    """Expected average precision over all tie orders (McSherry & Najork, ECIR 2008).

    ``E[AP] = (1/R) sum_c sum_{j=1..t_c} (r_c/t_c) (R_{c-1} + 1 + (j-1)(r_c-1)/(t_c-1)) / (T_{c-1}+j)``
    with ``(r_c-1)/(t_c-1) = 0`` when ``t_c = 1``. Only ranks ``T_{c-1}+j <= cutoff`` are summed, so
    ``cutoff = R`` gives the expected **MAP@R** (K. Musgrave, S. Belongie and S.-N. Lim, "A Metric
    Learning Reality Check", ECCV 2020: AP truncated at rank R and
    divided by R) and a cutoff past the end gives the full-ranking expected AP.
    Position j of block c holds a positive with probability r_c/t_c; given that, the expected
    number of positives at or above it is ``R_{c-1} + 1 + (j-1)(r_c-1)/(t_c-1)``.
    """
    R = 0
    for c in range(r.shape[0]):
        R += r[c]
    total = 0.0
    before = 0
    for c in range(r.shape[0]):
        if T[c] >= cutoff:
            break
        slope = (r[c] - 1.0) / (t[c] - 1.0) if t[c] > 1 else 0.0
        share = r[c] / t[c]
        jmax = min(t[c], cutoff - T[c])
        total += share * _affine_over_ranks(before + 1.0, slope, T[c], jmax)
        before += r[c]
    return total / R


@njit(cache=True, nogil=True)
def expected_precision_at(T, t, r, k):
    """Expected precision at cutoff k: ``(1/k) sum_c r_c * clip(k - T_{c-1}, 0, t_c) / t_c``.

    The divisor is always k (trec_eval's P@k), so when k > R the best value is R/k.
    A tie block straddling the cutoff contributes the expected share of its positives inside it.
    """
    hits = 0.0
    for c in range(r.shape[0]):
        inside = k - T[c]
        if inside <= 0:
            break
        if inside > t[c]:
            inside = t[c]
        hits += r[c] * inside / t[c]
    return hits / k


@njit(cache=True, nogil=True)
def expected_hit_at(T, t, r, k):
    """Expected Recall@K in the metric-learning sense: P(at least one positive in the top K).

    Only the first block with a positive can decide it: 1 if the block ends within K, 0 if it
    starts after K; if it straddles the cutoff with k' = K - T slots inside, one minus the
    hypergeometric probability that none of its r positives is among those k' slots,
    ``1 - C(t-r, k') / C(t, k')``.
    """
    if r.shape[0] == 0:
        return 0.0
    T0 = T[0]
    if T0 >= k:
        return 0.0
    if T0 + t[0] <= k:
        return 1.0
    inside = k - T0
    miss = 1.0
    for i in range(inside):
        miss *= (t[0] - r[0] - i) / (t[0] - i)
        if miss == 0.0:
            break
    return 1.0 - miss


@njit(cache=True, nogil=True)
def expected_ndcg(T, t, r, cutoff):
    """Expected nDCG at ``cutoff`` with binary gains (K. Järvelin and J. Kekäläinen, "Cumulated
    gain-based evaluation of IR techniques", ACM Transactions on Information Systems 20(4), 2002).

    ``E[DCG] = sum_c (r_c/t_c) sum_{j=1..min(t_c, cutoff-T_{c-1})} 1/log2(T_{c-1}+j+1)`` (each slot
    of block c holds a positive with probability r_c/t_c; expectation is linear), divided by the
    ideal ``IDCG = sum_{i=1..min(R, cutoff)} 1/log2(i+1)``. Equals scikit-learn's ``ndcg_score``,
    which averages the gains of tied items.
    """
    R = 0
    for c in range(r.shape[0]):
        R += r[c]
    dcg = 0.0
    for c in range(r.shape[0]):
        if T[c] >= cutoff:
            break
        jmax = min(t[c], cutoff - T[c])
        acc = 0.0
        for j in range(1, jmax + 1):
            acc += 1.0 / np.log2(T[c] + j + 1.0)
        dcg += r[c] / t[c] * acc
    ideal = 0.0
    for i in range(1, min(R, cutoff) + 1):
        ideal += 1.0 / np.log2(i + 1.0)
    return dcg / ideal


@njit(cache=True, nogil=True)
def _expected_inverse_rank(Tc, tc, rc, m):
    """E[1/(Tc + J)] where J is the position, inside a block of tc items holding rc positives in
    uniformly random order, of the m-th positive: P(J=j) = C(j-1,m-1) C(tc-j,rc-m) / C(tc,rc).

    Computed by the ratio recurrence P(j+1)/P(j) = j/(j-m+1) * (tc-j-rc+m)/(tc-j), started at the
    mode with weight 1 and normalised, so nothing underflows for large blocks.
    """
    if tc == rc:
        return 1.0 / (Tc + m)
    lo = m
    hi = tc - rc + m
    mode = int(np.floor(m * (tc + 1.0) / (rc + 1.0)))
    if mode < lo:
        mode = lo
    if mode > hi:
        mode = hi
    wsum = 1.0
    acc = 1.0 / (Tc + mode)
    w = 1.0
    for j in range(mode, hi):  # upward: w(j+1) from w(j)
        w *= (j / (j - m + 1.0)) * ((tc - j - rc + m) / (tc - j))
        if w < 1e-300:
            break
        wsum += w
        acc += w / (Tc + j + 1)
    w = 1.0
    for j in range(mode - 1, lo - 1, -1):  # downward: w(j) = w(j+1) / ratio(j)
        w /= (j / (j - m + 1.0)) * ((tc - j - rc + m) / (tc - j))
        if w < 1e-300:
            break
        wsum += w
        acc += w / (Tc + j)
    return acc / wsum


@njit(cache=True, nogil=True)
def expected_reciprocal_rank(T, t, r):
    """Expected reciprocal rank of the first positive, E[1/rank_1], over tie orders."""
    if r.shape[0] == 0:
        return 0.0
    return _expected_inverse_rank(T[0], t[0], r[0], 1)


@njit(cache=True, nogil=True)
def expected_positive_precision(T, t, r, i):
    """E[i / rank_i]: expected precision at the rank of the i-th positive (1-based), over tie
    orders. These are the points (i/R, E[precision]) of the tie-aware precision-recall curve."""
    before = 0
    for c in range(r.shape[0]):
        if i <= before + r[c]:
            return i * _expected_inverse_rank(T[c], t[c], r[c], i - before)
        before += r[c]
    return 0.0


@njit(cache=True, nogil=True)
def pr_curve(T, t, r, n_points, interpolated):
    """Precision on the recall grid r_j = j/(n_points-1), j = 0..n_points-1, as in
    F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact
    of inter-query variability on the performance of retrieval systems".

    From the points (i/R, E[i/rank_i]), i = 1..R: precision is constant for r < 1/R and linearly
    interpolated between points. With ``interpolated``, precision at r is instead the maximum
    expected precision at recall >= r (trec_eval's iprec_at_recall on the expected points).
    Linear interpolation commutes with expectation, so the plain curve is the expected curve.
    """
    R = 0
    for c in range(r.shape[0]):
        R += r[c]
    out = np.empty(n_points, np.float64)
    den = n_points - 1
    if interpolated:
        y = np.empty(R, np.float64)
        for i in range(1, R + 1):
            y[i - 1] = expected_positive_precision(T, t, r, i)
        for i in range(R - 2, -1, -1):
            if y[i + 1] > y[i]:
                y[i] = y[i + 1]
        for j in range(n_points):
            need = (j * R + den - 1) // den  # ceil(r_j * R), exact in integers
            out[j] = y[max(need, 1) - 1]
        return out
    last_i = -1
    last_y = 0.0
    for j in range(n_points):
        num = j * R
        i = num // den
        rem = num - i * den
        if i < 1:
            i, rem = 1, 0
        if i != last_i:
            last_y = expected_positive_precision(T, t, r, i)
            last_i = i
        if rem == 0:
            out[j] = last_y
        else:
            nxt = expected_positive_precision(T, t, r, i + 1)
            out[j] = last_y + (rem / den) * (nxt - last_y)
    return out
