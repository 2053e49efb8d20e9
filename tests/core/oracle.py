"""Brute-force references, written independently of the engine: full float64 score matrices,
explicit sorting, and exhaustive enumeration of the arrangements of tied items."""

from __future__ import annotations

import functools
import itertools
import math
import shutil
import subprocess

import numpy as np


def score_matrix(X: np.ndarray, similarity: str) -> np.ndarray:
    """The float64 scores of every pair of rows of ``X`` (``similarity``: cosine, dot, euclidean).

    Each distinct row is scored once and the matrix indexed back from the distinct rows' one, so
    identical rows get bit-identical scores (ties, as the engine's contract says) whatever BLAS
    kernel computes the product: a GEMM may give two copies of a row different last bits where they
    fall at different places in its blocks (OpenBLAS's AVX-512 kernels do), which would split a tie
    block of the oracle and make the expected result depend on the CPU."""
    U, inverse = np.unique(np.asarray(X, np.float64), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)  # numpy 2.0.0 gave it the input's number of dimensions
    return _distinct_scores(U, similarity)[np.ix_(inverse, inverse)]


def _distinct_scores(U: np.ndarray, similarity: str) -> np.ndarray:
    if similarity == "cosine":
        U = U / np.linalg.norm(U, axis=1, keepdims=True)
        return U @ U.T
    if similarity == "dot":
        return U @ U.T
    d2 = ((U[:, None, :] - U[None, :, :]) ** 2).sum(-1)
    return -np.sqrt(d2)


def ranking_metrics(rel_sorted: np.ndarray, ks=(1, 2, 4, 8)) -> dict:
    """Metrics of one fully ordered ranking (rel_sorted[i] = 1 if rank i+1 is a positive)."""
    rel = np.asarray(rel_sorted, bool)
    R = int(rel.sum())
    ranks = np.nonzero(rel)[0] + 1
    hits = np.arange(1, R + 1)
    out = {
        "ap": float(np.mean(hits / ranks)),
        "map_at_r": float(np.sum((hits / ranks)[ranks <= R]) / R),
        "r_precision": float(rel[:R].sum() / R),
        "rr": float(1.0 / ranks[0]),
    }
    for k in ks:
        out[f"precision_at_{k}"] = float(rel[:k].sum() / k)
        out[f"recall_at_{k}"] = float(rel[:k].any())
    return out


def tie_blocks(scores: np.ndarray, rel: np.ndarray) -> list[tuple[int, int]]:
    """(items, positives) of each block of equal scores, best first."""
    order = np.argsort(-scores, kind="stable")
    s = scores[order]
    r = rel[order]
    blocks = []
    i = 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        blocks.append((j - i, int(r[i:j].sum())))
        i = j
    return blocks


def enumerate_tie_orders(scores: np.ndarray, rel: np.ndarray, ks=(1, 2, 4, 8)) -> dict:
    """Expected metrics over every order of tied items (each arrangement of positives inside a
    block is equally likely), plus the min and max AP. Exponential: small cases only."""
    blocks = tie_blocks(scores, rel)
    choices = [list(itertools.combinations(range(t), r)) for t, r in blocks]
    n_total = math.prod(len(c) for c in choices)
    assert n_total <= 200_000, "case too large to enumerate"
    acc: dict[str, float] = {}
    aps = []
    for combo in itertools.product(*choices):
        seq = []
        for (t, _), pos in zip(blocks, combo, strict=False):
            b = np.zeros(t, bool)
            b[list(pos)] = True
            seq.append(b)
        m = ranking_metrics(np.concatenate(seq), ks)
        aps.append(m["ap"])
        for key, v in m.items():
            acc[key] = acc.get(key, 0.0) + v
    out = {key: v / n_total for key, v in acc.items()}
    out["ap_lower"] = min(aps)
    out["ap_upper"] = max(aps)
    return out


def leave_one_out_rows(S: np.ndarray, labels: np.ndarray):
    """Yield (query, gallery scores, relevance) for every query with at least one positive."""
    n = S.shape[0]
    for i in range(n):
        mask = np.arange(n) != i
        rel = labels[mask] == labels[i]
        if rel.any():
            yield i, S[i, mask], rel


@functools.cache
def r_has(package: str) -> bool:
    """Whether Rscript is installed and loads ``package`` (R is an oracle, not a dependency)."""
    if shutil.which("Rscript") is None:
        return False
    return subprocess.run(["Rscript", "-e", f"library({package})"], capture_output=True).returncode == 0


def _log_comb(n: np.ndarray, k: np.ndarray) -> np.ndarray:
    """log C(n, k), -inf where k < 0 or k > n."""
    from scipy.special import gammaln

    n, k = np.broadcast_arrays(np.asarray(n, np.float64), np.asarray(k, np.float64))
    ok = (k >= 0) & (k <= n)
    out = np.full(n.shape, -np.inf)
    out[ok] = gammaln(n[ok] + 1) - gammaln(k[ok] + 1) - gammaln(n[ok] - k[ok] + 1)
    return out


def expected_by_positions(blocks: list[tuple[int, int]], ks=(1, 2, 4, 8), n_points: int = 11) -> dict:
    """Expected metrics over every order of tied items, for tie blocks too large to enumerate
    (``blocks``: (items, positives) best first, as :func:`tie_blocks` gives them).

    Not the engine's formulas: each metric is summed over the positions a positive can take. The
    m-th of a block's r positives sits at the block's j-th place with probability
    ``C(j-1, m-1) C(t-j, r-m) / C(t, r)`` (the other m-1 positives among the j-1 places before,
    the other r-m among the t-j after, every placement equally likely); a metric that is a sum
    over positives of some f(m-th positive's rank) has the expectation sum_m sum_j f P(m, j).
    Polynomial (items x positives per block): checked against :func:`enumerate_tie_orders` on
    small cases, used on blocks of thousands of items."""
    R = sum(r for _, r in blocks)
    T = Rb = 0
    ap = map_r = r_prec = 0.0
    prec = dict.fromkeys(ks, 0.0)
    hit = dict.fromkeys(ks, 0.0)
    rr = None
    points = np.zeros(R)
    ap_lo = ap_hi = 0.0
    dcg = 0.0
    for t, r in blocks:
        if r:
            j = np.arange(1, t + 1)[:, None]
            m = np.arange(1, r + 1)[None, :]
            P = np.exp(_log_comb(j - 1, m - 1) + _log_comb(t - j, r - m) - _log_comb(t, r))
            rank = T + j
            prec_i = P * (Rb + m) / rank  # i / rank_i, weighted by the chance of that rank
            points[Rb:Rb + r] = prec_i.sum(axis=0)
            ap += prec_i.sum()
            map_r += prec_i[(rank <= R)[:, 0]].sum()
            r_prec += P[(rank <= R)[:, 0]].sum()
            for k in ks:
                prec[k] += P[(rank <= k)[:, 0]].sum()
            if rr is None:  # the first positive is the first one of this block
                rr = float((P[:, 0] / rank[:, 0]).sum())
                for k in ks:
                    hit[k] = float(P[(rank <= k)[:, 0], 0].sum())
            dcg += (P / np.log2(rank + 1.0)).sum()
            i = np.arange(1, r + 1)
            ap_hi += float(((Rb + i) / (T + i)).sum())
            ap_lo += float(((Rb + i) / (T + t - r + i)).sum())
        T += t
        Rb += r
    out = {"ap": ap / R, "map_at_r": map_r / R, "r_precision": r_prec / R, "rr": rr, "ap_lower": ap_lo / R,
           "ap_upper": ap_hi / R, "ndcg": dcg / float((1.0 / np.log2(np.arange(1, R + 1) + 1.0)).sum())}
    for k in ks:
        out[f"precision_at_{k}"] = prec[k] / k
        out[f"recall_at_{k}"] = hit[k]
    grid = np.arange(n_points) / (n_points - 1)
    out["pr_curve"] = np.interp(grid, np.arange(1, R + 1) / R, points)  # constant below 1/R
    return out
