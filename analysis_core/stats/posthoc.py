"""Pairwise comparisons of group means: Tukey HSD (equal variances) and Games-Howell (unequal).

Groups as in :mod:`.variability`. Pairs whose comparison has no defined standard error (both
groups constant in Games-Howell; zero pooled variance in Tukey HSD) are reported with NaN p-value
and interval, ``reject`` False and the reason in ``note`` — never as a significant difference.

References: J. W. Tukey, "Comparing individual means in the analysis of variance", Biometrics 5,
1949; P. A. Games and J. F. Howell, "Pairwise multiple comparison procedures with unequal n's
and/or variances: a Monte Carlo study", Journal of Educational Statistics 1(2), 1976;
Y. Hochberg and A. C. Tamhane, "Multiple Comparison Procedures", Wiley, 1987 (simultaneous
intervals per group, eq. 7.10).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .studentized_range import studentized_range_ppf, studentized_range_sf
from .variability import groups

MAX_POSTHOC_GROUPS = 40  # 780 pairs; beyond, pairwise tables are skipped with a warning
PPF_NODES = 9  # Chebyshev nodes per piece of the studentized-range quantile interpolation
PPF_TOLERANCE = 1e-9  # largest interpolation error accepted (checked at both ends of each piece)


class TooManyGroups(ValueError):
    """Pairwise comparisons over more groups than :data:`MAX_POSTHOC_GROUPS`, or fewer than two."""


def check_posthoc(names: list[str]) -> None:
    k = len(names)
    if k > MAX_POSTHOC_GROUPS:
        raise TooManyGroups(f"{k} groups give {k * (k - 1) // 2} pairwise comparisons; pairwise tables are made for "
                            f"at most {MAX_POSTHOC_GROUPS} groups (choose classes or methods to compare).")
    if k < 2:
        raise TooManyGroups("fewer than two groups with at least two queries: nothing to compare pairwise.")


def quantiles_for_dfs(p: float, k: int, dfs: np.ndarray) -> np.ndarray:
    """The ``p`` quantile of the studentized range for many degrees of freedom at once (NaN where
    df is undefined). Few distinct df are computed exactly
    (:func:`~.studentized_range.studentized_range_ppf`); otherwise the quantile, smooth and
    monotone in 1/df, is interpolated by Chebyshev polynomials of degree ``PPF_NODES - 1`` on
    pieces of the requested range, and a piece whose interpolant misses the exact value at either
    end (where interpolation at Chebyshev nodes errs most) by more than :data:`PPF_TOLERANCE` is
    halved (up to 8 times, then exact values)."""
    dfs = np.asarray(dfs, np.float64)
    out = np.full(dfs.shape, np.nan)
    ok = np.isfinite(dfs) & (dfs > 0)
    if not ok.any():
        return out
    x = 1.0 / dfs[ok]

    def exact(v: np.ndarray) -> np.ndarray:
        return studentized_range_ppf(p, k, 1.0 / np.asarray(v, np.float64))

    res = np.empty(x.size)
    pieces = [(float(x.min()), float(x.max()), 0)]
    while pieces:
        lo, hi, depth = pieces.pop()
        inside = (x >= lo) & (x <= hi)
        if not inside.any():
            continue
        uniq = np.unique(x[inside])
        if depth >= 8 or uniq.size <= PPF_NODES + 2:
            vals = dict(zip(uniq.tolist(), exact(uniq).tolist(), strict=True))
            res[inside] = [vals[v] for v in x[inside].tolist()]
            continue
        nodes = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.pi * (np.arange(PPF_NODES) + 0.5) / PPF_NODES)
        cheb = np.polynomial.chebyshev.Chebyshev.fit(nodes, exact(nodes), PPF_NODES - 1, domain=[lo, hi])
        if np.max(np.abs(cheb(np.array([lo, hi])) - exact(np.array([lo, hi])))) > PPF_TOLERANCE:
            mid = 0.5 * (lo + hi)
            pieces += [(lo, mid, depth + 1), (mid, hi, depth + 1)]
            continue
        res[inside] = cheb(x[inside])
    out[ok] = res
    return out


@dataclass(frozen=True)
class PostHocResult:
    """Pairwise comparisons: ``table`` has group1, group2, meandiff (group2 - group1), p_adj,
    lower, upper, reject, note. ``intervals`` (Tukey only): per-group simultaneous intervals
    (Hochberg & Tamhane) whose disjointness means a significant difference."""

    method: str
    alpha: float
    table: pd.DataFrame
    intervals: pd.DataFrame | None
    warnings: list[str] = field(default_factory=list)

    def summary_frame(self) -> pd.DataFrame:
        return self.table


COLUMNS = ["group1", "group2", "meandiff", "p_adj", "lower", "upper", "reject", "note"]


def hochberg_tamhane_halfwidths(q_crit: float, mse: float, n: np.ndarray) -> np.ndarray:
    """Half-widths ``h_i`` of per-group intervals such that ``h_i + h_j`` approximates the Tukey
    half-width of pair (i, j) in least squares (Hochberg & Tamhane 1987, eq. 7.10); exact for
    equal group sizes and for two groups (``h_1 = h_2`` = half the pair's half-width)."""
    k = n.size
    d = np.sqrt(mse / n[:, None] + mse / n[None, :])
    np.fill_diagonal(d, 0.0)
    total = d[np.triu_indices(k, 1)].sum()
    w = np.full(k, total / 2) if k == 2 else ((k - 1) * d.sum(axis=0) - total) / ((k - 1) * (k - 2))
    return q_crit / math.sqrt(2) * w


def tukey_hsd(df: pd.DataFrame, alpha: float = 0.05, value: str = "ap") -> PostHocResult:
    """Tukey's honestly significant difference over groups (Tukey-Kramer for unequal sizes), with
    the per-group simultaneous intervals for the interval plot.

    For groups i, j: ``d = m_j - m_i``, ``se = sqrt(MSE/2 (1/n_i + 1/n_j))``,
    ``p = P(Q_{k, N-k} > |d| / se)``, interval ``d +- q_{1-alpha, k, N-k} se`` (as scipy's
    ``tukey_hsd``; the studentized range from :mod:`.studentized_range`)."""
    warn: list[str] = []
    names, samples = groups(df, warn, value)
    check_posthoc(names)
    k = len(samples)
    n = np.array([s.size for s in samples], np.float64)
    means = np.array([s.mean() for s in samples])
    dof = float(n.sum() - k)
    constant = all(np.ptp(s) == 0.0 for s in samples)  # exact test: sums of squares of equal values may round
    mse = 0.0 if constant else sum(float(((s - s.mean()) ** 2).sum()) for s in samples) / dof
    i, j = np.triu_indices(k, 1)
    d = means[j] - means[i]
    base = pd.DataFrame({"group1": [names[a] for a in i], "group2": [names[b] for b in j], "meandiff": d})
    if mse == 0.0:
        why = "undefined: zero pooled within-group variance (every group is constant)."
        warn.append(f"Tukey HSD {why}")
        table = base.assign(p_adj=np.nan, lower=np.nan, upper=np.nan, reject=False, note=why)
        intervals = pd.DataFrame({"group": names, "mean": means, "low": np.nan, "high": np.nan})
        return PostHocResult("tukey", alpha, table[COLUMNS], intervals, warn)
    se = np.sqrt(mse / 2 * (1 / n[i] + 1 / n[j]))
    p = studentized_range_sf(np.abs(d) / se, k, dof)
    q_crit = float(studentized_range_ppf(1 - alpha, k, np.array([dof]))[0])
    table = base.assign(p_adj=p, lower=d - q_crit * se, upper=d + q_crit * se, reject=p < alpha, note="")
    half = hochberg_tamhane_halfwidths(q_crit, mse, n)
    intervals = pd.DataFrame({"group": names, "mean": means, "low": means - half, "high": means + half})
    return PostHocResult("tukey", alpha, table[COLUMNS], intervals, warn)


def games_howell(df: pd.DataFrame, alpha: float = 0.05, value: str = "ap") -> PostHocResult:
    """Games-Howell pairwise comparisons: Tukey's studentized range with Welch's standard errors
    and degrees of freedom, for groups with unequal variances.

    For groups i, j: ``d = m_j - m_i``, ``se = sqrt(v_i/n_i + v_j/n_j)``,
    ``df = se^4 / ((v_i/n_i)^2/(n_i-1) + (v_j/n_j)^2/(n_j-1))``,
    ``p = P(Q_{k,df} > sqrt(2)|d|/se)``, interval ``d +- q_{1-alpha,k,df} se / sqrt(2)``.
    A pair of two constant groups has ``se = 0``: undefined (NaN), with the reason in ``note``.
    """
    warn: list[str] = []
    names, samples = groups(df, warn, value)
    check_posthoc(names)
    k = len(samples)
    rows = []
    for (i, a), (j, b) in itertools.combinations(enumerate(samples), 2):
        va, vb = (0.0 if np.ptp(x) == 0.0 else x.var(ddof=1) / x.size for x in (a, b))
        se = math.sqrt(va + vb)
        d = b.mean() - a.mean()
        if se == 0.0:
            rows.append(dict(group1=names[i], group2=names[j], meandiff=d, p_adj=math.nan, se=0.0, df=math.nan,
                             note="undefined: both groups are constant (zero standard error)."))
            continue
        dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        rows.append(dict(group1=names[i], group2=names[j], meandiff=d, p_adj=math.nan, se=se, df=dof, note=""))
    t = pd.DataFrame(rows)
    ok = t["se"].to_numpy() > 0
    t.loc[ok, "p_adj"] = studentized_range_sf(np.sqrt(2) * np.abs(t.loc[ok, "meandiff"].to_numpy()) /
                                              t.loc[ok, "se"].to_numpy(), k, t.loc[ok, "df"].to_numpy())
    half = quantiles_for_dfs(1 - alpha, k, t["df"].to_numpy()) * t["se"].to_numpy() / math.sqrt(2)
    t["lower"] = t["meandiff"] - half
    t["upper"] = t["meandiff"] + half
    t["reject"] = (t["p_adj"] < alpha).fillna(False).astype(bool)
    undefined = int(t["p_adj"].isna().sum())
    if undefined:
        warn.append(f"Games-Howell: {undefined} pair(s) of constant groups have no standard error; undefined.")
    return PostHocResult("games-howell", alpha, t[COLUMNS], None, warn)
