"""Precision-recall confidence bands by vertical averaging (Fawcett's VA), as in
F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact of
inter-query variability on the performance of retrieval systems".

At each recall grid point r_j the precisions of the n queries' curves are averaged (mean_j).
Every band is computed at a **unit of inference** (SPEC §4), the thing that is resampled and
whose variability the standard error measures:

* ``unit="query"``: the queries are independent draws (a fixed gallery, new queries). The
  standard error is ``se_j = sd_j / sqrt(n)``.
* ``unit="class"``: the classes are the draws (new items and classes). In leave-one-out every
  query is gallery for the others of its class, so the curves of one class are dependent and
  the class is the cluster. With class totals ``T_gj`` over the ``n_g`` queries of class g
  (C classes, N queries), the cluster-robust (CR1, Liang-Zeger) standard error of the mean is
  ``se_j = sqrt(C / (C - 1) * sum_g (T_gj - n_g mean_j)^2) / N``; with one query per class it is
  the query one, with equal class sizes it is ``sd(class means) / sqrt(C)``.

With U units (queries or classes):

* ``kind="t"`` — **pointwise**: ``mean_j +- t_{1-alpha/2, U-1} * se_j`` (each r_j separately).
* ``kind="bootstrap"`` — **simultaneous**, the studentized (max-t) bootstrap band (Davison &
  Hinkley, "Bootstrap Methods and their Application", Cambridge University Press, 1997, ch. 5,
  the studentized statistic, here its maximum over the grid): each of B resamples draws U
  units with replacement (seeded; with ``unit="class"`` all queries of a drawn class come
  together: the cluster bootstrap of Field & Welsh, "Bootstrapping clustered data", JRSS B 69,
  2007) and gives the mean curve ``mean*`` and its standard error ``se*`` by the same formula;
  ``c`` is the (1 - alpha) quantile over resamples of ``max_j |mean*_j - mean_j| / se*_j`` and
  the band is ``mean_j +- c * se_j``, so the whole band covers the mean curve with probability
  about 1 - alpha.

Conventions where a standard error is zero: a grid point with ``se_j = 0`` (e.g. every curve
equal there) is left out of every maximum and its band is the point itself. A resample's point
with ``se*_j = 0`` (the drawn units agree there) is left out of that resample's maximum; a
resample with no such point left (e.g. one unit drawn U times) has an unbounded statistic
(``+inf``). When more than alpha of the resamples are unbounded, so is ``c``, and the band is
reported undefined (NaN) with the reason. Bands with too few units are undefined with the reason
(column ``note``): the t band needs 2 units, the bootstrap band 3, and a class-unit band 3 classes.

Measured simultaneous coverage at 0.95 (benchmarks/calibration_bands.py, 2 000 replicates of
Gaussian-cluster data, leave-one-out): 0.948 / 0.939 / 0.944 with the class unit at 10 / 20 / 60
classes, 0.73 / 0.73 / 0.77 with the query unit on the same data (its queries are not
independent); with a fixed gallery and new queries, the query unit: 0.963 / 0.957 at 20 / 60.
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
UNITS = ("query", "class")
#: the fewest units a band needs: the t band's U - 1 degrees of freedom, and a bootstrap of 2 units
#: (half of its resamples draw one unit twice: no spread to studentize by) gives no band
MIN_UNITS = {"t": 2, "bootstrap": 3}
#: the fewest classes a class-unit band needs, either kind: with 2 the t band has 1 df
#: (t_{0.975, 1} = 12.7) and the bootstrap only 3 distinct resamples, 2 of them without spread
MIN_CLASSES = 3
#: a resample's sum of squared residuals at or below this fraction of the sum of its terms is zero:
#: the terms cancel to within rounding (see :func:`_bootstrap_worst`)
ZERO_SPREAD = 1e-9


def band(curves: np.ndarray, recall: np.ndarray, alpha: float = 0.05, kind: str = "t",
         n_boot: int | None = None, seed: int = 0, *, unit: str | None = None, groups=None) -> pd.DataFrame:
    """Band over the rows of ``curves`` (queries x recall points): recall, mean, low, high, n
    (queries), unit, n_units, note (why the band is undefined, or empty). ``groups``: each row's
    class, for ``unit="class"`` (the default when given; else ``"query"``). ``n_boot``: resamples
    of the simultaneous band (default: :func:`bootstrap_resamples`). See the module docstring for
    the definitions."""
    if unit is None:
        unit = "query" if groups is None else "class"
    _check_unit(unit)
    if unit == "class" and groups is None:
        raise ValueError("unit='class' needs groups (each row's class)")
    return pd.DataFrame(_bands([(curves, groups if unit == "class" else None, "")], recall, alpha, kind, n_boot,
                               seed)[0])


def _check_unit(unit) -> None:
    if unit not in UNITS:
        raise InputError("settings", f"unknown unit of inference {unit!r}.", f"use one of {', '.join(UNITS)}.")


class _Band:
    """One band's data at its unit: the mean curve, the centred unit totals ``resid`` (U x J:
    ``T_gj - n_g mean_j``, one row per query for the query unit), the unit sizes (None: every unit
    is one query) and the standard error (0 exactly where every curve is equal)."""

    def __init__(self, curves: np.ndarray, groups, note: str, recall: np.ndarray, kind: str):
        curves = np.asarray(curves, np.float64)
        self.n = n = curves.shape[0]
        self.unit = "query" if groups is None else "class"
        self.note = note
        J = recall.size
        if groups is None:
            self.sizes, codes, self.n_units = None, None, n
        else:
            _, codes, sizes = np.unique(np.asarray(groups), return_inverse=True, return_counts=True)
            self.sizes, self.n_units = sizes.astype(np.float64), sizes.size
        self.mean = curves.mean(axis=0) if n else np.full(J, np.nan)
        # where every curve is equal, the mean is that value exactly and the standard error 0, not rounding
        flat = (np.ptp(curves, axis=0) == 0) if n else np.zeros(J, bool)
        self.mean[flat] = curves[0, flat] if n else np.nan
        centred = curves - self.mean
        if codes is None or self.sizes is None:  # both or neither
            self.resid = centred
        else:  # class totals of the residuals, summed in class order
            order = np.argsort(codes, kind="stable")
            starts = np.r_[0, np.cumsum(self.sizes[:-1].astype(np.int64))]
            self.resid = np.add.reduceat(centred[order], starts, axis=0) if n else np.zeros((0, J))
        U = self.n_units
        need = max(MIN_UNITS[kind], MIN_CLASSES if self.unit == "class" else 0)
        if not self.note and n == 0:
            self.note = "no queries"
        elif not self.note and U < need:
            what = _count(U, "class", "classes") if self.unit == "class" else _count(U, "query", "queries")
            name = "pointwise t" if kind == "t" else "bootstrap"
            self.note = f"{what}: a {name} band over {self.unit} units needs at least {need}" + (
                " (unit='query' gives a band over these classes' queries)" if self.unit == "class" else "")
        if U >= 2:
            # CR1 cluster-robust standard error; for the query unit (N = U) it is sd / sqrt(n)
            self.se = np.sqrt(U / (U - 1) * np.einsum("gj,gj->j", self.resid, self.resid)) / n
            self.se[flat] = 0.0
        else:
            self.se = np.full(J, np.nan)

    @property
    def defined(self) -> bool:
        return not self.note


def _count(k: int, one: str, many: str) -> str:
    return f"{k} {one if k == 1 else many}"


def _bands(specs: list[tuple[np.ndarray, object, str]], recall: np.ndarray, alpha: float, kind: str,
           n_boot: int | None, seed: int, done=None) -> list[dict]:
    """:func:`band`'s columns as arrays, for each ``(curves, groups, note)`` (groups None: the query
    unit, else each row's class; a non-empty note: the band is undefined for that reason). Each
    band is the one it has alone. ``done(fraction)``: called as bands are finished (the
    bootstrap's as its resamples are drawn), for progress."""
    check_alpha(alpha)
    if kind not in MIN_UNITS:
        raise ValueError(f"kind must be 't' or 'bootstrap', not {kind!r}")
    n_draws = bootstrap_resamples(n_boot, alpha) if kind == "bootstrap" else 0
    out = [_Band(curves, groups, note, recall, kind) for curves, groups, note in specs]
    nan = np.full(recall.size, np.nan)
    halves = [nan] * len(out)
    if kind == "t":
        for i, b in enumerate(out):
            if b.defined:
                halves[i] = t_quantile(1 - alpha / 2, b.n_units - 1) * b.se
    else:
        resampled = [i for i, b in enumerate(out) if b.defined]
        worst = _bootstrap_worst([out[i] for i in resampled], n_draws, seed, done)
        for i, w in zip(resampled, worst, strict=True):
            c = _upper_quantile(w, 1 - alpha)
            if np.isfinite(c):
                halves[i] = c * out[i].se
            else:
                what = (_count(out[i].n_units, "class", "classes") if out[i].unit == "class"
                        else _count(out[i].n_units, "query", "queries"))
                out[i].note = (f"unbounded: more than alpha = {alpha:g} of the resamples drew units without spread "
                               f"(too few distinct units: {what})")
    if done is not None:
        done(float(len(out)) if kind == "t" else float(len(out) - len(resampled)))
    return [{"recall": recall, "mean": b.mean, "low": b.mean - half, "high": b.mean + half, "n": b.n,
             "unit": b.unit, "n_units": b.n_units, "note": b.note} for b, half in zip(out, halves, strict=True)]


def _upper_quantile(values: np.ndarray, q: float) -> float:
    """``np.quantile(values, q)`` (linear between order statistics), +inf when the upper order
    statistic it uses is +inf (numpy's interpolation would give nan or inf depending on the weight)."""
    h = q * (values.size - 1)
    if np.isinf(np.partition(values, math.ceil(h))[math.ceil(h)]):
        return math.inf
    return float(np.quantile(values, q))


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


def _bootstrap_worst(bands: list[_Band], n_boot: int, seed: int, done=None) -> list[np.ndarray]:
    """For each band, the largest studentized deviation ``max_j |mean*_j - mean_j| / se*_j`` of each
    of ``n_boot`` resamples of its units (conventions for zero standard errors: module docstring).

    A resample draws U of the U units with replacement; its draw counts w (one row of a matrix)
    give everything by one matrix product with the centred unit totals R (``R_g = T_g - n_g mean``)
    and sizes n: ``N* = w.n``, ``mean* - mean = d* = w.R / N*`` and the sum of squared residuals
    about mean*, ``Q* = w.R^2 - 2 d* w.(nR) + d*^2 w.n^2`` (``w.R^2 - U d*^2`` for the query unit),
    so ``se* = sqrt(U / (U - 1) Q*) / N*`` — the resample's own (cluster-robust) standard error, by
    the formula of the band's. The expansion of Q* cancels: its terms are within ``A + d*^2 D``
    (``|w.(nR)| <= sqrt(w.R^2 w.n^2)``), so a Q* at or below :data:`ZERO_SPREAD` times that is zero
    (the drawn units agree there; rounding is ~U eps of it). Centring the totals first keeps that
    sum on the scale of the spread rather than of the precisions themselves.

    A band's resamples come from its own generator seeded with ``seed``, in chunks of ~2**22 draws
    drawn one after another (the draws of the query unit are those the unstudentized band drew).
    So a band's numbers do not depend on the other bands, on the threads or on the scheduling.
    The chunks of every band are spread over the cores, first chunks first: while a thread draws
    a band's next chunk (the generator is used by one thread at a time, in chunk order), others
    count and multiply earlier ones. ``done(fraction)`` after each chunk; an exception it raises
    stops every thread."""
    from .resampling import draw_counts

    tasks, stacks = [], []
    for i, b in enumerate(bands):
        U = b.n_units
        step = max(1, min(n_boot, 2**22 // U))
        tasks.append([(i, s, min(step, n_boot - s)) for s in range(0, n_boot, step)])
        parts = [b.resid, b.resid ** 2]
        if b.sizes is not None:
            parts += [b.sizes[:, None] * b.resid, b.sizes[:, None], b.sizes[:, None] ** 2]
        stacks.append(np.ascontiguousarray(np.hstack(parts)))
    order = [t for chunk in itertools.zip_longest(*tasks) for t in chunk if t is not None]
    rngs = [np.random.default_rng(seed) for _ in bands]
    drawn = [0] * len(bands)  # resamples drawn so far, per band
    turn = threading.Condition()
    worst = [np.empty(n_boot) for _ in bands]
    local = threading.local()
    stop = threading.Event()

    def studentized(b: _Band, sums: np.ndarray) -> np.ndarray:
        J, U = b.mean.size, b.n_units
        S, A = sums[:, :J], sums[:, J:2 * J]
        if b.sizes is None:
            total = np.full((sums.shape[0], 1), float(U))
            d = S / U
            Q, scale = A - U * d * d, A + U * d * d
        else:
            B, total, D = sums[:, 2 * J:3 * J], sums[:, 3 * J:3 * J + 1], sums[:, 3 * J + 1:]
            d = S / total
            Q, scale = A - 2 * d * B + d * d * D, A + d * d * D
        varying = b.se > 0
        spread = (Q > ZERO_SPREAD * scale) & varying
        se = np.sqrt(U / (U - 1) * np.where(spread, Q, 1.0)) / total
        t = np.where(spread, np.abs(d) / se, 0.0)
        # a resample without spread at any varying point cannot be studentized: unbounded
        return np.where(spread.any(axis=1) | ~varying.any(), t.max(axis=1, initial=0.0), np.inf)

    def run(task: tuple[int, int, int]) -> None:
        i, s, m = task
        if stop.is_set():
            return
        b = bands[i]
        U = b.n_units
        try:
            with turn:
                turn.wait_for(lambda: drawn[i] == s or stop.is_set())
                if stop.is_set():
                    return
                draws = rngs[i].integers(0, U, (m, U))
                drawn[i] = s + m
                turn.notify_all()
            buf = getattr(local, "buf", None)
            if buf is None or buf.size < m * U:
                buf = local.buf = np.empty(m * U)
            worst[i][s:s + m] = studentized(b, draw_counts(draws, U, buf) @ stacks[i])
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
             seed: int = 0, *, classes=None, n_recall: int | None = None, unit: str | None = None,
             progress=None) -> pd.DataFrame:
    """Bands per method, overall (class ``all``) and per class, over the evaluation's queries.
    Columns: method, class, recall, mean, low, high, n (queries), unit, n_units, note (why a band
    is undefined, or what its unit is when not the one asked; empty otherwise).

    ``unit``: the unit of inference of the overall band (module docstring). ``"class"``: the
    classes are resampled (with too few classes, :data:`MIN_CLASSES`, the band is undefined and
    the note says so); ``"query"``: the queries are; None (default): ``"class"`` when the queries
    span at least :data:`MIN_CLASSES` classes, else ``"query"`` with a note saying why. A class's
    own band is always over its queries (within one class they are the only units), and its
    unit column says so.

    Per-split bands come from evaluating each split as its own retrieval problem
    (``evaluate(..., split=...)``), never from grouping the queries of a mixed gallery.
    ``classes``: only these bands (class names, and ``"all"`` for every query together; default:
    all, and every class with ``by_class``). ``n_recall``: on that coarser recall grid (see
    :func:`sub_grid`). ``progress(done, total, stage)``: called as the bands are computed (from
    the threads computing them; an exception it raises stops them)."""
    check_alpha(alpha)  # before any curve is read: a bad alpha is refused as a setting
    if unit is not None:
        _check_unit(unit)
    ds = ev.dataset
    todo = []  # (method, class, (curves, groups, note)) of every band, computed in one call
    for m in ev.methods:
        rows, recall, curves = ev.pr_curves(m)
        if n_recall is not None:
            cols = sub_grid(recall, n_recall)
            recall, curves = recall[cols], np.ascontiguousarray(curves[:, cols])  # the same sums as a coarse run
        labels = ds.labels[rows].astype(str)
        names = ([ALL] + (sorted(set(labels.tolist())) if by_class else [])) if classes is None else classes
        for cls in names:
            if cls == ALL:
                spec = (curves, labels, "")
                n_classes = len(set(labels.tolist()))
                if unit == "query":
                    spec = (curves, None, "")
                elif unit is None and n_classes < MIN_CLASSES:
                    spec = (curves, None, "")
                    todo.append((m, cls, spec, f"unit query: {_count(n_classes, 'class', 'classes')}, "
                                               f"a band over classes needs {MIN_CLASSES}"))
                    continue
                todo.append((m, cls, spec, ""))
            else:
                todo.append((m, cls, (curves[labels == str(cls)], None, ""), ""))
    lock = threading.Lock()
    finished = [0.0]

    def done(fraction: float) -> None:
        if progress is not None:
            with lock:
                finished[0] += fraction
                now = finished[0]
            progress(now, len(todo), f"resampling {'queries' if unit == 'query' else 'units'}"
                     if kind == "bootstrap" else "averaging curves")

    columns = _bands([spec for _, _, spec, _ in todo], recall, alpha, kind, n_boot, seed, done)
    for (_, _, _, remark), c in zip(todo, columns, strict=True):
        if remark:  # a band that is defined says why its unit is not the one asked; an undefined one why it is
            c["note"] = c["note"] or remark
    # one frame per band with its name columns (inserting text columns into a frame cost more than the band)
    return pd.concat([pd.DataFrame({"method": m, "class": cls, **c})
                      for (m, cls, _, _), c in zip(todo, columns, strict=True)], ignore_index=True)


def describe(bands: pd.DataFrame, alpha: float, kind: str) -> str:
    """What the bands of ``bands`` (rows of :func:`pr_bands`, any subset) are, for captions and
    titles: e.g. ``95 % simultaneous band (studentized bootstrap over 10 classes)``; a class's own
    band is named as over its queries. Frames without a unit column name the kind only."""
    level = f"{100 * (1 - alpha):g} %"
    head = f"{level} pointwise band (t interval" if kind == "t" else f"{level} simultaneous band (studentized bootstrap"
    if "unit" not in bands.columns or bands.empty:
        return head + ")"
    per = bands.drop_duplicates(["method", "class"])
    overall, own = per[per["class"] == ALL], per[per["class"] != ALL]
    parts = []
    for unit, part in overall.groupby("unit", sort=False):
        ns = sorted(set(part["n_units"].tolist()))
        count = f"{ns[0]:,}" if len(ns) == 1 else f"{ns[0]:,}-{ns[-1]:,}"
        parts.append(f"{count} {'classes' if unit == 'class' else 'queries'}")
    text = head + (" over " + " and ".join(parts) if parts else "")
    if not own.empty:
        text += "; each class's band over its queries" if parts else " over each class's queries"
    return text + ")"


def band_notes(bands: pd.DataFrame) -> list[str]:
    """The distinct notes of ``bands`` (why a band is undefined, or not at the unit asked), each
    once with the bands it concerns: ``method / class: note``."""
    if "note" not in bands.columns:
        return []
    per = bands.drop_duplicates(["method", "class"])
    per = per[per["note"] != ""]
    return [f"{', '.join(f'{m} / {c}' for m, c in zip(g['method'], g['class'], strict=True))}: {note}"
            for note, g in per.groupby("note", sort=False)]
