"""Variability of per-query AP across classes and methods (Brughi et al.; SPEC section 4).

Input everywhere: a long table with one row per (method, query) and columns ``method``,
``query``, ``label``, ``ap`` (lone queries left out) — :func:`ap_frame` builds it from an
evaluation. Groups are classes (one method) or method x class pairs (several methods).

Which test when:

* ``anova`` (one-way F): equal variances, roughly normal AP within groups; the classic choice
  and paper 003's. Pair it with **Tukey HSD**.
* ``welch``: unequal variances (Levene's test is reported); pair it with **Games-Howell**.
* ``kruskal`` (Kruskal-Wallis): no normality assumption; AP is bounded in [0, 1] and often
  skewed, so use it to check that a parametric result is not an artefact.
* two-way ANOVA method x class: separates the method effect, the class effect and their
  interaction (does a method's advantage depend on the class?).
* every method answers the same queries, so method comparisons are **paired**: the mixed model
  with a random query intercept, and per-pair paired tests (paired permutation, Wilcoxon
  signed-rank, mean difference with a t interval; Holm-corrected across pairs).
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

MIN_GROUP = 2  # below this a group has no variance: dropped, with a warning
SMALL_GROUP = 5  # below this results are fragile: warning
MAX_POSTHOC_GROUPS = 40  # 780 pairs; beyond, pairwise tables are skipped with a warning


class TooManyGroups(ValueError):
    """Pairwise comparisons over more groups than :data:`MAX_POSTHOC_GROUPS`."""


def _check_posthoc(names: list[str]) -> None:
    k = len(names)
    if k > MAX_POSTHOC_GROUPS:
        raise TooManyGroups(f"{k} groups give {k * (k - 1) // 2} pairwise comparisons; pairwise tables are made for "
                            f"at most {MAX_POSTHOC_GROUPS} groups (choose classes or methods to compare).")
    if k < 2:
        raise TooManyGroups("fewer than two groups with at least two queries: nothing to compare pairwise.")


def studentized_range_ppf(p: float, k: int, dfs: np.ndarray) -> np.ndarray:
    """Quantile of the studentized range for many degrees of freedom at once.

    scipy's ppf integrates numerically (~0.2 s a call). The quantile is smooth and monotone in
    1/df, so it is evaluated exactly at 9 Chebyshev nodes spanning the requested 1/df range and
    interpolated there (error far below 1e-6 on this smooth function); a single df is exact.
    """
    dfs = np.asarray(dfs, np.float64)
    x = 1.0 / dfs
    lo, hi = x.min(), x.max()
    if hi - lo < 1e-12 * max(hi, 1e-300):
        return np.full(dfs.shape, float(stats.studentized_range.ppf(p, k, dfs.flat[0])))
    nodes = 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.pi * (np.arange(9) + 0.5) / 9)
    values = np.array([stats.studentized_range.ppf(p, k, 1.0 / t) for t in nodes])
    cheb = np.polynomial.chebyshev.Chebyshev.fit(nodes, values, 8, domain=[lo, hi])
    return cheb(x)


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


def group_column(df: pd.DataFrame) -> pd.Series:
    """Group names: the class, or ``method | class`` when there are several methods."""
    if df["method"].nunique() > 1:
        return df["method"].astype(str) + " | " + df["label"].astype(str)
    return df["label"].astype(str)


def balanced_subsample(df: pd.DataFrame, n_per_group: int, seed: int = 0) -> pd.DataFrame:
    """The same ``n_per_group`` random queries of each class for every method (paper 003 used 5).

    Queries are drawn per class (seeded) and kept for all methods, so the design stays paired.
    Classes with fewer queries keep all of them.
    """
    rng = np.random.default_rng(seed)
    queries = df[["query", "label"]].drop_duplicates().sort_values(["label", "query"])
    keep = []
    for _, g in queries.groupby("label", sort=True):
        q = g["query"].to_numpy()
        keep.append(q if q.size <= n_per_group else rng.choice(q, n_per_group, replace=False))
    return df[df["query"].isin(np.concatenate(keep))].reset_index(drop=True)


def _groups(df: pd.DataFrame, warn: list[str]) -> tuple[list[str], list[np.ndarray]]:
    g = group_column(df)
    names, samples, dropped, small = [], [], [], []
    for name, part in df.groupby(g, sort=True):
        x = part["ap"].to_numpy(np.float64)
        if x.size < MIN_GROUP:
            dropped.append(str(name))
            continue
        if x.size < SMALL_GROUP:
            small.append(str(name))
        names.append(str(name))
        samples.append(x)

    def some(v: list[str]) -> str:
        return ", ".join(f"'{x}'" for x in v[:3]) + (f" and {len(v) - 3} more" if len(v) > 3 else "")

    if dropped:
        warn.append(f"{len(dropped)} group(s) with fewer than {MIN_GROUP} queries left out ({some(dropped)}).")
    if small:
        warn.append(f"{len(small)} group(s) with fewer than {SMALL_GROUP} queries ({some(small)}): "
                    "results for them are fragile.")
    return names, samples


@dataclass(frozen=True)
class OneWayResult:
    """One-way tests over groups. ``tests``: one row per test; ``groups``: n, mean, sd."""

    tests: pd.DataFrame
    groups: pd.DataFrame
    warnings: list[str] = field(default_factory=list)

    def summary_frame(self) -> pd.DataFrame:
        return self.tests


def welch_anova(samples: list[np.ndarray]) -> tuple[float, float, float, float]:
    """Welch's heteroscedastic one-way ANOVA: (F, df1, df2, p).

    ``w_i = n_i/s_i^2``, ``m = sum w_i x_i / W``, ``A = sum w_i (x_i - m)^2/(k-1)``,
    ``L = sum (1 - w_i/W)^2/(n_i - 1)``, ``F = A / (1 + 2(k-2)L/(k^2-1))``,
    ``df2 = (k^2-1)/(3L)`` (Welch 1951).
    """
    k = len(samples)
    n = np.array([s.size for s in samples], np.float64)
    mean = np.array([s.mean() for s in samples])
    var = np.array([s.var(ddof=1) for s in samples])
    w = n / var
    W = w.sum()
    m = (w * mean).sum() / W
    A = (w * (mean - m) ** 2).sum() / (k - 1)
    L = ((1 - w / W) ** 2 / (n - 1)).sum()
    F = A / (1 + 2 * (k - 2) * L / (k * k - 1))
    df2 = (k * k - 1) / (3 * L)
    return float(F), float(k - 1), float(df2), float(stats.f.sf(F, k - 1, df2))


def one_way(df: pd.DataFrame) -> OneWayResult:
    """ANOVA, Welch ANOVA and Kruskal-Wallis of AP over groups, plus Levene's test of equal
    variances (median-centred) as the guide to which to read."""
    warn: list[str] = []
    names, samples = _groups(df, warn)
    rows = []
    if len(samples) >= 2:
        all_x = np.concatenate(samples)
        k, N = len(samples), all_x.size
        grand = all_x.mean()
        ssb = sum(s.size * (s.mean() - grand) ** 2 for s in samples)
        ssw = sum(((s - s.mean()) ** 2).sum() for s in samples)
        F = (ssb / (k - 1)) / (ssw / (N - k)) if ssw > 0 else math.inf
        rows.append(dict(test="anova", statistic=F, df1=k - 1, df2=N - k, p_value=float(stats.f.sf(F, k - 1, N - k))))
        if all(s.var(ddof=1) > 0 for s in samples):
            F, d1, d2, p = welch_anova(samples)
            rows.append(dict(test="welch", statistic=F, df1=d1, df2=d2, p_value=p))
        else:
            warn.append("a group has zero variance: Welch's ANOVA is undefined and was skipped.")
        if np.ptp(all_x) > 0:
            h = stats.kruskal(*samples)
            rows.append(dict(test="kruskal", statistic=float(h.statistic), df1=k - 1, df2=np.nan,
                             p_value=float(h.pvalue)))
            lev = stats.levene(*samples, center="median")
            rows.append(dict(test="levene", statistic=float(lev.statistic), df1=k - 1, df2=N - k,
                             p_value=float(lev.pvalue)))
            if lev.pvalue < 0.05:
                warn.append(f"Levene's test rejects equal variances (p = {lev.pvalue:.2g}): prefer Welch's ANOVA "
                            "and Games-Howell over ANOVA and Tukey HSD.")
    else:
        warn.append("fewer than two groups with at least two queries: nothing to compare.")
    groups = pd.DataFrame({"group": names, "n": [s.size for s in samples], "mean": [s.mean() for s in samples],
                           "sd": [s.std(ddof=1) for s in samples]})
    return OneWayResult(pd.DataFrame(rows, columns=["test", "statistic", "df1", "df2", "p_value"]), groups, warn)


@dataclass(frozen=True)
class PostHocResult:
    """Pairwise comparisons: ``table`` has group1, group2, meandiff (group2 - group1), p_adj,
    lower, upper, reject. ``intervals`` (Tukey only): per-group simultaneous intervals
    (Hochberg & Tamhane) whose disjointness means a significant difference."""

    method: str
    alpha: float
    table: pd.DataFrame
    intervals: pd.DataFrame | None
    warnings: list[str] = field(default_factory=list)

    def summary_frame(self) -> pd.DataFrame:
        return self.table


def tukey_hsd(df: pd.DataFrame, alpha: float = 0.05) -> PostHocResult:
    """Tukey's honestly significant difference over groups (statsmodels), with the data for the
    simultaneous-interval plot."""
    from statsmodels.stats.multicomp import pairwise_tukeyhsd

    warn: list[str] = []
    names, samples = _groups(df, warn)
    _check_posthoc(names)
    endog = np.concatenate(samples)
    labels = np.concatenate([[n] * s.size for n, s in zip(names, samples, strict=True)])
    res = pairwise_tukeyhsd(endog, labels, alpha=alpha)
    pairs = list(itertools.combinations(res.groupsunique, 2))
    table = pd.DataFrame({
        "group1": [str(a) for a, _ in pairs], "group2": [str(b) for _, b in pairs],
        "meandiff": res.meandiffs, "p_adj": res.pvalues, "lower": res.confint[:, 0], "upper": res.confint[:, 1],
        "reject": res.reject.astype(bool),
    })
    res._simultaneous_ci()
    means = np.array([endog[labels == g].mean() for g in res.groupsunique])
    intervals = pd.DataFrame({"group": [str(g) for g in res.groupsunique], "mean": means,
                              "low": means - res.halfwidths, "high": means + res.halfwidths})
    return PostHocResult("tukey", alpha, table, intervals, warn)


def games_howell(df: pd.DataFrame, alpha: float = 0.05) -> PostHocResult:
    """Games-Howell pairwise comparisons: Tukey's studentized range with Welch's standard errors
    and degrees of freedom, for groups with unequal variances.

    For groups i, j: ``d = m_j - m_i``, ``se = sqrt(v_i/n_i + v_j/n_j)``,
    ``df = se^4 / ((v_i/n_i)^2/(n_i-1) + (v_j/n_j)^2/(n_j-1))``,
    ``p = P(Q_{k,df} > sqrt(2)|d|/se)``, interval ``d +- q_{1-alpha,k,df} se / sqrt(2)``.
    """
    warn: list[str] = []
    names, samples = _groups(df, warn)
    _check_posthoc(names)
    k = len(samples)
    rows = []
    for (i, a), (j, b) in itertools.combinations(enumerate(samples), 2):
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        se = math.sqrt(va + vb)
        d = b.mean() - a.mean()
        dof = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
        p = float(stats.studentized_range.sf(math.sqrt(2) * abs(d) / se, k, dof)) if se > 0 else float(d == 0)
        rows.append(dict(group1=names[i], group2=names[j], meandiff=d, p_adj=p, se=se, df=dof))
    t = pd.DataFrame(rows)
    half = studentized_range_ppf(1 - alpha, k, t["df"].to_numpy()) * t["se"].to_numpy() / math.sqrt(2)
    t["lower"] = t["meandiff"] - half
    t["upper"] = t["meandiff"] + half
    t["reject"] = t["p_adj"] < alpha
    return PostHocResult("games-howell", alpha, t[["group1", "group2", "meandiff", "p_adj", "lower", "upper",
                                                   "reject"]], None, warn)


def two_way_anova(df: pd.DataFrame) -> pd.DataFrame:
    """Two-way ANOVA of AP on method x class with interaction (type II sums of squares)."""
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    d = df.assign(cls=df["label"].astype(str), meth=df["method"].astype(str))
    model = smf.ols("ap ~ C(meth) * C(cls)", data=d).fit()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        table = anova_lm(model, typ=2)
    table = table.rename(index={"C(meth)": "method", "C(cls)": "class", "C(meth):C(cls)": "method:class"})
    table.index.name = "term"
    return table.rename(columns={"sum_sq": "sum_sq", "PR(>F)": "p_value"}).reset_index()


@dataclass(frozen=True)
class MixedModelResult:
    """``ap ~ method`` with a random intercept per query (statsmodels MixedLM, REML)."""

    table: pd.DataFrame
    query_variance: float
    residual_variance: float
    converged: bool
    warnings: list[str] = field(default_factory=list)

    def summary_frame(self) -> pd.DataFrame:
        return self.table


def mixed_model(df: pd.DataFrame) -> MixedModelResult:
    """Methods as fixed effects, queries as random intercepts: the paired design in one model.

    The ``method[...]`` coefficients are each method's mean AP difference from the reference
    method (the first in sorted order), with standard errors that account for every method
    answering the same queries."""
    import statsmodels.formula.api as smf

    warn: list[str] = []
    d = df.assign(meth=df["method"].astype(str), qid=df["query"].astype(str))
    if d["meth"].nunique() < 2:
        raise ValueError("the mixed model compares methods: give at least two")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = smf.mixedlm("ap ~ C(meth)", d, groups=d["qid"]).fit(reml=True)
    warn += sorted({str(w.message).splitlines()[0] for w in caught})
    ci = fit.conf_int()
    fe = fit.fe_params.index
    table = pd.DataFrame({"term": [t.replace("C(meth)[T.", "method[").replace("]", "]") for t in fe],
                          "coef": fit.fe_params.to_numpy(), "std_err": fit.bse_fe.to_numpy(),
                          "z": (fit.fe_params / fit.bse_fe).to_numpy(), "p_value": fit.pvalues[fe].to_numpy(),
                          "ci_low": ci.loc[fe, 0].to_numpy(), "ci_high": ci.loc[fe, 1].to_numpy()})
    converged = bool(getattr(fit, "converged", True))
    if not converged:
        warn.append("the mixed model did not converge: read its numbers with care.")
    return MixedModelResult(table, float(fit.cov_re.iloc[0, 0]), float(fit.scale), converged, warn)


def paired_tests(df: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10000,
                 seed: int = 0) -> pd.DataFrame:
    """Every pair of methods over the queries both answer: mean AP difference (a - b) with a
    t interval, paired sign-flip permutation test (seeded), Wilcoxon signed-rank test, both
    Holm-corrected across pairs, and win / tie / loss counts."""
    from statsmodels.stats.multitest import multipletests

    wide = df.pivot_table(index="query", columns="method", values="ap", aggfunc="first")
    rng = np.random.default_rng(seed)
    rows = []
    for a, b in itertools.combinations(sorted(wide.columns), 2):
        d = (wide[a] - wide[b]).dropna().to_numpy()
        n = d.size
        mean = d.mean()
        sd = d.std(ddof=1) if n > 1 else math.nan
        half = stats.t.ppf(1 - alpha / 2, n - 1) * sd / math.sqrt(n) if n > 1 else math.nan
        obs = abs(mean)
        hits = 0
        done = 0
        chunk = max(1, 2_000_000 // max(n, 1))
        while done < n_permutations:
            m = min(chunk, n_permutations - done)
            signs = rng.integers(0, 2, (m, n), dtype=np.int8) * 2 - 1
            hits += int(np.sum(np.abs(signs @ d) / n >= obs - 1e-15))
            done += m
        p_perm = (hits + 1) / (n_permutations + 1)
        nz = d[d != 0]
        p_w = float(stats.wilcoxon(nz).pvalue) if nz.size > 0 else 1.0
        rows.append(dict(method_a=a, method_b=b, n=n, mean_diff=mean, ci_low=mean - half, ci_high=mean + half,
                         p_permutation=p_perm, p_wilcoxon=p_w, wins=int((d > 0).sum()), ties=int((d == 0).sum()),
                         losses=int((d < 0).sum())))
    out = pd.DataFrame(rows)
    if len(out):
        out["p_permutation_holm"] = multipletests(out["p_permutation"], method="holm")[1]
        out["p_wilcoxon_holm"] = multipletests(out["p_wilcoxon"], method="holm")[1]
        out["reject"] = out["p_permutation_holm"] < alpha
    return out
