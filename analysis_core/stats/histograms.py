"""Positive/negative similarity histograms and their Jensen-Shannon divergence, as in
H. Oi, R. Kawakami and T. Naemura, "Analysis of Evaluation Metrics with the Distance between
Positive Pairs and Negative Pairs in Deep Metric Learning"."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def area_normalized(counts: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Density whose integral over the bins is 1 (zeros if there are no pairs)."""
    counts = np.asarray(counts, np.float64)
    total = counts.sum()
    if total == 0:
        return np.zeros_like(counts)
    return counts / (total * np.diff(edges))


def jensen_shannon(pos_counts: np.ndarray, neg_counts: np.ndarray):
    """Jensen-Shannon divergence, log base 2, between the binned pair distributions.

    ``JSD(P, Q) = 1/2 KL(P || M) + 1/2 KL(Q || M)``, ``M = (P + Q)/2``, with P and Q the bin
    probabilities (counts divided by their totals) and ``0 log 0 = 0``. In [0, 1]: 0 for identical
    histograms, 1 for histograms with disjoint support. NaN when either side has no pairs.
    Bins are the last axis: 1-D inputs give a float, stacked rows (e.g. bootstrap replicates of
    weighted counts) an array.
    """
    p = np.asarray(pos_counts, np.float64)
    q = np.asarray(neg_counts, np.float64)
    sp = p.sum(axis=-1, keepdims=True)
    sq = q.sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        p = p / sp
        q = q / sq
        m = 0.5 * (p + q)
        kp = np.where(p > 0, p * np.log2(p / m), 0.0).sum(axis=-1)
        kq = np.where(q > 0, q * np.log2(q / m), 0.0).sum(axis=-1)
    out = np.where((sp[..., 0] > 0) & (sq[..., 0] > 0), np.clip(0.5 * kp + 0.5 * kq, 0.0, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out


def histogram_table(ev, split_evals: dict | None = None) -> pd.DataFrame:
    """Columns method, split, kind (positive / negative), bin_left, bin_right, count, density,
    from the engine's exact pair counts; ``split`` is ``all`` for the whole evaluation and each
    split's name for ``split_evals`` (split -> Evaluation of that split)."""
    import pandas as pd

    frames = []
    for split, e in [("all", ev), *(split_evals or {}).items()]:
        for m, r in e.results.items():
            edges = r.hist_edges
            for kind, counts in (("positive", r.hist_pos), ("negative", r.hist_neg)):
                frames.append(pd.DataFrame({"method": m, "split": split, "kind": kind, "bin_left": edges[:-1],
                                            "bin_right": edges[1:], "count": counts,
                                            "density": area_normalized(counts, edges)}))
    return pd.concat(frames, ignore_index=True)
