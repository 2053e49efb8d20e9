"""Query sampling: a stratified random sample of queries against the full gallery, and confidence
intervals for every per-query mean (mAP, MAP@R, R-Precision, P@1, MRR, Recall@K, P@k).

Design (Cochran 1977, *Sampling Techniques*, ch. 5): strata are classes; proportional allocation
``n_h ~ n N_h / N`` rounded by largest remainders (ties broken at random, seeded), then ``n_h``
queries drawn without replacement in each stratum. Where a class would get fewer than 2 queries
(many small classes), consecutive classes (by class code) are merged into strata of at least 2
expected queries, so every stratum has a variance estimate. The frame is the queries that have at
least one positive (lone queries have no AP and are excluded from every mean, as in a full run).

Estimate ``ybar_st = sum_h W_h ybar_h`` (``W_h = N_h / N``); variance
``v = sum_h W_h^2 (1 - n_h/N_h) s_h^2 / n_h`` (finite-population correction); interval
``ybar_st +- t_{1-alpha/2, df} sqrt(v)`` with Satterthwaite's degrees of freedom
``df = (sum_h g_h s_h^2)^2 / sum_h (g_h s_h^2)^2 / (n_h - 1)``, ``g_h = W_h^2 (1 - n_h/N_h) / n_h``.
The half-width shrinks like ``sqrt((1 - n/N) / n)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

METHOD_TEXT = ("stratified random sample of queries (strata: classes, merged where a class would get fewer "
               "than 2 queries; proportional allocation), stratified mean with finite-population correction, "
               "Student-t interval with Satterthwaite degrees of freedom (Cochran 1977, ch. 5)")


@dataclass(frozen=True)
class QuerySample:
    """A stratified sample of the frame ``frame`` (positions of eligible queries).

    ``chosen``: sampled positions (a subset of ``frame``, sorted); ``stratum_of``: stratum of each
    frame position (aligned with ``frame``); ``N_h``, ``n_h``: frame and sample size per stratum.
    """

    frame: np.ndarray
    stratum_of: np.ndarray
    N_h: np.ndarray
    n_h: np.ndarray
    chosen: np.ndarray
    n_classes: int
    seed: int

    @property
    def n(self) -> int:
        return int(self.n_h.sum())

    @property
    def N(self) -> int:
        return int(self.N_h.sum())

    @property
    def strata_are_classes(self) -> bool:
        return self.N_h.size == self.n_classes

    def describe(self) -> dict:
        return {"n": self.n, "of": self.N, "fraction": self.n / self.N, "seed": self.seed,
                "strata": int(self.N_h.size), "strata_are_classes": self.strata_are_classes,
                "method": METHOD_TEXT}


def _strata(class_sizes: np.ndarray, n: int, N: int) -> np.ndarray:
    """Stratum of each class: classes themselves, or runs of consecutive classes with >= 2
    expected queries each."""
    expected = n * class_sizes / N
    if expected.min() >= 2:
        return np.arange(class_sizes.size)
    out = np.empty(class_sizes.size, np.int64)
    h, acc = 0, 0.0
    for c, e in enumerate(expected.tolist()):
        out[c] = h
        acc += e
        if acc >= 2:
            h, acc = h + 1, 0.0
    if acc > 0 and h > 0:  # a short last run joins the previous stratum
        out[out == h] = h - 1
    return out


def stratified_sample(labels: np.ndarray, frame: np.ndarray, n: int, seed: int = 0) -> QuerySample:
    """Draw ``n`` of the ``frame`` positions, stratified by ``labels[frame]`` (integer codes)."""
    frame = np.asarray(frame, np.int64)
    N = frame.size
    if not 2 <= n < N:
        raise ValueError(f"sample size must be in [2, {N - 1}] (the frame has {N} queries), got {n}")
    rng = np.random.default_rng(seed)
    classes, cls = np.unique(labels[frame], return_inverse=True)
    sizes = np.bincount(cls)
    stratum_of_class = _strata(sizes, n, N)
    stratum_of = stratum_of_class[cls]
    N_h = np.bincount(stratum_of)
    expected = n * N_h / N
    n_h = np.floor(expected).astype(np.int64)
    short = n - int(n_h.sum())
    if short:
        rem = expected - n_h
        order = np.lexsort((rng.random(N_h.size), -rem))  # largest remainder first, random ties
        n_h[order[:short]] += 1
    chosen = []
    for h in range(N_h.size):
        members = frame[stratum_of == h]
        chosen.append(rng.choice(members, size=int(n_h[h]), replace=False))
    return QuerySample(frame=frame, stratum_of=stratum_of, N_h=N_h, n_h=n_h, chosen=np.sort(np.concatenate(chosen)),
                       n_classes=int(classes.size), seed=seed)


def stratified_interval(values: np.ndarray, strata: np.ndarray, sample: QuerySample, alpha: float = 0.05) -> dict:
    """Estimate and ``1 - alpha`` interval of the frame mean from the sampled ``values`` (one per
    sampled query, ``strata`` their stratum)."""
    y = np.asarray(values, np.float64)
    W = sample.N_h / sample.N
    est = 0.0
    g_s2 = np.zeros(sample.N_h.size)
    for h in range(sample.N_h.size):
        yh = y[strata == h]
        nh = yh.size
        if nh == 0:
            raise ValueError(f"stratum {h} has no sampled value")
        est += W[h] * math.fsum(yh.tolist()) / nh
        if nh > 1:
            g_s2[h] = W[h] ** 2 * (1 - nh / sample.N_h[h]) / nh * np.var(yh, ddof=1)
    var = float(g_s2.sum())
    if var > 0:
        nh = sample.n_h.astype(np.float64)
        ok = nh > 1
        df = var ** 2 / float(np.sum(g_s2[ok] ** 2 / (nh[ok] - 1)))
        half = float(stats.t.ppf(1 - alpha / 2, df)) * math.sqrt(var)
    else:
        df, half = float("inf"), 0.0
    est = float(est)
    return {"estimate": est, "low": est - half, "high": est + half, "se": math.sqrt(var), "df": float(df),
            "confidence": 1 - alpha}
