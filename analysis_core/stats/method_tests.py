"""Comparisons between methods that answer the same queries: two-way ANOVA method x class, the
mixed model with a random query intercept, and paired tests per pair of methods.

Every method answers the same queries, so method comparisons are **paired**. Each function is
total: where a statistic is undefined (one method, residual df 0, no variation, identical
methods) it says so — NaN with the reason in ``note`` and in ``warnings`` — and never reports a
significant difference from rounding noise (values equal within
:data:`~.variability.VALUE_TOLERANCE` are merged first).

Conventions (stated because they differ from some defaults): two-way ANOVA uses type II sums of
squares (as ``car::Anova``); the mixed model is fitted by exact REML (lme4's ``lmer`` fit and
standard errors) and its tests are t tests with the between-within degrees of freedom (a method
term: observations - queries - (methods - 1), which is (Q - 1)(M - 1) when every method answers
every query, and the paired t test's Q - 1 for two methods; the intercept: queries - 1), not
Wald z tests: with few queries z claimed significance on noise (30 % of null runs at α = 0.05
with 2 queries);
Wilcoxon's signed-rank test drops zero differences (``zero_method="wilcox"``, R's default) and
uses no continuity correction (exact distribution for n <= 50 without ties, as R; otherwise the
normal approximation with tie-corrected variance); the paired permutation test
flips signs of the differences, exactly over all 2^n sign vectors for n <= 16, else 10 000 seeded
random flips with p = (hits + 1) / (B + 1).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import math
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..options import check_alpha, check_int
from .variability import VALUE_TOLERANCE, clean_values, merge_rounding_noise

EXACT_PERMUTATION_MAX_N = 16  # 65 536 sign vectors


def _undefined_terms(terms: list[str], why: str) -> pd.DataFrame:
    return pd.DataFrame({"term": terms, "sum_sq": np.nan, "df": np.nan, "F": np.nan, "p_value": np.nan,
                         "note": why})


def two_way_anova(df: pd.DataFrame, value: str = "ap", warn: list[str] | None = None) -> pd.DataFrame:
    """Two-way ANOVA of ``value`` on method x class with interaction (type II sums of squares):
    term, sum_sq, df, F, p_value, note."""
    warn = [] if warn is None else warn
    terms = ["method", "class", "method:class", "Residual"]
    d = clean_values(df, value).assign(cls=_levels(df["label"]), meth=_levels(df["method"]))
    n_m, n_c = d["meth"].nunique(), d["cls"].nunique()
    why = ""
    if n_m < 2 or n_c < 2:
        why = f"undefined: needs at least two methods and two classes ({n_m} method(s), {n_c} class(es))."
    elif np.ptp(d[value].to_numpy()) == 0.0:
        why = "undefined: every value is the same; there is no variation to test."
    else:
        cell = d.groupby(["meth", "cls"], observed=True)[value]
        resid_df = len(d) - cell.ngroups
        if resid_df <= 0:
            why = ("undefined: residual df 0 (one query per method x class cell): use at least two queries per "
                   "class.")
        elif float((cell.max() - cell.min()).max()) == 0.0:  # every cell's range (np.ptp) zero
            why = "undefined: every method x class cell is constant (zero residual variance), so F divides by zero."
    if why:
        warn.append(f"two-way ANOVA {why}")
        return _undefined_terms(terms, why)
    out = _two_way_type2(d[value].to_numpy(np.float64), d["meth"].to_numpy(), d["cls"].to_numpy())
    out["note"] = ""
    bad = out["term"].ne("Residual") & ~np.isfinite(out["p_value"].to_numpy(np.float64))
    if bad.any():
        out.loc[bad, "note"] = "undefined: the term has no degrees of freedom left in this design."
        warn.append(f"two-way ANOVA: term(s) {', '.join(out.loc[bad, 'term'])} undefined in this design.")
    return out[["term", "sum_sq", "df", "F", "p_value", "note"]]


def _two_way_type2(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
    """Type II two-way ANOVA with interaction from cell counts and sums, without the
    n x (levels_a x levels_b) design matrix (minutes at 600 classes):
    ``SS(a | b) = RSS(b) - RSS(a + b)``, ``SS(b | a) = RSS(a) - RSS(a + b)``,
    ``SS(ab | a, b) = RSS(a + b) - RSS(a * b)``, each term's df the rank the term adds. The
    additive fit solves the normal equations with the b effects eliminated (an a x a system).
    Cells without data are allowed: the additive model's rank is ``levels_a + levels_b -
    components`` of the a-b graph of filled cells, the full model's the number of filled cells
    (a term left without rank has df 0 and no test). The same as statsmodels' ``anova_lm(ols(y ~
    C(a) * C(b)), typ=2)`` on complete designs; on incomplete ones that fits a rank-deficient model
    and its numbers depend on the row order, these do not."""
    from scipy import stats

    ia, la = pd.factorize(a, sort=True)
    ib, lb = pd.factorize(b, sort=True)
    m, c = la.size, lb.size
    n_cells = np.bincount(ia * c + ib, minlength=m * c).reshape(m, c).astype(np.float64)
    filled = n_cells > 0
    y = y - y.mean()  # centred: the sums of squares below subtract smaller numbers
    s_cells = np.bincount(ia * c + ib, weights=y, minlength=m * c).reshape(m, c)
    total = float(y @ y)
    n_a, n_b = n_cells.sum(axis=1), n_cells.sum(axis=0)
    s_a, s_b = s_cells.sum(axis=1), s_cells.sum(axis=0)
    rss_full = total - float((s_cells[filled] ** 2 / n_cells[filled]).sum())
    rss_a = total - float((s_a**2 / n_a).sum())
    rss_b = total - float((s_b**2 / n_b).sum())
    k = np.diag(n_a) - (n_cells / n_b) @ n_cells.T
    r = s_a - (n_cells / n_b) @ s_b
    eff_a = np.linalg.lstsq(k, r, rcond=None)[0]
    eff_b = (s_b - n_cells.T @ eff_a) / n_b
    rss_add = total - float(eff_a @ s_a + eff_b @ s_b)
    rank_add = m + c - _components(*np.nonzero(filled))
    n_filled = int(filled.sum())
    df_res = float(y.size - n_filled)
    ss = np.array([rss_b - rss_add, rss_a - rss_add, rss_add - rss_full, rss_full])
    dfs = np.array([rank_add - c, rank_add - m, n_filled - rank_add, df_res], np.float64)
    ss[:3] = np.where(dfs[:3] > 0, np.maximum(ss[:3], 0.0), 0.0)  # rounding below zero; no rank, no sum
    mse = rss_full / df_res
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.r_[np.where(dfs[:3] > 0, ss[:3] / dfs[:3] / mse, np.nan), np.nan]
        p = np.r_[stats.f.sf(f[:3], np.maximum(dfs[:3], 1), df_res), np.nan]
    return pd.DataFrame({"term": ["method", "class", "method:class", "Residual"], "sum_sq": ss, "df": dfs, "F": f,
                         "p_value": p})


def _components(a: np.ndarray, b: np.ndarray) -> int:
    """Connected components of the bipartite graph with an edge (a_i, b_i) per row."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    na, nb = int(a.max()) + 1, int(b.max()) + 1
    graph = coo_matrix((np.ones(a.size), (a, na + b)), shape=(na + nb, na + nb))
    return int(connected_components(graph, directed=False)[0])


def _levels(col: pd.Series) -> pd.Categorical:
    """``col`` as text categories in sorted order: the levels (and so the design matrix) patsy
    builds from the text column, without patsy inspecting every value (seconds on 20 000 rows)."""
    text = col.astype(str).to_numpy(object)
    return pd.Categorical(text, categories=sorted(set(text)))


@dataclass(frozen=True)
class MixedModelResult:
    """``value ~ method`` with a random intercept per query, fitted by REML.
    ``table``: term, coef, std_err, t, df, p_value, ci_low, ci_high, note."""

    table: pd.DataFrame
    query_variance: float
    residual_variance: float
    converged: bool
    warnings: list[str] = field(default_factory=list)
    n_obs: int = 0  # (method, query) values the model was fitted on

    def summary_frame(self) -> pd.DataFrame:
        return self.table


def mixed_model(df: pd.DataFrame, alpha: float = 0.05, value: str = "ap") -> MixedModelResult:
    """Methods as fixed effects, queries as random intercepts: the paired design in one model,
    ``value ~ method + (1 | query)`` fitted by REML (:class:`_QueryInterceptREML`).

    The ``method[...]`` coefficients are each method's mean difference from the reference method
    (the first in sorted order), with standard errors that account for every method answering the
    same queries: ``Cov(beta) = s2 (X' V^-1 X)^-1`` at the REML estimates, as lme4's ``vcov``.
    statsmodels' ``MixedLM`` adds the observed coupling between the fixed effects and the variance
    ratio, which differs from this when queries are answered by different subsets of methods. t
    tests and intervals with the between-within degrees of freedom (see the module's
    conventions; statsmodels' Wald z is too liberal with few queries). Undefined (with the reason) for fewer than two
    methods, no variation, methods that agree on every query, or method effects that fit every
    within-query difference exactly (zero residual variance). Values still non-finite after
    :func:`~.variability.clean_values` are left out."""
    return mixed_fit(df, value).result(alpha)


@dataclass(frozen=True)
class MixedFit:
    """The REML fit of :func:`mixed_model`, before the significance level enters: ``why`` says
    why the model is undefined (empty when it is fitted)."""

    terms: list[str]
    why: str
    coef: np.ndarray | None = None
    se: np.ndarray | None = None
    theta: float = math.nan
    scale: float = math.nan
    converged: bool = False
    warnings: list[str] = field(default_factory=list)
    n_obs: int = 0
    df: np.ndarray | None = None  # each term's degrees of freedom

    def result(self, alpha: float) -> MixedModelResult:
        """The model's table with ``1 - alpha`` t intervals."""
        from scipy import stats

        if self.why:
            t = pd.DataFrame({"term": self.terms, "coef": np.nan, "std_err": np.nan, "t": np.nan, "df": np.nan,
                              "p_value": np.nan, "ci_low": np.nan, "ci_high": np.nan, "note": self.why})
            return MixedModelResult(t, math.nan, math.nan, False, list(self.warnings), 0)
        coef, se, df = self.coef, self.se, self.df
        t = coef / se
        half = stats.t.ppf(1 - alpha / 2, df) * se
        table = pd.DataFrame({"term": self.terms, "coef": coef, "std_err": se, "t": t, "df": df,
                              "p_value": 2 * stats.t.sf(np.abs(t), df), "ci_low": coef - half,
                              "ci_high": coef + half, "note": ""})
        return MixedModelResult(table, self.theta * self.scale, self.scale, self.converged, list(self.warnings),
                                self.n_obs)


def mixed_fit(df: pd.DataFrame, value: str = "ap") -> MixedFit:
    """The fit of :func:`mixed_model` (every warning included): what a change of the significance
    level leaves unchanged."""
    warn: list[str] = []
    d = clean_values(df, value).assign(meth=df["method"].astype(str), qid=df["query"].astype(str))
    d = d[np.isfinite(d[value].to_numpy(np.float64))]
    methods = sorted(d["meth"].unique())
    terms = ["Intercept"] + [f"method[{m}]" for m in methods[1:]]
    why = ""
    if len(methods) < 2:
        why = "undefined: the mixed model compares methods; give at least two."
    elif np.ptp(d[value].to_numpy()) == 0.0:
        why = "undefined: every value is the same; there is no variation to test."
    else:
        per_query = d.groupby("qid")[value]
        shared = int((per_query.size() >= 2).sum())
        if shared < 2:
            why = f"undefined: {shared} query(ies) answered by two or more methods; the model needs at least two."
        elif float((per_query.max() - per_query.min()).max()) == 0.0:
            why = "undefined: the methods agree on every query (zero residual variance); no difference to test."
    if not why:
        qcode, queries = pd.factorize(d["qid"])
        mcode = pd.Categorical(d["meth"], categories=methods).codes.astype(np.int64)
        model = _QueryInterceptREML(d[value].to_numpy(np.float64), qcode, mcode, len(methods))
        n_queries = len(queries)
        # between-within df of a method term: observations - rank of [query, method] dummies
        # (queries + methods - the components of the query-method graph; one when connected)
        within_df = len(d) - n_queries - len(methods) + _components(qcode, mcode)
        df = np.r_[n_queries - 1, np.full(len(methods) - 1, within_df)].astype(np.float64)
        if model.within_rss() <= VALUE_TOLERANCE**2 or within_df < 1:
            why = ("undefined: the method effects fit every within-query difference exactly (zero residual "
                   "variance); nothing is left to test them against.")
    if not why:
        try:
            theta, converged = model.maximise()
            coef, cov, scale = model.estimates(theta)
        except (np.linalg.LinAlgError, ValueError) as exc:
            why = f"undefined: the REML fit failed ({exc}); too little data for a random query effect."
        else:
            se = np.sqrt(np.diag(cov))
            if not np.isfinite(se).all():
                why = "undefined: the fit gives no standard errors (too few queries for a random query effect)."
    if why:
        warn.append(f"mixed model {why}")
        return MixedFit(terms, why, warnings=warn)
    if theta == 0.0:
        warn.append("mixed model: query variance estimated at 0 (boundary): the queries vary no more than the "
                    "residual, and the method effects are those of ordinary least squares.")
    if not converged:
        warn.append("the mixed model did not converge: read its numbers with care.")
    return MixedFit(terms, "", coef, se, theta, scale, converged, warn, len(d), df)


REML_THETA_GRID = np.r_[0.0, np.logspace(-8, 8, 33)]  # query / residual variance ratios where the search starts
REML_THETA_MAX = 1e30  # past it the residual variance is far below the values' rounding: the search stops
_QR_ROWS = 1 << 16  # rows per QR block: the within-query rows are folded in without one n x p matrix


def _triangle(a: np.ndarray) -> np.ndarray:
    """The R of ``a = QR`` as a square k x k matrix (zero rows below when ``a`` has fewer than k
    rows), so that triangles can be stacked and folded again: ``||a v|| = ||R v||`` for every v."""
    r = np.linalg.qr(a, mode="r")
    out = np.zeros((a.shape[1], a.shape[1]))
    out[: r.shape[0]] = r
    return out


class _QueryInterceptREML:
    """REML for ``y = X beta + Z u + e`` with one random intercept per query, ``u_q ~ N(0, theta
    s2)``, ``e ~ N(0, s2)``; X = intercept + treatment dummies of methods 1..p-1 (0 is the
    reference).

    Within a query of n rows, ``V / s2 = I + theta 11'`` splits (Sherman-Morrison) into the
    within-query projector ``I - 11'/n``, which theta leaves alone, and the query mean ``11'/n``,
    weighted ``g = 1 / (1 + theta n)``; ``log|V / s2| = log(1 + theta n)``. So ``[X, y]`` splits
    into within rows (each row minus its query's mean) and one between row per query (sqrt(n) times
    its query's means), and each part is folded once into a (p + 1)-square triangle by QR: the
    within rows into one, the between rows of the queries of each size n into one. At any theta the
    GLS fit is the QR of those few triangles stacked, the between ones scaled by sqrt(g): O(sizes x
    p^3) a step, where solving per query costs O(rows) a step (statsmodels' MixedLM: 12 s on 7 218
    rows). QR rather than normal equations so that the residual sum of squares keeps its digits
    when the method effects explain most of the within-query variation."""

    def __init__(self, y: np.ndarray, query: np.ndarray, method: np.ndarray, n_methods: int) -> None:
        p = self.p = n_methods
        self.n = y.size
        self.shift = float(y.mean())  # taken out of y (the intercept gets it back): fewer digits cancel
        y = y - self.shift
        size = np.bincount(query).astype(np.float64)
        counts = np.bincount(query * p + method, minlength=size.size * p).reshape(-1, p)
        means = np.column_stack([np.ones(size.size), counts[:, 1:] / size[:, None],
                                 np.bincount(query, weights=y) / size])  # per query: X's and y's means
        self.within = np.zeros((p + 1, p + 1))
        for s in range(0, self.n, _QR_ROWS):
            q, m = query[s:s + _QR_ROWS], method[s:s + _QR_ROWS]
            rows = np.column_stack([np.ones(q.size), m[:, None] == np.arange(1, p), y[s:s + _QR_ROWS]]) - means[q]
            self.within = _triangle(np.vstack([self.within, rows]))
        self.sizes, which = np.unique(size, return_inverse=True)
        self.n_queries = np.bincount(which).astype(np.float64)
        between = np.sqrt(size)[:, None] * means
        self.between = np.stack([_triangle(between[which == j]) for j in range(self.sizes.size)])

    def within_rss(self) -> float:
        """Residual sum of squares of the within-query rows on the method dummies (theta -> infinity):
        zero when the method effects fit every within-query difference, and then s2 -> 0."""
        r = self.within
        fit = np.linalg.lstsq(r[:, : self.p], r[:, self.p], rcond=None)[0]
        return float(np.sum((r[:, self.p] - r[:, : self.p] @ fit) ** 2))

    def _fold(self, theta: float) -> tuple[np.ndarray, np.ndarray]:
        """(g per query size, the triangle of the GLS fit at ``theta``): ``R[:p, :p]' R[:p, :p] =
        X' V^-1 X s2``, ``R[:p, :p] beta = R[:p, p]``, ``R[p, p]^2`` = the GLS residual sum of squares."""
        g = 1.0 / (1.0 + theta * self.sizes)
        scaled = np.sqrt(g)[:, None, None] * self.between
        return g, _triangle(np.vstack([self.within, scaled.reshape(-1, self.p + 1)]))

    def _gls(self, theta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(g, R of :meth:`_fold`, ``R[:p, :p]^-1``, beta of the centred y) at ``theta``."""
        g, r = self._fold(theta)
        r_inv = np.linalg.inv(r[: self.p, : self.p])  # p x p: scipy's solve_triangular costs 2 ms a call
        return g, r, r_inv, r_inv @ r[: self.p, self.p]

    def criterion(self, theta: float) -> float:
        """-2 x the REML log-likelihood with s2 profiled out (``s2 = rss / (n - p)``):
        ``(n - p) (1 + log(2 pi rss / (n - p))) + sum_q log(1 + theta n_q) + log|X' V^-1 X s2|``."""
        _, r = self._fold(theta)
        diag, rss, dof = np.abs(np.diag(r)[: self.p]), r[self.p, self.p] ** 2, self.n - self.p
        if not (diag > 0).all() or not rss > 0:
            return math.inf
        return float(dof * (1 + math.log(2 * math.pi * rss / dof)) + self.n_queries @ np.log1p(theta * self.sizes)
                     + 2 * np.log(diag).sum())

    def slope(self, theta: float) -> float:
        """d criterion / d theta, exact: with ``g' = -n g^2``, the residual sum of squares changes by
        ``-sum_q n_q g_q^2 (n_q e_q^2)`` (e_q: the query's mean residual; beta stays optimal) and
        ``log|X' V^-1 X|`` by ``-sum_q n_q g_q^2 x_q' (X' V^-1 X)^-1 x_q`` (x_q = sqrt(n_q) times X's
        query means), both summed per query size through the between triangles."""
        g, r, r_inv, beta = self._gls(theta)
        p = self.p
        resid = np.r_[-beta, 1.0]
        w = self.sizes * g**2
        d_rss = -w @ np.sum((self.between @ resid) ** 2, axis=1)
        d_logdet = -w @ np.sum((self.between[:, :, :p] @ r_inv) ** 2, axis=(1, 2))
        return float((self.n - p) * d_rss / r[p, p] ** 2 + self.n_queries @ (self.sizes * g) + d_logdet)

    def maximise(self) -> tuple[float, bool]:
        """(theta maximising the REML likelihood, whether the search converged).

        The criterion on :data:`REML_THETA_GRID` (0 included, the grid extended upwards while its
        last point is the lowest) picks the basin; the exact slope's sign change next to the best
        point is then found by Brent's root finder, to machine precision in theta (a minimiser of the
        criterion itself stops at sqrt(machine epsilon), as the criterion is flat at its minimum).
        Where the slope does not change sign there, Brent's bounded minimiser on log(1 + theta)
        takes over. REML can sit on the boundary: theta = 0 when the best point is 0 and the
        criterion rises from it."""
        from scipy.optimize import brentq, minimize_scalar

        grid = list(REML_THETA_GRID)
        crit = [self.criterion(t) for t in grid]
        while int(np.argmin(crit)) == len(grid) - 1 and grid[-1] < REML_THETA_MAX:
            grid.append(grid[-1] * 10.0)
            crit.append(self.criterion(grid[-1]))
        i = int(np.argmin(crit))
        if i == len(grid) - 1:
            return grid[-1], False
        at = self.slope(grid[i])
        if i == 0 and at >= 0:
            return 0.0, True
        lo, hi = (grid[i - 1], grid[i]) if at > 0 else (grid[i], grid[i + 1])
        if self.slope(lo) < 0 < self.slope(hi):
            theta, info = brentq(self.slope, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, full_output=True)
            ok = bool(info.converged)
        else:
            res = minimize_scalar(lambda t: self.criterion(math.expm1(t)), method="bounded",
                                  bounds=(math.log1p(grid[max(i - 1, 0)]), math.log1p(grid[i + 1])),
                                  options={"xatol": 1e-10})
            theta, ok = math.expm1(res.x), bool(res.success)
        if self.criterion(0.0) <= self.criterion(theta):
            return 0.0, True
        return float(theta), ok

    def estimates(self, theta: float) -> tuple[np.ndarray, np.ndarray, float]:
        """(beta, Cov(beta) = s2 (X' V^-1 X)^-1, s2) at ``theta``, s2 = rss / (n - p)."""
        _, r, r_inv, beta = self._gls(theta)
        beta[0] += self.shift
        scale = float(r[self.p, self.p] ** 2 / (self.n - self.p))
        return beta, scale * (r_inv @ r_inv.T), scale


def sign_flip_p_values(d: np.ndarray, n_permutations: int = 10_000, seed: int = 0) -> tuple[np.ndarray, bool]:
    """Two-sided p-values of the paired sign-flip permutation test of mean = 0 for each column of
    ``d`` (queries x pairs), and whether they are exact: all 2^n sign vectors for n <=
    :data:`EXACT_PERMUTATION_MAX_N`, else ``(hits + 1) / (B + 1)`` over ``B`` random sign vectors
    drawn from ``seed`` — the same vectors for every column, so a column's p-value does not depend
    on which other pairs are tested, and all columns cost one matrix product."""
    return sign_flip_p_values_many([d], n_permutations, seed)[0]


def sign_flip_p_values_many(ds: list[np.ndarray], n_permutations: int = 10_000,
                            seed: int = 0) -> list[tuple[np.ndarray, bool]]:
    """:func:`sign_flip_p_values` of each matrix (or vector) of ``ds``. The matrices with the same
    number of rows share one draw of the random signs and its conversion to float64, chunk by
    chunk; each matrix still gets its own product with each chunk — the very product a call on
    it alone makes — so every p-value has the bits of that call. The p-values of the last
    matrices tested are kept (:data:`_P_CACHE`): a table recomputed at another significance level
    tests the same differences."""
    mats = []
    for d in ds:
        d = np.asarray(d, np.float64)
        mats.append(d[:, None] if d.ndim == 1 else d)
    keys = [(hashlib.blake2b(np.ascontiguousarray(d).tobytes(), digest_size=16).digest(), d.shape,
             d.flags.c_contiguous, n_permutations, seed) for d in mats]
    out: list[tuple[np.ndarray, bool] | None] = [None] * len(mats)
    with _SIGN_LOCK:
        for i, key in enumerate(keys):
            if key in _P_CACHE:
                _P_CACHE.move_to_end(key)
                out[i] = _P_CACHE[key]
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(mats):
        if out[i] is None:
            by_n.setdefault(d.shape[0], []).append(i)
    for n, idx in by_n.items():
        for i, res in zip(idx, _sign_flip([mats[i] for i in idx], n, n_permutations, seed), strict=True):
            out[i] = res
            with _SIGN_LOCK:
                _P_CACHE[keys[i]] = res
                while len(_P_CACHE) > _P_CACHE_ENTRIES:
                    _P_CACHE.popitem(last=False)
    return [(p.copy(), exact) for p, exact in out]


def _sign_flip(mats: list[np.ndarray], n: int, n_permutations: int, seed: int) -> list[tuple[np.ndarray, bool]]:
    """The p-values of :func:`sign_flip_p_values` for float64 matrices of ``n`` rows, computed."""
    n_permutations = check_int(n_permutations, "n_permutations", 1)
    obs = [np.abs(d.sum(axis=0)) for d in mats]
    # sums equal up to rounding count as reaching obs
    reach = [o - 1e-12 * np.maximum(1.0, np.abs(d).sum(axis=0)) for d, o in zip(mats, obs, strict=True)]
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
        return [(np.mean(np.abs(signs @ d) >= r, axis=0), True) for d, r in zip(mats, reach, strict=True)]
    hits = [np.zeros(d.shape[1], np.int64) for d in mats]
    buffer = None  # one float64 buffer for every chunk: a fresh 32 MB array each time costs its page faults
    for chunk in _random_signs(n, n_permutations, seed):
        if buffer is None or buffer.shape[0] < chunk.shape[0]:
            buffer = np.empty(chunk.shape)
        signs = buffer[: chunk.shape[0]]
        signs[...] = chunk
        for d, r, h in zip(mats, reach, hits, strict=True):
            h += np.sum(np.abs(signs @ d) >= r, axis=0)
    return [((h + 1) / (n_permutations + 1), False) for h in hits]


# drawn signs per (n, B, seed): (chunks, bytes held, whether the chunks are packed bits)
_SIGN_CACHE: dict[tuple[int, int, int], tuple[list, int, bool]] = {}
_SIGN_CACHE_BYTES = 128 << 20  # a report tests the same queries (same n) dozens of times
_SIGN_LOCK = threading.Lock()
# p-values of the last matrices of differences tested (digest of their bytes, shape, B, seed): a
# table recomputed with another significance level, or the same selection asked for again, tests
# the same differences; the same input gives the stored output, so every bit is unchanged
_P_CACHE: OrderedDict[tuple, tuple[np.ndarray, bool]] = OrderedDict()
_P_CACHE_ENTRIES = 512


def _random_signs(n: int, n_permutations: int, seed: int) -> Iterator[np.ndarray]:
    """The random signs (-1/+1, int8) of :func:`sign_flip_p_values`, in chunks of about 4
    million: bits drawn from ``default_rng(seed)`` (the same draws on every call) mapped 0 -> -1,
    1 -> +1, kept for the last few (n, B, seed) that fit in :data:`_SIGN_CACHE_BYTES` so that
    repeated tests skip the draw. Kept as signs rather than bits while they fit in half the
    budget: a test then converts them to float64 in one pass (a third of the time of converting
    bits and mapping them); larger draws (tens of thousands of queries) are kept packed eight to
    a byte, unpacked chunk by chunk, which still costs a fifth of drawing them again."""
    key = (n, n_permutations, seed)
    with _SIGN_LOCK:
        stored = _SIGN_CACHE.get(key)
    if stored is not None:
        chunks, _, packed = stored
        for c in chunks:
            yield _unpack_signs(c[1], c[0], n) if packed else c
        return
    packed = n * n_permutations > _SIGN_CACHE_BYTES // 2
    size = -(-n * n_permutations // 8) if packed else n * n_permutations
    keep = size <= _SIGN_CACHE_BYTES // 2
    chunk = max(1, 4_000_000 // n)
    out = []
    for bits in _bits(seed, [(min(chunk, n_permutations - done), n) for done in range(0, n_permutations, chunk)]):
        if keep and packed:
            out.append((bits.shape[0], np.packbits(bits)))
        bits *= 2
        bits -= 1
        if keep and not packed:
            out.append(bits)
        yield bits
    if keep:
        with _SIGN_LOCK:
            while _SIGN_CACHE and sum(v[1] for v in _SIGN_CACHE.values()) + size > _SIGN_CACHE_BYTES:
                del _SIGN_CACHE[next(iter(_SIGN_CACHE))]  # the oldest first
            _SIGN_CACHE[key] = out, size, packed


def _bits(seed: int, shapes: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    """``rng.integers(0, 2, shape, dtype=np.int8)`` for each shape in turn, ``rng =
    default_rng(seed)``: read off the generator's raw output when that gives the same bits
    (checked once per process), in a third of the time. numpy draws each int8 in [0, 2) by
    Lemire's method from one byte of a 32-bit output — four bytes an output, the low byte first,
    a fresh output at each call — so the value is the byte's top bit; PCG64 serves a 64-bit
    output as two 32-bit ones, the low half first, the high half kept for the next call."""
    if not _raw_bits_match():
        rng = np.random.default_rng(seed)
        for shape in shapes:
            yield rng.integers(0, 2, shape, dtype=np.int8)
        return
    yield from _raw_bits(np.random.default_rng(seed).bit_generator, shapes)


def _raw_bits(bit_generator, shapes: list[tuple[int, int]]) -> Iterator[np.ndarray]:
    carry = None  # the high half of the last 64-bit output, not used yet
    for m, n in shapes:
        words = -(-m * n // 4)  # 32-bit outputs this call uses
        parts = []
        if carry is not None and words:
            parts.append(carry)
            words -= 1
            carry = None
        if words:
            raw = bit_generator.random_raw(-(-words // 2)).view(np.uint32)  # little-endian: low half first
            if words % 2:
                raw, carry = raw[:-1], raw[-1:]
            parts.append(raw)
        data = np.concatenate(parts).view(np.uint8)[: m * n] if parts else np.empty(0, np.uint8)
        yield (data >> 7).view(np.int8).reshape(m, n)


@functools.cache
def _raw_bits_match() -> bool:
    """Whether :func:`_raw_bits` gives numpy's bits here (shapes that leave a half output over)."""
    shapes = [(3, 37), (1, 5), (5, 37), (1, 1), (2, 3), (866, 13)]
    rng = np.random.default_rng(7)
    return all(a.tobytes() == rng.integers(0, 2, shape, dtype=np.int8).tobytes()
               for a, shape in zip(_raw_bits(np.random.default_rng(7).bit_generator, shapes), shapes, strict=True))


def _unpack_signs(packed: np.ndarray, m: int, n: int) -> np.ndarray:
    """A chunk of ``m`` rows of ``n`` signs (int8) from its packed bits."""
    signs = np.unpackbits(packed, count=m * n).reshape(m, n).view(np.int8)
    signs *= 2
    signs -= 1
    return signs


def sign_flip_p_value(d: np.ndarray, n_permutations: int = 10_000, seed: int = 0) -> tuple[float, bool]:
    """:func:`sign_flip_p_values` of one vector of differences."""
    p, exact = sign_flip_p_values(d, n_permutations, seed)
    return float(p[0]), exact


def holm(p: pd.Series) -> pd.Series:
    """Holm-adjusted p-values over the defined (non-NaN) ones: the i-th smallest of m times
    ``m - i + 1``, made monotone by a running maximum, capped at 1. The same arithmetic as
    statsmodels' ``multipletests(method="holm")``, whose every call also runs a full
    ``gc.collect()`` (0.1-0.5 s each in a process holding many objects; a report makes hundreds)."""
    out = pd.Series(np.nan, index=p.index)
    ok = p.notna()
    if ok.any():
        out[ok] = holm_adjust(p[ok].to_numpy(np.float64))
    return out


def holm_adjust(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted ``p`` (no NaN), in the order given."""
    p = np.asarray(p, np.float64)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out


PAIRED_COLUMNS = ["method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "p_permutation", "p_wilcoxon",
                  "wins", "ties", "losses", "note"]


def _pair_effects(diffs: list[np.ndarray], alpha: float) -> list[tuple[float, float, float, str]]:
    """(mean, t interval low, high, note) of each vector of differences: scipy's one-sample t on
    the differences, one call for all vectors of the same length (scipy's per-call overhead was
    most of a report's paired tests). Rows of a C-ordered matrix, reduced along the row, are
    summed as each vector on its own, so every interval has the same bits as a call per vector
    (tested)."""
    from scipy import stats

    out: list[tuple[float, float, float, str]] = []
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        n = d.size
        mean = float(d.mean()) if n else math.nan
        if n < 2:
            out.append((mean, math.nan, math.nan, f"interval undefined: {n} paired query(ies)"))
        elif np.ptp(d) == 0.0:
            out.append((mean, mean, mean, "every difference is the same: zero-width interval"))
        else:
            out.append((mean, math.nan, math.nan, ""))
            by_n.setdefault(n, []).append(i)
    for idx in by_n.values():
        ci = stats.ttest_1samp(np.stack([diffs[i] for i in idx]), 0.0, axis=1).confidence_interval(1 - alpha)
        for i, lo, hi in zip(idx, np.atleast_1d(ci.low).tolist(), np.atleast_1d(ci.high).tolist(), strict=True):
            out[i] = (out[i][0], lo, hi, "")
    return out


def _pairs(df: pd.DataFrame, value: str):
    """(method a, method b, a's values, b's values) over the queries both answer (in query order),
    methods in sorted order; a (method, query) given twice counts with its first defined value
    (as ``pivot_table(aggfunc="first")``), a method without any defined value is left out."""
    v = clean_values(df, value)[value].to_numpy(np.float64)
    q, _ = pd.factorize(df["query"], sort=True)
    m, names = pd.factorize(df["method"], sort=True)
    ok = ~np.isnan(v) & (q >= 0) & (m >= 0)
    wide = np.full((q.max() + 1 if q.size else 0, len(names)), np.nan)
    cell = q[ok] * len(names) + m[ok]
    _, first = np.unique(cell, return_index=True)  # the first row of each (query, method)
    wide.flat[cell[first]] = v[ok][first]
    defined = ~np.isnan(wide)
    cols = sorted((str(names[j]), j) for j in range(len(names)) if defined[:, j].any())
    for (a, i), (b, j) in itertools.combinations(cols, 2):
        both = defined[:, i] & defined[:, j]
        yield a, b, wide[both, i], wide[both, j]


def paired_tests(df: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10_000, seed: int = 0,
                 value: str = "ap") -> pd.DataFrame:
    """Every pair of methods over the queries both answer: mean difference (a - b) with a t
    interval, paired sign-flip permutation test, Wilcoxon signed-rank test, both Holm-corrected
    across pairs, win / tie / loss counts, and ``note`` where something is undefined."""
    check_alpha(alpha)
    out, diffs = _paired_rows(df, alpha, value)
    out["p_permutation"] = _sign_flip_columns(diffs, n_permutations, seed)
    return _holm_columns(out, alpha)


def _paired_rows(df: pd.DataFrame, alpha: float, value: str) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """:func:`paired_tests` up to its permutation p-values (NaN) and Holm columns, and each
    pair's differences: the permutation tests of several tables can then share one product."""
    pairs = [(a, b, merge_differences(va, vb)) for a, b, va, vb in _pairs(df, value)]
    diffs = [d for _, _, d in pairs]
    rows = []
    for (a, b, d), (mean, lo, hi, note), p_w in zip(pairs, _pair_effects(diffs, alpha), _wilcoxon_p_values(diffs),
                                                     strict=True):
        n = d.size
        notes = [note] if note else []
        p_perm = math.nan  # filled by the caller, all pairs with the same queries in one product
        if not n:
            notes.append("no query answered by both")
        elif not d.any():
            notes.append("Wilcoxon undefined: every difference is zero")
        rows.append(dict(method_a=a, method_b=b, n=n, mean_diff=mean, ci_low=lo, ci_high=hi, p_permutation=p_perm,
                         p_wilcoxon=p_w, wins=int((d > 0).sum()), ties=int((d == 0).sum()),
                         losses=int((d < 0).sum()), note="; ".join(notes)))
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS), diffs


def _wilcoxon_p_values(diffs: list[np.ndarray]) -> list[float]:
    """Wilcoxon signed-rank p-value of each vector of differences, zeros dropped (NaN when every
    difference is zero): the exact null distribution for at most 50 non-zero differences without
    ties, else the normal approximation with the tie-corrected variance (scipy's default would run
    a permutation test for tied small samples). The approximate ones of vectors of one length
    are one scipy call over their rows, zeros included: scipy drops them per row (``wilcox``);
    ranks and their sums are integers or halves, exact in any order, so each p-value has the
    bits of a call on that vector's non-zero differences alone (tested)."""
    from scipy import stats

    out = [math.nan] * len(diffs)
    by_n: dict[int, list[int]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, d in enumerate(diffs):
            nz = d[d != 0]
            if not nz.size:
                continue
            if nz.size <= 50 and np.unique(np.abs(nz)).size == nz.size:
                out[i] = float(stats.wilcoxon(nz, correction=False, method="exact").pvalue)
            else:
                by_n.setdefault(d.size, []).append(i)
        for idx in by_n.values():
            p = stats.wilcoxon(np.stack([diffs[i] for i in idx]), correction=False, method="asymptotic",
                               axis=1).pvalue
            for i, v in zip(idx, np.atleast_1d(p).tolist(), strict=True):
                out[i] = v
    return out


def _sign_flip_columns(diffs: list[np.ndarray], n_permutations: int, seed: int) -> np.ndarray:
    """Sign-flip p-value of each vector of differences (NaN for an empty one); the vectors of
    one length in one product (:func:`sign_flip_p_values`)."""
    out = np.full(len(diffs), np.nan)
    columns = _columns_by_length(diffs)
    for (idx, _), (p, _) in zip(columns, sign_flip_p_values_many([m for _, m in columns], n_permutations, seed),
                                strict=True):
        out[idx] = p
    return out


def _columns_by_length(diffs: list[np.ndarray]) -> list[tuple[list[int], np.ndarray]]:
    """The non-empty vectors of ``diffs`` of each length as the columns of one matrix, with their
    indices in ``diffs``."""
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        if d.size:
            by_n.setdefault(d.size, []).append(i)
    return [(idx, np.column_stack([diffs[i] for i in idx])) for idx in by_n.values()]


def _holm_columns(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The Holm-adjusted columns and ``reject`` of a :func:`paired_tests` table (in place)."""
    out["p_permutation_holm"] = holm(out["p_permutation"])
    out["p_wilcoxon_holm"] = holm(out["p_wilcoxon"])
    out["reject"] = (out["p_permutation_holm"] < alpha).fillna(False).astype(bool)
    return out


def mcnemar_tests(df: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10_000, seed: int = 0,
                  value: str = "value") -> pd.DataFrame:
    """Every pair of methods on a hit-rate metric (P@1, Recall@K) over the queries both answer:
    the exact McNemar test (statsmodels' ``mcnemar(exact=True)``: a binomial test on the
    discordant counts ``discordant_a`` = hits of a only, ``discordant_b`` = hits of b only), Holm
    across pairs, and the difference of hit rates with its t interval. Where ties at the cutoff
    make some per-query hits fractional (expected hits), the sign-flip permutation test on the
    differences is used instead (for 0/1 hits it is the same conditional test) and ``note`` says so."""
    check_alpha(alpha)
    out, fractional = _mcnemar_rows(df, alpha, value)
    p = sign_flip_p_values_many([d for _, d in fractional], n_permutations, seed)
    for (i, _), (v, _) in zip(fractional, p, strict=True):
        out.loc[i, "p_value"] = float(v[0])
    return _mcnemar_holm(out, alpha)


def _mcnemar_rows(df: pd.DataFrame, alpha: float, value: str) -> tuple[pd.DataFrame, list[tuple[int, np.ndarray]]]:
    """:func:`mcnemar_tests` up to the p-values of the sign-flip tests (NaN) and the Holm columns,
    with (row, differences) of those tests: the permutation tests of several tables can then
    share one draw of signs."""
    pairs = [(a, b, va, vb, merge_differences(va, vb)) for a, b, va, vb in _pairs(df, value)]
    rows, exact, fractional = [], [], []
    for (a, b, va, vb, d), (mean, lo, hi, note) in zip(pairs, _pair_effects([p[4] for p in pairs], alpha),
                                                        strict=True):
        notes = [note] if note else []
        binary = bool(np.isin(va, (0.0, 1.0)).all() and np.isin(vb, (0.0, 1.0)).all())
        only_a, only_b = int(((va == 1) & (vb == 0)).sum()), int(((va == 0) & (vb == 1)).sum())
        if d.size == 0:
            test, p = "", math.nan
            notes.append("no query answered by both")
        elif binary:
            test, p = "McNemar exact", math.nan  # filled below, every pair in one call
            exact.append(len(rows))
        else:
            test, p = "sign-flip permutation", math.nan  # filled by the caller
            fractional.append((len(rows), d))
            notes.append("fractional hits (ties at the cutoff): sign-flip permutation test on expected hits")
        rows.append(dict(method_a=a, method_b=b, n=int(d.size), mean_diff=mean, ci_low=lo, ci_high=hi, test=test,
                         p_value=p, discordant_a=only_a, discordant_b=only_b, wins=int((d > 0).sum()),
                         ties=int((d == 0).sum()), losses=int((d < 0).sum()), note="; ".join(notes)))
    if exact:
        p = mcnemar_exact_p([rows[i]["discordant_a"] for i in exact], [rows[i]["discordant_b"] for i in exact])
        for i, v in zip(exact, p.tolist(), strict=True):
            rows[i]["p_value"] = v
    out = pd.DataFrame(rows, columns=["method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "test",
                                      "p_value", "discordant_a", "discordant_b", "wins", "ties", "losses", "note"])
    return out, fractional


def _mcnemar_holm(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The Holm column and ``reject`` of a :func:`mcnemar_tests` table (in place)."""
    out["p_holm"] = holm(out["p_value"])
    out["reject"] = (out["p_holm"] < alpha).fillna(False).astype(bool)
    return out


def mcnemar_exact_p(discordant_a, discordant_b) -> np.ndarray:
    """Exact McNemar p-values of discordant counts: statsmodels' ``mcnemar(table, exact=True)``
    arithmetic, ``min(1, 2 binom.cdf(min(b, c), b + c, 1/2))``, for every pair in one call
    (statsmodels builds a table per pair: most of a report's McNemar time; same bits, tested)."""
    from scipy import stats

    b = np.asarray(discordant_a, np.float64)
    c = np.asarray(discordant_b, np.float64)
    return np.minimum(stats.binom.cdf(np.minimum(b, c), (b + c).astype(np.int64), 0.5) * 2, 1)


def metric_paired_tests(metrics: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10_000,
                        seed: int = 0) -> pd.DataFrame:
    """A test for every reported metric between every pair of methods, on the same queries.

    ``metrics``: the long table of :func:`~.variability.metric_frame` (method, query, label,
    metric, value). Means of graded values (AP, MAP@R, R-Precision, RR) get the paired sign-flip
    permutation test (and Wilcoxon); hit rates (P@1, Recall@K) the exact McNemar test on the
    discordant counts; Holm within each metric (``p_holm``); the effect — mean difference a - b
    with its ``1 - alpha`` t interval — beside every p-value. One row per (metric, pair)."""
    check_alpha(alpha)
    from ..metrics.registry import summary_metrics

    kinds = {m.name: m.kind for m in summary_metrics(tuple(range(1, 1025)))}
    parts: dict[str, pd.DataFrame] = {}
    graded: dict[str, list[np.ndarray]] = {}  # the sign-flip tests of every metric in one product
    fractional: dict[str, list[tuple[int, np.ndarray]]] = {}  # hit rates with fractional hits
    for name in metrics["metric"].unique():
        sub = metrics[metrics["metric"] == name]
        if kinds.get(name) == "hit":
            parts[name], fractional[name] = _mcnemar_rows(sub, alpha, "value")
        else:
            parts[name], graded[name] = _paired_rows(sub, alpha, "value")
    # one draw of signs for the graded product and each fractional-hit test (each its own product)
    graded_columns = _columns_by_length([d for diffs in graded.values() for d in diffs])
    tested = sign_flip_p_values_many([m for _, m in graded_columns] + [d for f in fractional.values() for _, d in f],
                                     n_permutations, seed)
    rest = iter(tested[len(graded_columns):])
    for name, f in fractional.items():
        t = parts[name]
        for (i, _), (v, _) in zip(f, rest, strict=False):
            t.loc[i, "p_value"] = float(v[0])
        parts[name] = _mcnemar_holm(t, alpha)
    if graded:
        p = np.full(sum(len(diffs) for diffs in graded.values()), np.nan)
        for (idx, _), (v, _) in zip(graded_columns, tested, strict=False):
            p[idx] = v
        start = 0
        for name, diffs in graded.items():
            t = parts[name]
            t["p_permutation"] = p[start:start + len(diffs)]
            start += len(diffs)
            t = _holm_columns(t, alpha)
            parts[name] = t.assign(test="sign-flip permutation", p_value=t["p_permutation"],
                                   p_holm=t["p_permutation_holm"])
    out = pd.concat([t.assign(metric=name) for name, t in parts.items()], ignore_index=True) if parts \
        else pd.DataFrame()
    first = ["metric", "method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "test", "p_value", "p_holm",
             "reject"]
    return out[first + [c for c in out.columns if c not in first]] if len(out) else out


def merge_differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Paired differences a - b, with differences within rounding of zero set to exactly zero and
    differences within rounding of each other made equal (values were merged already; their
    differences may still carry it: 0.2 - 0.7 and 0.3 - 0.8 differ in the 16th digit, which made a
    t interval of width 1e-15 and scipy's precision-loss warning)."""
    d = merge_rounding_noise(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    d[np.abs(d) <= VALUE_TOLERANCE] = 0.0
    return d
