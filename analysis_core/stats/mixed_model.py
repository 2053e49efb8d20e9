"""The mixed model ``value ~ method + (1 | query)``: methods as fixed effects, a random intercept
per query (the paired design in one model), fitted by exact REML (lme4's ``lmer`` fit and standard
errors). Its tests are t tests with the between-within degrees of freedom (a method term:
observations - queries - (methods - 1), which is (Q - 1)(M - 1) when every method answers every
query, and the paired t test's Q - 1 for two methods; the intercept: queries - 1), not Wald z
tests: with few queries z claimed significance on noise (30 % of null runs at α = 0.05 with 2
queries). Undefined fits say why (NaN with the reason in ``note`` and in ``warnings``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .two_way_anova import components
from .variability import VALUE_TOLERANCE, clean_values


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
        assert coef is not None and se is not None and df is not None  # a fit (no why) has them
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
        within_df = len(d) - n_queries - len(methods) + components(qcode, mcode)
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
    r: np.ndarray = np.linalg.qr(a, mode="r")  # type: ignore[assignment]  # numpy's stubs: mode "r" gives R alone
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

