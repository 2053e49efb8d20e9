"""Delete-a-group replicates from the one pass (the class jackknife without a pass per group).

Deleting a group g of classes from the queries and the gallery removes g's queries and, for every
other query, only negatives (its positives are of its own class, hence of its own group). Phase 2
counts, per query and distinct positive score t_k, the negatives above it (``gt[k]``, the
differenced count: those in [t_k, t_{k+1})) and tied with it (``eq[k]``); those counts add over
negatives. A pass given the groups (``delete_groups``) keeps them per *bucket* — the group of the
negative's class, or the last bucket for classes in no group, never deleted — so the counts of the
replicate without g are ``gt - gt[g]``, ``eq - eq[g]``, exactly. Every per-query metric of every
replicate follows from them by the very kernel calls of phase 3 (:func:`replicate_sums`): the
same values as a pass on the remaining items, whose rankings the deletion changes in no other way.

The canonical layout puts each group's vectors together (:func:`.layout.canonical_order`), so a
tile's rows and columns hold one or two groups and ranking by bucket costs about one ranking.
Memory: the counts of a block's queries are held per bucket (``n_buckets`` times the positive
lists; :func:`.plan.memory_chunks` cuts the queries into chunks to stay within the budget).

The replicate means are sums over the queries outside the group, weighted by the queries each
ranked query stands for (a collapsed group of identical queries), kept as exact expansions
(Shewchuk's non-overlapping partials, as :func:`math.fsum`) and rounded once when the blocks are
merged (:func:`.results.merge_replicates`): the same mean, to the last bit, whatever the blocks, threads or workers —
and the same as :func:`~analysis_core.numerics.fsum_mean` over a pass's per-query values.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .query_metrics import CUT_ALL, CUT_R, KERNEL_IDS, evaluate_kernel, tie_blocks_of
from .results import ReplicateSums

PRECISION_AT = KERNEL_IDS["expected_precision_at"]
HIT_AT = KERNEL_IDS["expected_hit_at"]
RECIPROCAL_RANK = KERNEL_IDS["expected_reciprocal_rank"]
NDCG = KERNEL_IDS["expected_ndcg"]
#: capacity of one exact-sum expansion: a sum of doubles needs at most ~40 non-overlapping
#: partials (the exponent range over 53 bits); sums of values in [0, 1] times counts need 2-4
PARTS = 48


@njit(cache=True, nogil=True)
def _grow(p, n, x):
    """Add x exactly to the expansion ``p[:n]`` (CPython's ``math.fsum`` step); returns its new
    length."""
    i = 0
    for j in range(n):
        y = p[j]
        if abs(x) < abs(y):
            t = x
            x = y
            y = t
        hi = x + y
        lo = y - (hi - x)
        if lo != 0.0:
            p[i] = lo
            i += 1
        x = hi
    if i >= p.shape[0]:
        raise OverflowError("an exact sum needed more partials than PARTS")
    p[i] = x
    return i + 1


@njit(cache=True, nogil=True, inline="always")
def _split(a):
    c = 134217729.0 * a  # 2^27 + 1: Veltkamp's split of a double into two 26-bit halves
    hi = c - (c - a)
    return hi, a - hi


@njit(cache=True, nogil=True)
def _add_times(p, n, x, w):
    """Add x * w (w a positive integer) exactly: Dekker's product as two doubles."""
    if w == 1:
        return _grow(p, n, x)
    fw = np.float64(w)
    prod = x * fw
    ah, al = _split(x)
    bh, bl = _split(fw)
    err = ((ah * bh - prod) + ah * bl + al * bh) + al * bl
    n = _grow(p, n, prod)
    if err != 0.0:
        n = _grow(p, n, err)
    return n


@njit(cache=True, nogil=True)
def _precision_sweep(T, t, r, nb, ks, cols, out):
    """``out[cols[i]]`` = :func:`~analysis_core.metrics.tie_blocks.expected_precision_at` at the
    ascending cutoffs ``ks[i]``, in one sweep over the blocks, with the very float operations of
    that kernel: a block wholly above k adds ``r * t / t``, which is r exactly (integers, an exact
    sum), and the one block straddling k adds its share last, as the kernel does."""
    c = 0
    full = 0.0
    for i in range(ks.shape[0]):
        k = ks[i]
        while c < nb and T[c] + t[c] <= k:
            full += r[c] * t[c] / t[c]
            c += 1
        hits = full
        if c < nb and k - T[c] > 0:
            hits += r[c] * (k - T[c]) / t[c]
        out[cols[i]] = hits / k


@njit(cache=True, nogil=True)
def _ndcg(T, t, r, nb, cutoff, ideal, inv_log):
    """:func:`~analysis_core.metrics.tie_blocks.expected_ndcg` with its ideal DCG given and
    ``1 / log2(i + 1)`` read from the table ``inv_log`` (the same expression, evaluated once): the
    same float operations in the same order, so the same bits."""
    dcg = 0.0
    for c in range(nb):
        if T[c] >= cutoff:
            break
        jmax = min(t[c], cutoff - T[c])
        acc = 0.0
        for j in range(1, jmax + 1):
            acc += inv_log[T[c] + j]
        dcg += r[c] / t[c] * acc
    return dcg / ideal


@njit(cache=True, nogil=True)
def _values(kernels, cutoffs, T, t, r, nb, R, p_ks, p_cols, ideal, inv_log, out, full, first, first_T):
    """Every replicate column of one query's blocks (kernel ``kernels[j]`` at ``cutoffs[j]``):
    Precision@k by :func:`_precision_sweep`, nDCG by :func:`_ndcg`, the rest by the kernels.
    Blocks before ``first`` are those of the full evaluation (``full``: its values) and block
    ``first`` starts at rank ``first_T``: a metric at a cutoff k <= first_T reads only the blocks
    before it, and Recall@K and the reciprocal rank read only the first block, so those keep
    their full-evaluation values (the same kernel on the same blocks)."""
    i0 = np.searchsorted(p_ks, first_T, side="right")  # Precision@k for k > first_T only
    for i in range(i0):
        out[p_cols[i]] = full[p_cols[i]]
    if i0 < p_ks.shape[0]:
        _precision_sweep(T, t, r, nb, p_ks[i0:], p_cols[i0:], out)
    for j in range(kernels.shape[0]):
        kern = kernels[j]
        if kern == PRECISION_AT and cutoffs[j] >= 1:
            continue
        if (1 <= cutoffs[j] <= first_T) or (first > 0 and (kern == HIT_AT or kern == RECIPROCAL_RANK)):
            out[j] = full[j]
        elif kern == NDCG:
            out[j] = _ndcg(T, t, r, nb, _cut(cutoffs[j], R), ideal[j], inv_log)
        else:
            out[j] = evaluate_kernel(kern, T[:nb], t[:nb], r[:nb], _cut(cutoffs[j], R), 0.0, 0.0)


@njit(cache=True, nogil=True)
def replicate_sums(uoff, ur, gt, eq, qbucket, qweight, kernels, cutoffs, parts, nparts, n):
    """For every group g (bucket < ``parts.shape[0]``) and column j (kernel ``kernels[j]`` at
    cutoff code ``cutoffs[j]``), add to ``parts[g, j]`` each scored query's value without g's
    negatives, times its weight ``qweight`` (the queries it stands for), and the weights to
    ``n[g]``; a query of group g (``qbucket``) is deleted with it. ``gt``, ``eq``: (buckets,
    entries) counts of the block's queries' entries ``uoff``."""
    n_groups = parts.shape[0]
    n_buckets = gt.shape[0]
    nm = kernels.shape[0]
    nq = uoff.shape[0] - 1
    width = 0
    for s in range(nq):
        width = max(width, uoff[s + 1] - uoff[s])
    tg = np.empty(width, np.int64)
    te = np.empty(width, np.int64)
    rg = np.empty(width, np.int64)
    re = np.empty(width, np.int64)
    T = np.empty(width, np.int64)
    t = np.empty(width, np.int64)
    r = np.empty(width, np.int64)
    full = np.empty(nm, np.float64)
    v = np.empty(nm, np.float64)
    ideal = np.zeros(nm, np.float64)
    # Precision@k columns at k >= 1, by cutoff (one sweep computes them all)
    n_p = 0
    for j in range(nm):
        if kernels[j] == PRECISION_AT and cutoffs[j] >= 1:
            n_p += 1
    p_cols = np.empty(n_p, np.int64)
    n_p = 0
    for j in range(nm):
        if kernels[j] == PRECISION_AT and cutoffs[j] >= 1:
            p_cols[n_p] = j
            n_p += 1
    p_cols = p_cols[np.argsort(cutoffs[p_cols], kind="mergesort")]
    p_ks = cutoffs[p_cols].copy()
    inv_log = np.empty(0, np.float64)
    for s in range(nq):
        o0 = uoff[s]
        nb = uoff[s + 1] - o0
        if nb == 0:
            continue  # a lone query: no metric, in no replicate
        u = ur[o0:o0 + nb]
        for k in range(nb):  # the totals over buckets (ascending score order, as the pass's)
            a = 0
            e = 0
            for b in range(n_buckets):
                a += gt[b, o0 + k]
                e += eq[b, o0 + k]
            tg[k] = a
            te[k] = e
        R = tie_blocks_of(0, nb, u, tg, te, T, t, r)[0]
        end = T[nb - 1] + t[nb - 1] + 2  # every rank the query's blocks reach
        if inv_log.shape[0] < end:
            inv_log = np.empty(2 * end, np.float64)
            inv_log[0] = 0.0  # rank 0: never read
            for i in range(1, inv_log.shape[0]):
                inv_log[i] = 1.0 / np.log2(i + 1.0)
        for j in range(nm):
            if kernels[j] == NDCG:  # as expected_ndcg: the same for every replicate (R is)
                cut = _cut(cutoffs[j], R)
                acc = 0.0
                for i in range(1, min(R, cut) + 1):
                    acc += 1.0 / np.log2(i + 1.0)
                ideal[j] = acc
        _values(kernels, cutoffs, T, t, r, nb, R, p_ks, p_cols, ideal, inv_log, full, full, 0, 0)
        w = qweight[s]
        for g in range(n_groups):
            if g == qbucket[s]:
                continue
            n[g] += w
            first = -1  # the first block (in descending order) that g's negatives change
            for k in range(nb):
                rg[k] = tg[k] - gt[g, o0 + k]
                re[k] = te[k] - eq[g, o0 + k]
                if gt[g, o0 + k] != 0 or eq[g, o0 + k] != 0:
                    first = nb - 1 - k
            touched = first >= 0
            if touched:
                tie_blocks_of(0, nb, u, rg, re, T, t, r)
                _values(kernels, cutoffs, T, t, r, nb, R, p_ks, p_cols, ideal, inv_log, v, full, first, T[first])
            for j in range(nm):
                nparts[g, j] = _add_times(parts[g, j], nparts[g, j], v[j] if touched else full[j], w)


@njit(cache=True, nogil=True, inline="always")
def _cut(code, R):
    if code == CUT_ALL:
        return np.iinfo(np.int64).max
    if code == CUT_R:
        return R
    return code


@njit(cache=True, nogil=True)
def _fold(parts, nparts, other, nother):
    """Add the expansions ``other`` into ``parts`` (both (groups, columns, PARTS)), exactly."""
    for g in range(parts.shape[0]):
        for j in range(parts.shape[1]):
            for k in range(nother[g, j]):
                nparts[g, j] = _grow(parts[g, j], nparts[g, j], other[g, j, k])


def block_replicates(setup, uoff: np.ndarray, ur: np.ndarray, gt: np.ndarray, eq: np.ndarray,
                     chunk_q: np.ndarray, n_threads: int = 1) -> ReplicateSums:
    """The replicate sums of a block's queries (``chunk_q``: their indices in
    ``setup.query_positions``) from their per-bucket counts, the queries shared among
    ``n_threads`` threads (exact sums: the same bits whatever the threads)."""
    n_groups = setup.n_buckets - 1
    nm = setup.replicate_kernels.size
    nq = chunk_q.size
    cuts = np.linspace(0, nq, max(1, min(n_threads, nq)) + 1).astype(np.int64)
    outs = [(np.zeros((n_groups, nm, PARTS), np.float64), np.zeros((n_groups, nm), np.int64),
             np.zeros(n_groups, np.int64)) for _ in range(cuts.size - 1)]

    def run(t: int) -> None:
        q0, q1 = int(cuts[t]), int(cuts[t + 1])
        replicate_sums(uoff[q0:q1 + 1], ur, gt, eq, setup.query_bucket[chunk_q[q0:q1]],
                       setup.query_weight[chunk_q[q0:q1]], setup.replicate_kernels, setup.replicate_cutoffs,
                       *outs[t])

    if len(outs) == 1:
        run(0)
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(outs)) as pool:
            list(pool.map(run, range(len(outs))))
    parts, nparts, n = outs[0]
    for other, nother, n2 in outs[1:]:
        _fold(parts, nparts, other, nother)
        n += n2
    return ReplicateSums(parts, nparts, n)
