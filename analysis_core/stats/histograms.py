"""Positive/negative similarity histograms and their Jensen-Shannon divergence (Oi et al.)."""

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


def jensen_shannon(pos_counts: np.ndarray, neg_counts: np.ndarray) -> float:
    """Jensen-Shannon divergence, log base 2, between the binned pair distributions.

    ``JSD(P, Q) = 1/2 KL(P || M) + 1/2 KL(Q || M)``, ``M = (P + Q)/2``, with P and Q the bin
    probabilities (counts divided by their totals) and ``0 log 0 = 0``. In [0, 1]: 0 for identical
    histograms, 1 for histograms with disjoint support. NaN when either side has no pairs.
    """
    p = np.asarray(pos_counts, np.float64)
    q = np.asarray(neg_counts, np.float64)
    if p.sum() == 0 or q.sum() == 0:
        return float("nan")
    p = p / p.sum()
    q = q / q.sum()
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    return float(min(max(0.5 * kl(p) + 0.5 * kl(q), 0.0), 1.0))


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
