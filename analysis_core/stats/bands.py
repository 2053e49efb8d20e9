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

import itertools
import math
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..errors import InputError
from ..options import check_alpha, check_int
from .quantiles import t_quantile

ALL = "all"


def band(curves: np.ndarray, recall: np.ndarray, alpha: float = 0.05, kind: str = "t",
         n_boot: int | None = None, seed: int = 0) -> pd.DataFrame:
    """Band over the rows of ``curves`` (queries x recall points): recall, mean, low, high, n.
    ``n_boot``: resamples of the simultaneous band (default: :func:`bootstrap_resamples`)."""
    return pd.DataFrame(_bands([curves], recall, alpha, kind, n_boot, seed)[0])


def _bands(curves_list: list[np.ndarray], recall: np.ndarray, alpha: float, kind: str, n_boot: int | None, seed: int,
           done=None) -> list[dict]:
    """:func:`band`'s columns as arrays, for each matrix of curves (each band is the one it has
    alone). ``done(fraction)``: called as bands are finished (the bootstrap's as its resamples
    are drawn), for progress."""
    check_alpha(alpha)
    if kind == "bootstrap":
        n_boot = bootstrap_resamples(n_boot, alpha)
    out = []
    for curves in curves_list:
        curves = np.asarray(curves, np.float64)
        n = curves.shape[0]
        mean = curves.mean(axis=0) if n else np.full(recall.size, np.nan)
        sd = curves.std(axis=0, ddof=1) if n > 1 else np.full(recall.size, np.nan)
        out.append((curves, n, mean, sd / np.sqrt(n) if n > 1 else sd))
    if kind == "t":
        halves = [t_quantile(1 - alpha / 2, n - 1) * se if n > 1 else np.full(recall.size, np.nan)
                  for _, n, _, se in out]
    elif kind == "bootstrap":
        resampled = [i for i, (_, n, _, _) in enumerate(out) if n >= 2]
        worst = _bootstrap_worst([(out[i][0], out[i][2], np.where(out[i][3] > 0, out[i][3], np.inf))
                                  for i in resampled], n_boot, seed, done)
        halves = [np.full(recall.size, np.nan)] * len(out)
        for i, w in zip(resampled, worst, strict=True):
            halves[i] = np.quantile(w, 1 - alpha) * out[i][3]
    else:
        raise ValueError(f"kind must be 't' or 'bootstrap', not {kind!r}")
    if done is not None:
        done(float(len(out)) if kind == "t" else float(len(out) - len(resampled)))
    return [{"recall": recall, "mean": mean, "low": mean - half, "high": mean + half, "n": n}
            for (_, n, mean, _), half in zip(out, halves, strict=True)]


DEFAULT_RESAMPLES = 2000
#: the largest bootstrap a band may need (1e6 resamples: alpha near 1e-5); smaller alphas are refused
MAX_RESAMPLES = 10**6


def min_resamples(alpha: float) -> int:
    """The fewest resamples B whose (1 - alpha) quantile, as ``np.quantile`` takes it (linear
    between order statistics), has an expected level within alpha / 10 of 1 - alpha.

    The order statistics of B draws sit at expected levels k / (B + 1), so the interpolated
    quantile's level falls short of 1 - alpha by (1 - 2 alpha) / (B + 1): the band is too narrow
    by that much on average. Within alpha / 10: B >= 10 (1 - 2 alpha) / alpha - 1 (179 at
    alpha = 0.05, 9 979 at 0.001). Alphas needing more than :data:`MAX_RESAMPLES` give
    ``MAX_RESAMPLES + 1``."""
    need = 10.0 * (1.0 - 2.0 * alpha) / alpha - 1.0
    if not need <= MAX_RESAMPLES:  # also inf (alpha near the smallest float)
        return MAX_RESAMPLES + 1
    return max(1, math.ceil(need - 1e-9 * max(1.0, need)))


def bootstrap_resamples(n_boot: int | None, alpha: float) -> int:
    """The resamples a simultaneous band at ``alpha`` uses: ``n_boot``, or when None the default
    (2000) raised to :func:`min_resamples`; a given ``n_boot`` below that minimum is refused, so is
    an alpha needing more than :data:`MAX_RESAMPLES`."""
    fewest = min_resamples(alpha)
    level = f"{100 * (1 - alpha):.10g} %"
    if fewest > MAX_RESAMPLES:
        raise InputError("settings", f"a {level} simultaneous band (alpha = {alpha:g}) needs more than "
                         f"{MAX_RESAMPLES:,} bootstrap resamples for its level to be met.",
                         "use a larger alpha (at least 1e-5) or the pointwise t band.")
    if n_boot is None:
        return max(DEFAULT_RESAMPLES, fewest)
    n_boot = check_int(n_boot, "n_boot (bootstrap resamples)", 1)
    if n_boot < fewest:
        short = 100 * (1 - 2 * alpha) / (n_boot + 1)
        raise InputError("settings", f"n_boot = {n_boot} bootstrap resamples give a {level} simultaneous band that "
                         f"is too narrow: its expected level falls short by about {short:.3g} points "
                         f"((1 - 2 alpha) / (n_boot + 1)); {fewest} keep the shortfall within alpha / 10.",
                         f"give n_boot at least {fewest}, or leave it out (the default, "
                         f"{max(DEFAULT_RESAMPLES, fewest)} at this alpha).")
    return n_boot


def _bootstrap_worst(bands: list[tuple[np.ndarray, np.ndarray, np.ndarray]], n_boot: int, seed: int,
                     done=None) -> list[np.ndarray]:
    """For each band (curves, mean, safe standard errors), the largest studentized deviation
    ``max_j |mean*_j - mean_j| / se_j`` of each of ``n_boot`` resamples of its rows.

    A band's resamples come from its own generator seeded with ``seed``, in chunks of ~2**22 draws
    drawn one after another; a resample's mean is its draw counts times the curves (one matrix
    product per chunk instead of gathering n rows per resample). So a band's numbers do not depend
    on the other bands, on the threads or on the scheduling. The chunks of every band are spread
    over the cores, first chunks first: while a thread draws a band's next chunk (the generator is
    used by one thread at a time, in chunk order), others count and multiply earlier ones.
    ``done(fraction)`` after each chunk; an exception it raises stops every thread."""
    from .resampling import draw_counts

    tasks = []
    for i, (curves, _, _) in enumerate(bands):
        step = max(1, min(n_boot, 2**22 // curves.shape[0]))
        tasks.append([(i, b, min(step, n_boot - b)) for b in range(0, n_boot, step)])
    order = [t for chunk in itertools.zip_longest(*tasks) for t in chunk if t is not None]
    rngs = [np.random.default_rng(seed) for _ in bands]
    drawn = [0] * len(bands)  # resamples drawn so far, per band
    turn = threading.Condition()
    worst = [np.empty(n_boot) for _ in bands]
    local = threading.local()
    stop = threading.Event()

    def run(task: tuple[int, int, int]) -> None:
        i, b, m = task
        if stop.is_set():
            return
        curves, mean, safe = bands[i]
        n = curves.shape[0]
        try:
            with turn:
                turn.wait_for(lambda: drawn[i] == b or stop.is_set())
                if stop.is_set():
                    return
                draws = rngs[i].integers(0, n, (m, n))
                drawn[i] = b + m
                turn.notify_all()
            buf = getattr(local, "buf", None)
            if buf is None or buf.size < m * n:
                buf = local.buf = np.empty(m * n)
            means = draw_counts(draws, n, buf) @ curves / n
            worst[i][b:b + m] = np.max(np.abs(means - mean) / safe, axis=1)
            if done is not None:
                done(m / n_boot)
        except BaseException:
            stop.set()
            with turn:
                turn.notify_all()
            raise

    # one BLAS thread per product: the chunks are the parallelism (BLAS threads on top of them
    # spin for cores the other chunks use: measured 1.7 s of wall and 3.3 s of CPU for 3 bands of
    # 30 000 queries), and a product's bits do not then depend on what else runs in the process
    # (BLAS's thread count is process-wide; see engine.pool.single_threaded_blas)
    from ..engine.pool import single_threaded_blas

    n_threads = min(len(order), os.cpu_count() or 1)
    with single_threaded_blas():
        if n_threads <= 1:
            for t in order:
                run(t)
        else:
            with ThreadPoolExecutor(n_threads, thread_name_prefix="bootstrap") as pool:
                for f in [pool.submit(run, t) for t in order]:
                    f.result()  # the first failure is raised; the rest return at once (stop)
    return worst


def sub_grid(recall: np.ndarray, n_recall: int) -> np.ndarray:
    """Columns of the recall grid ``recall`` (r_j = j/(N - 1)) that form the grid of ``n_recall``
    points: exact, since each curve's value at r depends on r alone (see
    :func:`analysis_core.metrics.tie_blocks.pr_curve`). Needs (n_recall - 1) to divide (N - 1)."""
    steps = recall.size - 1
    if n_recall < 2 or steps % (n_recall - 1):
        raise ValueError(f"a {n_recall}-point recall grid is not part of the {recall.size}-point grid: "
                         f"N_P - 1 must divide {steps}")
    return np.arange(0, recall.size, steps // (n_recall - 1))


def pr_bands(ev, alpha: float = 0.05, kind: str = "t", by_class: bool = True, n_boot: int | None = None,
             seed: int = 0, *, classes=None, n_recall: int | None = None, progress=None) -> pd.DataFrame:
    """Bands per method, overall (class ``all``) and per class, over the evaluation's queries.
    Columns: method, class, recall, mean, low, high, n. Per-split bands come from evaluating each
    split as its own retrieval problem (``evaluate(..., split=...)``), never from grouping the
    queries of a mixed gallery. ``classes``: only these bands (class names, and ``"all"`` for every
    query together; default: all, and every class with ``by_class``). ``n_recall``: on that
    coarser recall grid (see :func:`sub_grid`). ``progress(done, total, stage)``: called as the
    bands are computed (from the threads computing them; an exception it raises stops them)."""
    ds = ev.dataset
    todo = []  # (method, class, curves) of every band, computed in one call
    for m in ev.methods:
        rows, recall, curves = ev.pr_curves(m)
        if n_recall is not None:
            cols = sub_grid(recall, n_recall)
            recall, curves = recall[cols], np.ascontiguousarray(curves[:, cols])  # the same sums as a coarse run
        labels = ds.labels[rows].astype(str)
        names = ([ALL] + (sorted(set(labels.tolist())) if by_class else [])) if classes is None else classes
        todo += [(m, cls, curves if cls == ALL else curves[labels == str(cls)]) for cls in names]
    lock = threading.Lock()
    finished = [0.0]

    def done(fraction: float) -> None:
        if progress is not None:
            with lock:
                finished[0] += fraction
                now = finished[0]
            progress(now, len(todo), "resampling queries" if kind == "bootstrap" else "averaging curves")

    columns = _bands([c for _, _, c in todo], recall, alpha, kind, n_boot, seed, done)
    # one frame per band with its name columns (inserting text columns into a frame cost more than the band)
    return pd.concat([pd.DataFrame({"method": m, "class": cls, **c})
                      for (m, cls, _), c in zip(todo, columns, strict=True)], ignore_index=True)
