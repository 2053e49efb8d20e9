"""Variability of per-query AP across classes: the input tables and the one-way tests.

Input everywhere: a long table with one row per (method, query) and columns ``method``,
``query``, ``label``, ``ap`` (lone queries left out) — :func:`ap_frame` builds it from an
evaluation. Groups are classes (one method) or method x class pairs (several methods), as in
F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact of
inter-query variability on the performance of retrieval systems".

Which test when:

* ``anova`` (one-way F): equal variances, roughly normal AP within groups; the classic choice.
  Pair it with **Tukey HSD** (:mod:`.posthoc`).
* ``welch``: unequal variances; pair it with **Games-Howell**. Welch's test is the safer default
  (it loses little when variances are equal); the advice printed with the results never rests on
  Levene's test alone.
* ``kruskal`` (Kruskal-Wallis): no normality assumption; AP is bounded in [0, 1] and often
  skewed, so use it to check that a parametric result is not an artefact.
* ``levene`` (median-centred, i.e. Brown-Forsythe, as ``car::leveneTest``'s default): equal
  variances. Only groups of at least 3 queries enter it: with 2, both absolute deviations from the
  median are equal, the within-group spread of the deviations is zero and the statistic explodes.

Every statistic is total: on data that carry no information (all values equal, every group
constant, fewer than two groups) it is reported as undefined (NaN) with the reason in ``note`` and
in ``warnings``, never as a significant result. AP values equal to within
:data:`VALUE_TOLERANCE` are treated as equal before any test, so the last-bit rounding of the AP
computation (about 1e-16) can neither create variance nor break ties in rank tests.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError

MIN_GROUP = 2  # below this a group has no variance: dropped, with a warning
SMALL_GROUP = 5  # below this results are fragile: warning
MIN_LEVENE_GROUP = 3  # groups of 2 have identical absolute deviations from their median
VALUE_TOLERANCE = 1e-12  # metric values closer than this are one value (AP rounding is ~1e-16)
VARIANCE_RATIO_ADVICE = 4.0  # largest / smallest group variance beyond which Welch is advised
#: below this many queries in the smallest group, Welch's ANOVA and Games-Howell are not advised:
#: their per-group variance estimates are too noisy (with 3 values the largest / smallest ratio of
#: ten equal-variance groups exceeds 4 in 99.7 % of runs) and both reject too often on noise
#: (measured, 10 groups of 3, alpha 0.05: Welch 13 % of runs of normal values, 23 % of uniform
#: ones; 6.9 % with groups of 6, 5.2 % with 10); ANOVA and Tukey HSD hold 5 % (tested in
#: tests/core/test_edge_inputs.py)
WELCH_MIN_GROUP = 6


def merge_rounding_noise(x: np.ndarray, tol: float = VALUE_TOLERANCE) -> np.ndarray:
    """``x`` with values that lie within ``tol`` of their sorted neighbour replaced by the smallest
    value of their run, so that values equal up to floating-point rounding are exactly equal.
    Deterministic and independent of the order of ``x``. NaN (undefined) stays NaN."""
    x = np.asarray(x, np.float64)
    out = x.copy()
    defined = ~np.isnan(x)
    v = x[defined]
    if v.size == 0:
        return out
    order = np.argsort(v, kind="stable")
    s = v[order]
    starts = np.r_[True, np.diff(s) > tol]
    merged = np.empty_like(v)
    merged[order] = s[starts][np.cumsum(starts) - 1]
    out[defined] = merged
    return out


#: the largest magnitude the tests take: Welch's and Games-Howell's degrees of freedom hold fourth
#: powers of the values, which overflow float64 from ~1e77 (at 1e300 even the variances did: inf
#: or NaN, reported as "constant groups"); no metric comes near it
MAX_MAGNITUDE = 1e50


def check_magnitude(values: np.ndarray, what: str) -> None:
    """Refuse values whose squares the tests cannot sum in float64."""
    finite = values[np.isfinite(values)]
    top = float(np.max(np.abs(finite))) if finite.size else 0.0
    if top > MAX_MAGNITUDE:
        raise InputError("statistics", f"{what} reaches {top:.3g}; the tests take values up to "
                         f"{MAX_MAGNITUDE:g} (their squares and fourth powers overflow float64 beyond that).",
                         "divide the values by a constant first (the F and t tests and their p-values do not "
                         "change; means and intervals scale with it).")


def clean_values(df: pd.DataFrame, value: str = "ap") -> pd.DataFrame:
    """``df`` with ``value`` passed through :func:`merge_rounding_noise` (a copy); values beyond
    :data:`MAX_MAGNITUDE` are refused (:func:`check_magnitude`)."""
    values = df[value].to_numpy(np.float64)
    check_magnitude(values, f"'{value}'")
    return df.assign(**{value: merge_rounding_noise(values)})


def some(names: list[str], n: int = 3) -> str:
    """``'a', 'b', 'c' and 4 more``: a short list of names for a message."""
    return ", ".join(f"'{x}'" for x in names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def ap_frame(ev, methods: list[str] | None = None) -> pd.DataFrame:
    """(method, query, label, ap) for every scored (non-lone) query of an evaluation."""
    df = ev.per_query()
    df = df[df["n_positives"] > 0]
    if methods is not None:
        df = df[df["method"].isin(methods)]
    out = df[["method", "query", "label", "ap"]].copy()
    out["label"] = out["label"].astype(str)
    return out.reset_index(drop=True)


def class_summary(ap: pd.DataFrame, of_queries: dict | None = None) -> pd.DataFrame:
    """Per (method, class): queries that contributed (``n_queries``), mean, sd, min of AP, lowest
    mean first. ``of_queries`` (class -> queries in the evaluated set) adds ``of_queries``: with
    query sampling, how many queries the class had to sample from."""
    g = ap.groupby(["method", "label"])["ap"]
    out = pd.DataFrame({"n_queries": g.size(), "mean_ap": g.mean(), "sd_ap": g.std(ddof=1), "min_ap": g.min()})
    out = out.reset_index().sort_values(["mean_ap", "method", "label"]).reset_index(drop=True)
    if of_queries is not None:
        counts = {str(k): v for k, v in of_queries.items()}  # labels are strings in ``ap``
        out.insert(3, "of_queries", out["label"].map(counts).astype("Int64"))
    return out


def hardest_and_easiest(ap: pd.DataFrame, n: int, value: str = "ap") -> list:
    """The ``n`` classes with the lowest and the ``n`` with the highest mean ``value`` over every
    query of every method (ties by class name), in natural class order: where there are too many
    classes to read, the ones worth looking at first. Every class when there are at most ``2 n``."""
    from ..methods import natural_key

    means = ap.groupby("label")[value].mean()
    order = sorted(means.index, key=lambda c: (means[c], natural_key(str(c))))
    chosen = order if len(order) <= 2 * n else order[:n] + order[-n:]
    return sorted(chosen, key=lambda c: natural_key(str(c)))


def group_column(df: pd.DataFrame) -> pd.Series:
    """Group names: the class, or ``method | class`` when there are several methods."""
    if df["method"].nunique() > 1:
        return df["method"].astype(str) + " | " + df["label"].astype(str)
    return df["label"].astype(str)


def balanced_subsample(df: pd.DataFrame, n_per_group: int, seed: int = 0) -> pd.DataFrame:
    """The same ``n_per_group`` random queries of each class for every method (Brughi et al. used 5:
    F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact
    of inter-query variability on the performance of retrieval systems").

    Queries are drawn per class (seeded) and kept for all methods, so the design stays paired.
    Classes with fewer queries keep all of them.
    """
    rng = np.random.default_rng(seed)
    queries = df[["query", "label"]].drop_duplicates().sort_values(["label", "query"])
    keep = [np.empty(0, queries["query"].dtype)]
    for _, g in queries.groupby("label", sort=True):
        q = g["query"].to_numpy()
        keep.append(q if q.size <= n_per_group else rng.choice(q, n_per_group, replace=False))
    return df[df["query"].isin(np.concatenate(keep))].reset_index(drop=True)


def groups(df: pd.DataFrame, warn: list[str], value: str = "ap") -> tuple[list[str], list[np.ndarray]]:
    """Group names and their (rounding-merged) values; groups below :data:`MIN_GROUP` are left
    out and, like groups below :data:`SMALL_GROUP`, named in ``warn``."""
    if df.empty:
        return [], []
    df = clean_values(df, value)
    # the groups of ``df.groupby(group_column(df), sort=True)``, each in row order, without pandas
    # building a frame per group (most of a second at 1 200 groups)
    codes, uniques = pd.factorize(group_column(df), sort=True)
    order = np.argsort(codes, kind="stable")
    parts = np.split(df[value].to_numpy(np.float64)[order], np.flatnonzero(np.diff(codes[order])) + 1)
    names, samples, dropped, small = [], [], [], []
    for name, x in zip(uniques, parts, strict=True):
        x = x.copy()
        if x.size < MIN_GROUP:
            dropped.append(str(name))
            continue
        if x.size < SMALL_GROUP:
            small.append(str(name))
        names.append(str(name))
        samples.append(x)
    if dropped:
        warn.append(f"{len(dropped)} group(s) with fewer than {MIN_GROUP} queries left out ({some(dropped)}).")
    if small:
        warn.append(f"{len(small)} group(s) with fewer than {SMALL_GROUP} queries ({some(small)}): "
                    "results for them are fragile.")
    return names, samples


@dataclass(frozen=True)
class OneWayResult:
    """One-way tests over groups. ``tests``: one row per test (test, statistic, df1, df2,
    p_value, note — the reason when a test is undefined); ``groups``: n, mean, sd;
    ``advice``: which test and post-hoc procedure to read, and why."""

    tests: pd.DataFrame
    groups: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    advice: str = ""

    def summary_frame(self) -> pd.DataFrame:
        return self.tests


def _row(test: str, statistic: float = math.nan, df1: float = math.nan, df2: float = math.nan,
         p_value: float = math.nan, note: str = "") -> dict:
    return dict(test=test, statistic=float(statistic), df1=float(df1), df2=float(df2), p_value=float(p_value),
                note=note)


def _levene(samples: list[np.ndarray], names: list[str]) -> dict:
    """Median-centred Levene (Brown-Forsythe) over the groups of at least 3 queries."""
    from scipy import stats

    use = [s for s in samples if s.size >= MIN_LEVENE_GROUP]
    if len(use) < 2:
        return _row("levene", note=f"undefined: needs two groups of at least {MIN_LEVENE_GROUP} queries "
                                   f"({len(use)} such group(s)).")
    if not _deviations_vary(use) and sum(float(((d - d.mean()) ** 2).sum()) for d in (
            merge_rounding_noise(np.abs(s - np.median(s))) for s in use)) == 0.0:
        return _row("levene", note="undefined: the absolute deviations from the group medians do not vary within "
                                   "any group.")
    res = _bare(stats.levene, use)(*use, center="median")
    left = len(samples) - len(use)
    n = sum(s.size for s in use)
    note = f"{left} group(s) of fewer than {MIN_LEVENE_GROUP} queries left out" if left else ""
    return _row("levene", res.statistic, len(use) - 1, n - len(use), res.pvalue, note)


def _bare(test, samples: list[np.ndarray]):
    """scipy's ``test`` without its axis / NaN-policy wrapper when every sample is a 1-D array of
    finite values: for those the wrapper only checks and passes them through (same bits, tested),
    but it does so group by group — half of a test's time at a thousand groups."""
    if all(s.ndim == 1 and np.isfinite(s).all() for s in samples):
        return getattr(test, "__wrapped__", test)
    return test


def _deviations_vary(samples: list[np.ndarray]) -> bool:
    """Whether some group's absolute deviations from its median still vary after
    :func:`merge_rounding_noise` (two sorted neighbours more than :data:`VALUE_TOLERANCE` apart):
    then their sum of squared deviations from the mean is positive, with no per-group merge."""
    n = np.array([s.size for s in samples])
    group = np.repeat(np.arange(n.size), n)
    x = np.concatenate(samples)
    if np.isnan(x).any():
        median = np.array([np.median(s) for s in samples])
    else:  # np.median's arithmetic: the middle value, or the mean of the middle two
        v = x[np.lexsort((x, group))]
        mid = np.cumsum(n) - n + (n - 1) // 2
        median = np.where(n % 2 == 1, v[mid], (v[mid] + v[np.minimum(mid + 1, v.size - 1)]) / 2)
    dev = np.abs(x - np.repeat(median, n))
    order = np.lexsort((dev, group))
    gaps = np.diff(dev[order]) > VALUE_TOLERANCE
    return bool((gaps & (np.diff(group[order]) == 0)).any())


def one_way(df: pd.DataFrame, value: str = "ap") -> OneWayResult:
    """ANOVA, Welch ANOVA and Kruskal-Wallis of ``value`` over groups (scipy's ``f_oneway`` and
    ``kruskal``), plus Levene's test of equal variances (median-centred), each defined or
    undefined with its reason."""
    from scipy import stats

    warn: list[str] = []
    names, samples = groups(df, warn, value)
    k = len(samples)
    sample_var = [s.var(ddof=1) for s in samples]  # s.std(ddof=1) is its square root, bit for bit
    gframe = pd.DataFrame({"group": names, "n": [s.size for s in samples], "mean": [s.mean() for s in samples],
                           "sd": [np.sqrt(v) for v in sample_var]})
    tests = ("anova", "welch", "kruskal", "levene")
    if k < 2:
        why = f"undefined: fewer than two groups with at least {MIN_GROUP} queries ({k})."
        rows = [_row(t, note=why) for t in tests]
        warn.append("one-way tests " + why)
        return OneWayResult(pd.DataFrame(rows), gframe, warn, "")
    all_x = np.concatenate(samples)
    N = all_x.size
    constant = np.array([np.ptp(s) == 0.0 for s in samples])  # exact: the mean of equal values may round
    var = np.where(constant, 0.0, sample_var)
    zero = [n for n, c in zip(names, constant, strict=True) if c]
    rows = []
    if np.ptp(all_x) == 0.0:
        why = "undefined: every value is the same; there is no variation to test."
        rows = [_row(t, note=why) for t in tests]
        warn.append(f"one-way tests {why}")
        return OneWayResult(pd.DataFrame(rows), gframe, warn, "")
    if len(zero) == k:
        rows.append(_row("anova", df1=k - 1, df2=N - k, note="undefined: every group is constant (zero "
                         "within-group variance), so F divides by zero; the groups differ without any noise."))
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            f = _bare(stats.f_oneway, samples)(*samples)
        stat, pv = float(f.statistic), float(f.pvalue)
        if stat < 1e-20:  # equal group means: SS at or below zero by rounding (NaN stays NaN)
            stat, pv = 0.0, 1.0
        rows.append(_row("anova", stat, k - 1, N - k, pv))
    if zero:
        rows.append(_row("welch", note=f"undefined: {len(zero)} group(s) with zero variance ({some(zero)}); "
                                       "Welch weights groups by 1/variance."))
    else:
        f = _bare(stats.f_oneway, samples)(*samples, equal_var=False)
        df2 = (k * k - 1) / (3 * _welch_lambda(samples, sample_var))
        rows.append(_row("welch", f.statistic, k - 1, df2, f.pvalue))
    h = _bare(stats.kruskal, samples)(*samples)
    rows.append(_row("kruskal", h.statistic, k - 1, math.nan, h.pvalue))
    lev = _levene(samples, names)
    rows.append(lev)
    tests_df = pd.DataFrame(rows)
    advice = _advice(var, lev, min(x.size for x in samples))
    for r in rows:
        # one warning per concern: where the advice already says Welch's ANOVA is not to be read
        # (zero variances, groups too small), its undefined row is in the table, not warned again
        if r["note"].startswith("undefined") and not (r["test"] == "welch" and "Welch" in advice):
            warn.append(f"{r['test']}: {r['note']}")
    small = [w for w in warn if f"fewer than {SMALL_GROUP} queries (" in w]
    if small and advice.startswith("the smallest group"):  # the small groups in one warning
        warn = [w for w in warn if w not in small]
        advice = small[0].removesuffix(": results for them are fragile.") + "; " + advice
    return OneWayResult(tests_df, gframe, warn, advice)


def _welch_lambda(samples: list[np.ndarray], sample_var: list[float]) -> float:
    """``L = sum (1 - w_i/W)^2 / (n_i - 1)`` with ``w_i = n_i / s_i^2`` (Welch 1951; ``s_i^2``:
    ``sample_var``): the denominator degrees of freedom are ``(k^2 - 1) / (3 L)``."""
    n = np.array([s.size for s in samples], np.float64)
    w = n / np.array(sample_var)
    return float(((1 - w / w.sum()) ** 2 / (n - 1)).sum())


def _advice(var: np.ndarray, levene: dict, smallest: int) -> str:
    if smallest < WELCH_MIN_GROUP:
        n_zero = int((var <= 0).sum())
        zero = (f" ({n_zero} group(s) have zero variance, which leaves Welch's ANOVA undefined)" if n_zero else "")
        return (f"the smallest group has {smallest} queries (< {WELCH_MIN_GROUP}): too few to compare group "
                f"variances, and Welch's ANOVA and Games-Howell reject too often with so few{zero}; read ANOVA with "
                "Tukey HSD, and Kruskal-Wallis as the check that does not assume normality.")
    if var.min() <= 0:  # Welch and Games-Howell divide by each group's variance: undefined here
        n_zero = int((var <= 0).sum())
        return (f"{n_zero} group(s) have zero variance (every query the same value), which leaves Welch's ANOVA "
                "and Games-Howell undefined; read ANOVA with Tukey HSD, and Kruskal-Wallis as the check that "
                "does not assume normality." if var.max() > 0 else
                "every group is constant (zero variance within each): ANOVA, Welch's ANOVA, Tukey HSD and "
                "Games-Howell are undefined; Kruskal-Wallis still compares the groups' ranks.")
    ratio = var.max() / var.min()
    if ratio > VARIANCE_RATIO_ADVICE:
        return (f"group variances differ (largest / smallest = {ratio:.3g} > {VARIANCE_RATIO_ADVICE:g}): "
                "read Welch's ANOVA and Games-Howell rather than ANOVA and Tukey HSD.")
    p = levene["p_value"]
    if math.isfinite(p) and p < 0.05:
        return (f"Levene's test rejects equal variances (p = {p:.2g}): read Welch's ANOVA and Games-Howell "
                "rather than ANOVA and Tukey HSD.")
    return "group variances are comparable: ANOVA with Tukey HSD and Welch with Games-Howell should agree."


def metric_frame(ev, methods: list[str] | None = None, metrics: list[str] | None = None) -> pd.DataFrame:
    """Long table (method, query, label, metric, value) of every scored query's per-query values of
    the summary metrics (:func:`~analysis_core.metrics.registry.summary_metrics`; ``metrics``
    chooses some by name)."""
    from ..metrics.registry import summary_metrics

    df = ev.per_query()
    df = df[df["n_positives"] > 0]
    if methods is not None:
        df = df[df["method"].isin(methods)]
    frames = []
    for m in summary_metrics(ev.ks):
        if metrics is not None and m.name not in metrics:
            continue
        frames.append(pd.DataFrame({"method": df["method"].to_numpy(), "query": df["query"].to_numpy(),
                                    "label": df["label"].astype(str).to_numpy(), "metric": m.name,
                                    "value": df[m.column].to_numpy(np.float64)}))
    return pd.concat(frames, ignore_index=True)
