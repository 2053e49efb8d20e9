"""The class-count sweep: sample C classes (seeded, several repeats) and recompute Recall@1,
MAP@R, mAP, grouped Recall@1 and JSD on that subset. Recall@1 and MAP@R fall as C grows; grouped
Recall@1 stays within its interval; JSD moves little (H. Oi, R. Kawakami and T. Naemura,
"Analysis of Evaluation Metrics with the Distance between Positive Pairs and Negative Pairs in
Deep Metric Learning").
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..engine.core import run_pass
from ..evaluation import fsum_mean
from .grouped_recall import grouped_recall
from .histograms import jensen_shannon


def sample_classes(codes: np.ndarray, n_classes: int, seed: int = 0) -> np.ndarray:
    """Row indices of the items of ``n_classes`` classes drawn at random (seeded)."""
    classes = np.unique(codes)
    pick = np.random.default_rng(seed).choice(classes, min(n_classes, classes.size), replace=False)
    return np.nonzero(np.isin(codes, pick))[0]


def default_class_counts(n_classes: int, lowest: int = 10, points: int = 8) -> list[int]:
    """Log-spaced class counts from ``lowest`` up to all classes."""
    lo = min(lowest, n_classes)
    return sorted({int(round(c)) for c in np.geomspace(lo, n_classes, points)})


def class_count_sweep(X: np.ndarray, codes: np.ndarray, *, counts: list[int] | None = None, repeats: int = 3,
                      seed: int = 0, group_size: int = 10, similarity: str = "cosine",
                      progress=None) -> pd.DataFrame:
    """For each class count C (and repeat): the metrics on C sampled classes. Columns:
    n_classes, repeat, n_items, recall_at_1, map_at_r, map, grouped_recall_at_1, jsd.
    ``progress(done, total, stage)`` is called before each (C, repeat), weighted by its items."""
    codes = np.asarray(codes)
    n_all = np.unique(codes).size
    counts = counts or default_class_counts(n_all, lowest=max(2, group_size))
    runs = [(c, r) for c in counts for r in range(repeats if c < n_all else 1)]
    total, done = sum(c for c, _ in runs), 0  # the cost grows with the classes sampled
    rows = []
    for c, r in runs:
        if progress is not None:
            progress(done, total, f"{c} classes, repeat {r + 1}")
        done += c
        idx = sample_classes(codes, c, seed=seed * 1_000_003 + 7919 * r + c)
        res = run_pass(X[idx], codes[idx], similarity=similarity, ks=(1,), n_recall=2)
        scored = res.values[:, 0] > 0
        col = {name: res.values[scored, i] for i, name in enumerate(res.columns)}
        gr = grouped_recall(X[idx], codes[idx], group_size=group_size, ks=(1,), similarity=similarity,
                            seed=seed + r).table.iloc[0]
        rows.append(dict(n_classes=c, repeat=r, n_items=idx.size, recall_at_1=fsum_mean(col["recall_at_1"]),
                         map_at_r=fsum_mean(col["map_at_r"]), map=fsum_mean(col["ap"]), grouped_recall_at_1=gr["mean"],
                         grouped_ci_low=gr["ci_low"], grouped_ci_high=gr["ci_high"],
                         jsd=jensen_shannon(res.hist_pos, res.hist_neg)))
    return pd.DataFrame(rows)
