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

Pair statistics are estimated from each sampled query's (query, gallery item) pairs: the mean
positive / negative similarity as a ratio of estimated totals with a linearized variance
(Cochran 1977, 6.11), the JSD of the estimated total histograms with a Rao-Wu rescaled bootstrap
(Rao, Wu & Yue 1992; bias-corrected, basic interval). Over ordered (query -> gallery) pairs these equal the
full run's values under leave-one-out (every pair counted from both ends) and for disjoint query
and gallery sets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

METHOD_TEXT = ("stratified random sample of queries (strata: classes, merged where a class would get fewer "
               "than 2 queries; proportional allocation), stratified mean with finite-population correction; "
               "Student-t interval with Satterthwaite degrees of freedom (Cochran 1977, ch. 5); for hit rates "
               "(P@1, Recall@K, share of queries with mixed ties) and for means with n min(p, 1-p) < 10 the "
               "Korn-Graubard interval (Clopper-Pearson with the effective sample size)")
PAIR_METHOD_TEXT = ("mean similarities and JSD are estimated from each sampled query's pairs with the whole "
                    "gallery: ratio estimator with linearized variance (means), Rao-Wu rescaled bootstrap with "
                    "{reps} replicates, bias-corrected, basic interval (JSD); histograms and pair counts are the "
                    "sampled queries' own pairs")
BOOTSTRAP_REPS = 1000


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

    def strata_of(self, positions: np.ndarray) -> np.ndarray:
        """The stratum of each of ``positions`` (frame positions, e.g. the queries a pass scored)."""
        lookup = np.full(int(self.frame.max()) + 1 if self.frame.size else 0, -1, np.int64)
        lookup[self.frame] = self.stratum_of
        return lookup[np.asarray(positions, np.int64)]

    def describe(self) -> dict:
        return {"n": self.n, "of": self.N, "fraction": self.n / self.N, "seed": self.seed,
                "strata": int(self.N_h.size), "strata_are_classes": self.strata_are_classes,
                "method": METHOD_TEXT}


def query_frame(codes: np.ndarray, is_query: np.ndarray | None = None,
                is_gallery: np.ndarray | None = None) -> np.ndarray:
    """The sampling frame: positions of the queries with at least one positive in the gallery
    (every item is both without roles)."""
    from ..engine.layout import gallery_positives

    n = len(codes)
    isq = np.ones(n, bool) if is_query is None else is_query
    isg = np.ones(n, bool) if is_gallery is None else is_gallery
    return np.nonzero(isq & (gallery_positives(np.asarray(codes), isg) > 0))[0]


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


def stratified_mean(y: np.ndarray, strata: np.ndarray, sample: QuerySample) -> float:
    """The stratified estimate ``sum_h W_h ybar_h`` of the frame mean from the sampled values
    ``y`` (``strata``: their strata), each stratum's mean summed exactly."""
    W = sample.N_h / sample.N
    est = 0.0
    for h in range(sample.N_h.size):
        yh = y[strata == h]
        if yh.size == 0:
            raise ValueError(f"stratum {h} has no sampled value")
        est += W[h] * math.fsum(yh.tolist()) / yh.size
    return float(est)


def _t_interval(est: float, var: float, df: float, alpha: float) -> dict:
    from scipy import stats

    half = float(stats.t.ppf(1 - alpha / 2, df)) * math.sqrt(var) if var > 0 else 0.0
    return {"estimate": est, "low": est - half, "high": est + half, "se": math.sqrt(var), "df": float(df),
            "confidence": 1 - alpha}


def korn_graubard(est: float, var: float, df: float, n: int, alpha: float) -> dict:
    """Korn & Graubard's interval for a proportion estimated under a complex design ("Confidence
    intervals for proportions with small expected number of positive counts estimated from survey
    data", Survey Methodology, 1998): Clopper-Pearson with the effective sample size
    ``min(n, p(1-p)/var)``, adjusted for ``df``."""
    from scipy import stats

    p = min(max(est, 0.0), 1.0)
    # capped at n (Korn & Graubard): a cap with the finite population, n / (1 - n/N), made the
    # interval of an all-hit sample too tight (6 % misses below, 2.5 % nominal); what the finite
    # population proves is applied as bounds by mean_interval instead
    n_eff = n if var <= 0 else min(n, p * (1 - p) / var) if 0 < p < 1 else n
    if np.isfinite(df) and df > 0:
        n_eff *= (stats.t.ppf(1 - alpha / 2, n - 1) / stats.t.ppf(1 - alpha / 2, df)) ** 2
    x = n_eff * p
    low = 0.0 if x <= 0 else float(stats.beta.ppf(alpha / 2, x, n_eff - x + 1))
    high = 1.0 if x >= n_eff else float(stats.beta.ppf(1 - alpha / 2, x + 1, n_eff - x))
    return {"estimate": est, "low": min(low, est), "high": max(high, est), "se": math.sqrt(var), "df": float(df),
            "confidence": 1 - alpha, "effective_n": float(n_eff)}


def mean_interval(values: np.ndarray, strata: np.ndarray, sample: QuerySample, alpha: float = 0.05,
                  hit_rate: bool = False) -> dict:
    """Estimate and ``1 - alpha`` interval of the frame mean of a per-query metric in [0, 1] from
    the sampled ``values`` (``strata``: their strata). Student t with Satterthwaite df; for hit
    rates (P@1, Recall@K: per-query values 0 or 1, fractional only under ties) and for means so
    close to 0 or 1 that ``n min(p, 1 - p) < 10`` (within-class variances are then mostly 0 and a t
    interval collapses to a point), the Korn-Graubard interval (Korn & Graubard 1998):
    Clopper-Pearson with the effective sample size ``min(n, p(1-p)/v)``, adjusted for the df.
    Either is cut to the bounds the sample proves (the unsampled queries all 0, all 1), which
    matter when nearly every query is sampled."""
    y = np.asarray(values, np.float64)
    p = stratified_mean(y, strata, sample)
    var, df = _satterthwaite(y, strata, sample)
    if hit_rate or y.size * min(p, 1 - p) < 10:
        out = {**korn_graubard(p, var, df, y.size, alpha), "interval": "korn-graubard"}
    else:
        out = {**_t_interval(p, var, df, alpha), "interval": "t"}
    # the frame mean is known to lie between "every unsampled query scores 0" and "... scores 1":
    # an interval wider than that (few strata left to vary, df ~ 1, nearly every query sampled)
    # says less than the data do
    known, unknown = math.fsum(y.tolist()), sample.N - y.size
    out["low"], out["high"] = max(out["low"], known / sample.N), min(out["high"], (known + unknown) / sample.N)
    return out


def _satterthwaite(z: np.ndarray, strata: np.ndarray, sample: QuerySample) -> tuple[float, float]:
    """(variance of the stratified mean of ``z``, Satterthwaite df). Each stratum's sample
    variance by two passes over its values shifted by its first value: exactly 0 for a stratum
    of equal values, whatever their magnitude."""
    H = sample.N_h.size
    W = sample.N_h / sample.N
    z = np.asarray(z, np.float64)
    n_h = np.bincount(strata, minlength=H)
    first = np.zeros(H)
    first[strata[::-1]] = z[::-1]  # the first value of each stratum (the last write wins)
    d = z - first[strata]
    dbar = np.bincount(strata, weights=d, minlength=H) / np.maximum(n_h, 1)
    e = d - dbar[strata]
    ss = np.bincount(strata, weights=e * e, minlength=H)
    many = n_h > 1
    g_s2 = np.zeros(H)
    g_s2[many] = W[many] ** 2 * (1 - n_h[many] / sample.N_h[many]) / n_h[many] * ss[many] / (n_h[many] - 1)
    var = float(g_s2.sum())
    if var <= 0:
        return 0.0, float("inf")
    nh = sample.n_h.astype(np.float64)
    ok = nh > 1
    return var, var ** 2 / float(np.sum(g_s2[ok] ** 2 / (nh[ok] - 1)))


def ratio_interval(y: np.ndarray, x: np.ndarray, strata: np.ndarray, sample: QuerySample,
                   alpha: float = 0.05) -> dict:
    """Ratio of frame totals ``sum y / sum x`` (e.g. mean positive similarity = summed positive
    scores / positive pairs) from the sample: combined ratio estimator, linearized variance."""
    y = np.asarray(y, np.float64)
    x = np.asarray(x, np.float64)
    xbar = stratified_mean(x, strata, sample)
    if xbar == 0:
        return {"estimate": float("nan"), "low": float("nan"), "high": float("nan"), "se": float("nan"),
                "df": float("nan"), "confidence": 1 - alpha, "interval": "ratio, linearized"}
    r = stratified_mean(y, strata, sample) / xbar
    var, df = _satterthwaite((y - r * x) / xbar, strata, sample)
    return {**_t_interval(r, var, df, alpha), "interval": "ratio, linearized"}


def rao_wu_weights(strata: np.ndarray, sample: QuerySample, reps: int, seed: int) -> np.ndarray:
    """(reps, n) Rao-Wu rescaled bootstrap weights (resampling n_h - 1 per stratum), scaled so the
    full-sample weights are N_h / n_h; they reproduce the finite-population-corrected variance of a
    stratified mean."""
    rng = np.random.default_rng([seed, 20261122])
    n = strata.size
    w = np.empty((reps, n))
    for h in range(sample.N_h.size):
        idx = np.nonzero(strata == h)[0]
        nh = idx.size
        base = sample.N_h[h] / nh
        if nh < 2:
            w[:, idx] = base
            continue
        m = nh - 1
        lam = math.sqrt(m * (1 - nh / sample.N_h[h]) / (nh - 1))
        r = rng.multinomial(m, np.full(nh, 1.0 / nh), size=reps)
        w[:, idx] = base * (1 - lam + lam * (nh / m) * r)
    return w


def statistic_interval(stat, data: np.ndarray, strata: np.ndarray, sample: QuerySample, alpha: float = 0.05,
                       reps: int = BOOTSTRAP_REPS) -> dict:
    """Estimate and percentile interval of ``stat(weighted totals)`` where the totals are
    ``weights @ data`` (one row of ``data`` per sampled query), by the Rao-Wu bootstrap."""
    data = np.asarray(data, np.float64).reshape(strata.size, -1)
    w0 = (sample.N_h / np.bincount(strata, minlength=sample.N_h.size))[strata]
    est = float(stat(w0 @ data))
    reps_w = rao_wu_weights(strata, sample, reps, sample.seed)
    boot = np.asarray(stat(reps_w @ data), np.float64)
    boot = boot[np.isfinite(boot)]
    if boot.size < 2:
        return {"estimate": est, "low": float("nan"), "high": float("nan"), "se": float("nan"), "df": None,
                "confidence": 1 - alpha, "replicates": reps, "plug_in": est}
    # bootstrap bias correction and the basic (reverse-percentile) interval: a plug-in divergence
    # of sparse sampled histograms is biased upwards, and its replicates even more so
    bias = float(np.mean(boot)) - est
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return {"estimate": est - bias, "low": float(2 * est - hi), "high": float(2 * est - lo),
            "se": float(np.std(boot, ddof=1)), "df": None, "confidence": 1 - alpha, "replicates": reps,
            "plug_in": est, "interval": "Rao-Wu bootstrap, basic"}
