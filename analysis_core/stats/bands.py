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

import os
import threading

import numpy as np
import pandas as pd

from .quantiles import t_quantile

ALL = "all"


def band(curves: np.ndarray, recall: np.ndarray, alpha: float = 0.05, kind: str = "t",
         n_boot: int = 2000, seed: int = 0) -> pd.DataFrame:
    """Band over the rows of ``curves`` (queries x recall points): recall, mean, low, high, n."""
    return pd.DataFrame(_band(curves, recall, alpha, kind, n_boot, seed))


def _band(curves: np.ndarray, recall: np.ndarray, alpha: float, kind: str, n_boot: int, seed: int,
          done=None) -> dict:
    """:func:`band`'s columns as arrays. ``done(fraction)``: called as the resamples are drawn
    (fractions of this band summing to 1), for progress."""
    curves = np.asarray(curves, np.float64)
    n = curves.shape[0]
    mean = curves.mean(axis=0) if n else np.full(recall.size, np.nan)
    sd = curves.std(axis=0, ddof=1) if n > 1 else np.full(recall.size, np.nan)
    se = sd / np.sqrt(n) if n > 1 else sd
    if kind == "t":
        half = t_quantile(1 - alpha / 2, n - 1) * se if n > 1 else np.full(recall.size, np.nan)
    elif kind == "bootstrap":
        if n < 2:
            half = np.full(recall.size, np.nan)
        else:
            from .resampling import draw_counts

            rng = np.random.default_rng(seed)
            safe = np.where(se > 0, se, np.inf)
            worst = np.empty(n_boot)
            # resamples in chunks of ~2**22 draws; each resample's mean is its draw counts times the
            # curves (one matrix product per chunk instead of gathering n rows per resample)
            step = max(1, min(n_boot, 2**22 // n))
            buf = np.empty(step * n)
            for b in range(0, n_boot, step):
                m = min(step, n_boot - b)
                means = draw_counts(rng.integers(0, n, (m, n)), n, buf) @ curves / n
                worst[b:b + m] = np.max(np.abs(means - mean) / safe, axis=1)
                if done is not None:
                    done(m / n_boot)
            half = np.quantile(worst, 1 - alpha) * se
    else:
        raise ValueError(f"kind must be 't' or 'bootstrap', not {kind!r}")
    if done is not None and not (kind == "bootstrap" and n >= 2):
        done(1.0)
    return {"recall": recall, "mean": mean, "low": mean - half, "high": mean + half, "n": n}


def sub_grid(recall: np.ndarray, n_recall: int) -> np.ndarray:
    """Columns of the recall grid ``recall`` (r_j = j/(N - 1)) that form the grid of ``n_recall``
    points: exact, since each curve's value at r depends on r alone (see
    :func:`analysis_core.metrics.tie_blocks.pr_curve`). Needs (n_recall - 1) to divide (N - 1)."""
    steps = recall.size - 1
    if n_recall < 2 or steps % (n_recall - 1):
        raise ValueError(f"a {n_recall}-point recall grid is not part of the {recall.size}-point grid: "
                         f"N_P - 1 must divide {steps}")
    return np.arange(0, recall.size, steps // (n_recall - 1))


def pr_bands(ev, alpha: float = 0.05, kind: str = "t", by_class: bool = True, n_boot: int = 2000,
             seed: int = 0, *, classes=None, n_recall: int | None = None, progress=None) -> pd.DataFrame:
    """Bands per method, overall (class ``all``) and per class, over the evaluation's queries.
    Columns: method, class, recall, mean, low, high, n. Per-split bands come from evaluating each
    split as its own retrieval problem (``evaluate(..., split=...)``), never from grouping the
    queries of a mixed gallery. ``classes``: only these bands (class names, and ``"all"`` for every
    query together; default: all, and every class with ``by_class``). ``n_recall``: on that
    coarser recall grid (see :func:`sub_grid`). ``progress(done, total, stage)``: called as the
    bands are computed (from the threads computing them; an exception it raises stops them)."""
    ds = ev.dataset
    lock = threading.Lock()
    n_bands = len(ev.methods) * (len(classes) if classes is not None else 1 + (
        len(set(ds.labels[ev.pr_curves(ev.methods[0])[0]].astype(str).tolist())) if by_class else 0))
    finished = [0.0]

    def done(fraction: float) -> None:
        if progress is not None:
            with lock:
                finished[0] += fraction
                now = finished[0]
            progress(now, n_bands, "resampling queries" if kind == "bootstrap" else "averaging curves")

    def of_method(m: str) -> list[pd.DataFrame]:
        rows, recall, curves = ev.pr_curves(m)
        if n_recall is not None:
            cols = sub_grid(recall, n_recall)
            recall, curves = recall[cols], np.ascontiguousarray(curves[:, cols])  # the same sums as a coarse run
        labels = ds.labels[rows].astype(str)
        names = ([ALL] + (sorted(set(labels.tolist())) if by_class else [])) if classes is None else classes
        # one frame with its name columns (inserting text columns into a frame cost more than the band)
        return [pd.DataFrame({"method": m, "class": cls, **_band(
            curves if cls == ALL else curves[labels == str(cls)], recall, alpha, kind, n_boot, seed, done)})
            for cls in names]

    if kind == "bootstrap" and len(ev.methods) > 1:
        # each method's resamples on its own core (the draws, counts and products release the GIL;
        # every band has its own seeded generator, so the numbers do not depend on it)
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(len(ev.methods), os.cpu_count() or 1)) as pool:
            per_method = list(pool.map(of_method, ev.methods))
    else:
        per_method = [of_method(m) for m in ev.methods]
    return pd.concat([f for frames in per_method for f in frames], ignore_index=True)
