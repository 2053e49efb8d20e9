"""Precision-recall confidence bands by vertical averaging (Fawcett's VA), as in
F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact of
inter-query variability on the performance of retrieval systems".

At each recall grid point r_j the precisions of the n queries' curves are averaged:
``mean_j +- t_{1-alpha/2, n-1} * sd_j / sqrt(n)`` — a **pointwise** interval (each r_j
separately covers the mean curve with probability 1 - alpha). The **simultaneous** option
(``kind="bootstrap"``) resamples queries (seeded) and widens the band by the bootstrap quantile
of the largest studentized deviation over the grid, so the whole band covers the mean curve
with probability about 1 - alpha.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

ALL = "all"


def band(curves: np.ndarray, recall: np.ndarray, alpha: float = 0.05, kind: str = "t",
         n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Band over the rows of ``curves`` (queries x recall points): recall, mean, low, high, n."""
    curves = np.asarray(curves, np.float64)
    n = curves.shape[0]
    mean = curves.mean(axis=0) if n else np.full(recall.size, np.nan)
    sd = curves.std(axis=0, ddof=1) if n > 1 else np.full(recall.size, np.nan)
    se = sd / np.sqrt(n) if n > 1 else sd
    if kind == "t":
        half = stats.t.ppf(1 - alpha / 2, n - 1) * se if n > 1 else np.full(recall.size, np.nan)
    elif kind == "bootstrap":
        if n < 2:
            half = np.full(recall.size, np.nan)
        else:
            rng = np.random.default_rng(seed)
            safe = np.where(se > 0, se, np.inf)
            worst = np.empty(n_boot)
            for b in range(n_boot):
                sample = curves[rng.integers(0, n, n)]
                worst[b] = np.max(np.abs(sample.mean(axis=0) - mean) / safe)
            half = np.quantile(worst, 1 - alpha) * se
    else:
        raise ValueError(f"kind must be 't' or 'bootstrap', not {kind!r}")
    return pd.DataFrame({"recall": recall, "mean": mean, "low": mean - half, "high": mean + half, "n": n})


def pr_bands(ev, alpha: float = 0.05, kind: str = "t", by_class: bool = True, n_boot: int = 2000,
             seed: int = 0) -> pd.DataFrame:
    """Bands per method, overall (class ``all``) and per class, over the evaluation's queries.
    Columns: method, class, recall, mean, low, high, n. Per-split bands come from evaluating each
    split as its own retrieval problem (``evaluate(..., split=...)``), never from grouping the
    queries of a mixed gallery."""
    ds = ev.dataset
    frames = []
    for m in ev.methods:
        rows, recall, curves = ev.pr_curves(m)
        labels = ds.labels[rows].astype(str)
        groups = [(ALL, np.ones(rows.size, bool))]
        if by_class:
            groups += [(c, labels == c) for c in sorted(set(labels.tolist()))]
        for cls, mask in groups:
            b = band(curves[mask], recall, alpha, kind, n_boot, seed)
            b.insert(0, "class", cls)
            b.insert(0, "method", m)
            frames.append(b)
    return pd.concat(frames, ignore_index=True)
