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
    X = np.asarray(X, np.float64)
    if similarity == "cosine":
        X = X / np.linalg.norm(X, axis=1, keepdims=True)
        return X @ X.T
    if similarity == "dot":
        return X @ X.T
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
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
