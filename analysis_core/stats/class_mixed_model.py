"""The class-level mixed model

    value ~ method + (1 | class) + (1 | class:method) + (1 | class:query)

for comparing methods when queries come in classes (the query's label) and several methods answer
the same queries (SPEC §4, "Unit of inference": the class is the unit). Methods are fixed effects,
treatment-coded with the first method in sorted order as the reference (``Intercept`` is its mean,
``method[m]`` the difference of method m from it), as in :mod:`.mixed_model`. Random effects: a
class intercept, a class x method interaction — the term that makes the method effect generalise
over classes: a method difference is judged against how much it varies from class to class —, and
a query-within-class intercept (the pairing of methods on a query); the residual is the method x
query interaction. All are independent normal, with variances ``class_variance``,
``class_method_variance``, ``query_variance`` and ``residual_variance``.

The fit is REML as lme4's ``lmer`` (relative standard deviations theta >= 0, a component may be
estimated at the boundary 0: a singular fit, said in a warning), ``Cov(beta) = s2 (X' V^-1 X)^-1``
as lme4's ``vcov``, and t tests with Satterthwaite's degrees of freedom as lmerTest's ``summary``:
for a coefficient b, ``df = 2 Var(b)^2 / (g' A g)`` with g the gradient of Var(b) in the variance
parameters ``(theta, sigma)`` and ``A = 2 H^-1`` their covariance from the Hessian H of the REML
deviance (a Moore-Penrose inverse over eigenvalues above 1e-8, as lmerTest). Where lmerTest takes
numerical derivatives of lme4's deviance (numDeriv, Richardson extrapolation), the gradients here
are exact (complex-step differentiation of a deviance that is analytic in the parameters) and the
Hessian is the Richardson-extrapolated central difference of the exact gradient.

References: D. Bates, M. Mächler, B. Bolker and S. Walker, "Fitting Linear Mixed-Effects Models
Using lme4", Journal of Statistical Software 67(1), 2015, doi:10.18637/jss.v067.i01; A.
Kuznetsova, P. B. Brockhoff and R. H. B. Christensen, "lmerTest Package: Tests in Linear Mixed
Effects Models", Journal of Statistical Software 82(13), 2017, doi:10.18637/jss.v082.i13.

Computation: V is block-diagonal by class, and never formed. Within a class, the query intercept
makes each query's block ``I + g 11'`` (g = query variance / residual variance), inverted in
closed form (Sherman-Morrison); the class and class x method effects live in the span of the
method indicators E, so ``V / s2 = W + E Psi E'`` with ``Psi = g_class 11' + g_class_method I``
(methods x methods) is inverted by Woodbury in the methods' dimension. Everything the REML
criterion needs is then a function of per-class (methods + 1)-square cross-products of ``[E, y]``,
computed once: an evaluation costs O(classes x methods^3), whatever the number of queries.

Conventions for degenerate data (the function never raises): undefined results are NaN with the
reason in ``note`` and in ``warnings`` — fewer than two methods, fewer than two classes (no
variation between classes to generalise over), no variation, or method effects plus the random
effects fitting every value exactly (zero residual variance). A random term that the design cannot
tell apart from another (every class one query: the query intercept is the class intercept and
the class x method term the residual) is left out, with a warning. Values still non-finite after
:func:`~.variability.clean_values` are left out."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .variability import clean_values

COMPONENTS = ("class", "class:method", "class:query")  # the random terms, in the order of ``gamma``
#: eigenvalues of the deviance's Hessian at or below this are taken as zero (lmerTest's ``tol``)
HESSIAN_TOL = 1e-8
#: within-group residual sum of squares below this fraction of the within-group sum of squares is
#: taken as exactly zero: the cross-product arithmetic leaves ~1e-16 of it on exact fits
ZERO_RESIDUAL = 1e-10
GAMMA_MAX = 1e12  # variance ratios beyond this: the search has run off (reported as not converged)
_ROWS = 1 << 16  # rows per block when folding cross-products (bounds the memory of the outer products)
_STEP = 1e-20  # the complex step (exact derivatives: no subtraction, so any tiny step will do)


@dataclass(frozen=True)
class ClassMixedModelResult:
    """``value ~ method + (1 | class) + (1 | class:method) + (1 | class:query)``, REML.
    ``table``: term, coef, std_err, t, df (Satterthwaite), p_value, ci_low, ci_high, note, unit
    ("class") and n_units (the classes)."""

    table: pd.DataFrame
    class_variance: float
    class_method_variance: float
    query_variance: float  # the class:query intercept's
    residual_variance: float
    converged: bool
    warnings: list[str] = field(default_factory=list)
    n_obs: int = 0  # (method, query) values the model was fitted on
    n_units: int = 0  # classes
    unit: str = "class"

    def summary_frame(self) -> pd.DataFrame:
        return self.table


def class_mixed_model(df: pd.DataFrame, alpha: float = 0.05, value: str = "ap") -> ClassMixedModelResult:
    """Methods compared with the class as the unit: ``value ~ method + (1 | class) + (1 |
    class:method) + (1 | class:query)`` by REML, t tests and ``1 - alpha`` t intervals with
    Satterthwaite degrees of freedom (lme4 + lmerTest's numbers; see the module's docstring).

    ``df``: one row per (method, query) with columns ``method``, ``query``, ``label`` (the class)
    and ``value`` — the long table :func:`~.mixed_model.mixed_model` takes. Queries are identified
    within their class (``label``, ``query``)."""
    return class_mixed_fit(df, value).result(alpha)


@dataclass(frozen=True)
class ClassMixedFit:
    """The REML fit of :func:`class_mixed_model`, before the significance level enters: ``why``
    says why the model is undefined (empty when it is fitted); ``variances``: class, class x method,
    class:query, residual."""

    terms: list[str]
    why: str
    coef: np.ndarray | None = None
    se: np.ndarray | None = None
    df: np.ndarray | None = None  # Satterthwaite's, per term
    notes: list[str] | None = None  # per term, when its df is undefined
    variances: tuple[float, float, float, float] = (math.nan,) * 4
    converged: bool = False
    warnings: list[str] = field(default_factory=list)
    n_obs: int = 0
    n_units: int = 0

    def result(self, alpha: float) -> ClassMixedModelResult:
        """The model's table with ``1 - alpha`` t intervals."""
        from scipy import stats

        if self.why:
            t = pd.DataFrame({"term": self.terms, "coef": np.nan, "std_err": np.nan, "t": np.nan, "df": np.nan,
                              "p_value": np.nan, "ci_low": np.nan, "ci_high": np.nan, "note": self.why,
                              "unit": "class", "n_units": self.n_units})
            return ClassMixedModelResult(t, *self.variances, False, list(self.warnings), self.n_obs, self.n_units)
        coef, se, df = self.coef, self.se, self.df
        assert coef is not None and se is not None and df is not None  # a fit (no why) has them
        with np.errstate(invalid="ignore", divide="ignore"):
            t = coef / se
            half = stats.t.ppf(1 - alpha / 2, df) * se
            p = 2 * stats.t.sf(np.abs(t), df)
        table = pd.DataFrame({"term": self.terms, "coef": coef, "std_err": se, "t": t, "df": df, "p_value": p,
                              "ci_low": coef - half, "ci_high": coef + half, "note": self.notes,
                              "unit": "class", "n_units": self.n_units})
        return ClassMixedModelResult(table, *self.variances, self.converged, list(self.warnings), self.n_obs,
                                     self.n_units)


def class_mixed_fit(df: pd.DataFrame, value: str = "ap") -> ClassMixedFit:
    """The fit of :func:`class_mixed_model` (every warning included): what a change of the
    significance level leaves unchanged."""
    d = clean_values(df, value)
    d = d.assign(meth=d["method"].astype(str), cls=d["label"].astype(str), qid=d["query"].astype(str))
    d = d[np.isfinite(d[value].to_numpy(np.float64))]
    methods = sorted(d["meth"].unique())
    terms = ["Intercept"] + [f"method[{m}]" for m in methods[1:]]
    ccode, classes = pd.factorize(d["cls"])
    n_classes = len(classes)

    def undefined(why: str, extra: list[str] | None = None) -> ClassMixedFit:
        return ClassMixedFit(terms, why, warnings=(extra or []) + [f"class mixed model {why}"], n_obs=len(d),
                             n_units=n_classes)

    if len(methods) < 2:
        return undefined("undefined: the class mixed model compares methods; give at least two.")
    if n_classes < 2:
        return undefined(f"undefined: {n_classes} class(es); the class mixed model generalises over classes and "
                         "needs at least two (the query-level mixed model needs one).")
    y = d[value].to_numpy(np.float64)
    if np.ptp(y) == 0.0:
        return undefined("undefined: every value is the same; there is no variation to test.")
    mcode = pd.Categorical(d["meth"], categories=methods).codes.astype(np.int64)
    qcode = pd.factorize(pd.MultiIndex.from_arrays([d["cls"], d["qid"]]))[0]
    spread = np.full(int(qcode.max()) + 1, -np.inf)
    np.maximum.at(spread, qcode, y)
    low = np.full(spread.size, np.inf)
    np.minimum.at(low, qcode, y)
    if float((spread - low).max()) == 0.0:  # the query-level model says the same
        return undefined("undefined: the methods agree on every query (zero residual variance); no difference to "
                         "test.")
    warn: list[str] = []
    active = _identifiable(ccode, mcode, qcode, len(methods))
    for k, name in enumerate(COMPONENTS):
        if not active[k]:
            warn.append(f"class mixed model: the ({name}) variance cannot be told apart from another term in this "
                        "design (e.g. every class has one query); it is left out (fixed at 0).")
    if _absorbed_rss(y, ccode, qcode, mcode, len(methods), n_classes, active):
        return undefined("undefined: the method effects and the random effects fit every value exactly (zero "
                         "residual variance); nothing is left to test them against.", warn)
    model = _ClassREML(y, ccode, qcode, mcode, len(methods), n_classes)
    try:
        gamma, converged = model.maximise(active)
        coef, cov, s2 = model.estimates(gamma)
        se = np.sqrt(np.diag(cov))
        if not (np.isfinite(coef).all() and np.isfinite(se).all() and s2 > 0):
            raise ValueError("non-finite estimates")
        df_, hessian_note = model.satterthwaite(gamma, active)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
        return undefined(f"undefined: the REML fit failed ({exc}).", warn)
    notes = ["" if np.isfinite(v) and v > 0 else "undefined: no Satterthwaite degrees of freedom (the variance of "
             "this coefficient does not depend on estimated variance parameters)." for v in df_]
    df_ = np.where(np.isfinite(df_) & (df_ > 0), df_, np.nan)
    if hessian_note:
        warn.append(f"class mixed model: {hessian_note}")
    for k, name in enumerate(COMPONENTS):
        if active[k] and gamma[k] == 0.0:
            warn.append(f"class mixed model: ({name}) variance estimated at 0 (boundary, a singular fit as lme4 "
                        "reports it); the other estimates are those of the model without it.")
    if not converged:
        warn.append("the class mixed model did not converge: read its numbers with care.")
    variances = (float(gamma[0] * s2), float(gamma[1] * s2), float(gamma[2] * s2), float(s2))
    return ClassMixedFit(terms, "", coef, se, df_, notes, variances, converged, warn, len(d), n_classes)


def _identifiable(cls: np.ndarray, meth: np.ndarray, query: np.ndarray, n_methods: int) -> np.ndarray:
    """Which of :data:`COMPONENTS` the design can tell apart: each term's covariance pattern (the
    indicator matrix ``Z Z'`` of its grouping; the residual's is I) must be linearly independent of
    the residual's and the terms' kept before it (order: class, class:method, class:query). The
    trace inner products ``tr(Z_a Z_a' Z_b Z_b')`` are sums of squared cell counts of the
    intersected groupings, so no n x n matrix is formed."""
    def ss(*codes: np.ndarray) -> float:
        key = np.zeros(cls.size, np.int64)
        for c in codes:
            key = key * (int(c.max()) + 1) + c
        return float(np.sum(np.unique(key, return_counts=True)[1].astype(np.float64) ** 2))

    cm = cls * n_methods + meth
    obs = float(cls.size)
    s_c, s_cm, s_cq, s_cmq = ss(cls), ss(cm), ss(query), ss(cm, query)
    # rows / columns: residual, class, class:method, class:query (class:query within class, so
    # class x class:query = class:query; class:method x class:query = their cells)
    gram = np.array([[obs, obs, obs, obs], [obs, s_c, s_cm, s_cq], [obs, s_cm, s_cm, s_cmq],
                     [obs, s_cq, s_cmq, s_cq]])
    keep = [0]
    active = np.zeros(3, bool)
    for k in (1, 2, 3):
        sub = gram[np.ix_(keep + [k], keep + [k])]
        scale = np.sqrt(np.diag(sub))
        eig = np.linalg.eigvalsh(sub / np.outer(scale, scale))
        if eig.min() > 1e-9:
            keep.append(k)
            active[k - 1] = True
    return active


def _binsum(index: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """Per-index sums of ``rows`` (n x d): ``out[i] = sum of rows[index == i]``."""
    from scipy.sparse import csr_matrix

    pick = csr_matrix((np.ones(index.size), (index, np.arange(index.size))), shape=(size, index.size))
    return np.asarray(pick @ rows)


def _outer(rows: np.ndarray) -> np.ndarray:
    """Each row's outer product with itself, flattened: n x d^2."""
    return (rows[:, :, None] * rows[:, None, :]).reshape(rows.shape[0], -1)


def _crossproducts(index: np.ndarray, rows: np.ndarray, size: int) -> np.ndarray:
    """Per-index cross-products ``out[i] = rows[index == i]' rows[index == i]`` (size x d x d),
    folded :data:`_ROWS` rows at a time (the outer products of all rows at once would take n d^2)."""
    d = rows.shape[1]
    out = np.zeros((size, d * d))
    for start in range(0, index.size, _ROWS):
        out += _binsum(index[start:start + _ROWS], _outer(rows[start:start + _ROWS]), size)
    return out.reshape(size, d, d)


def _absorbed_rss(y: np.ndarray, cls: np.ndarray, query: np.ndarray, meth: np.ndarray, n_methods: int,
                  n_classes: int, active: np.ndarray) -> bool:
    """Whether y lies in the span of the fixed effects and the active random terms' indicators
    (then REML sends the residual variance to 0 and every test to infinity): the residual of y
    after absorbing the finest active grouping (class:query, else class:method, else class) and
    regressing on the method indicators, within each class when the class x method term is active
    (its indicators are the class's method indicators), pooled otherwise."""
    group = query if active[2] else (cls * n_methods + meth) if active[1] else cls if active[0] else 0 * cls
    block = cls if active[1] else 0 * cls
    n_group, n_block = int(group.max()) + 1, int(block.max()) + 1
    a = np.column_stack([meth[:, None] == np.arange(n_methods), y - y.mean()]).astype(np.float64)
    size = np.bincount(group, minlength=n_group).astype(np.float64)
    a -= _binsum(group, a, n_group)[group] / size[group, None]  # within-group deviations
    gram = _crossproducts(block, a, n_block)
    e, ey, yy = gram[:, :-1, :-1], gram[:, :-1, -1], gram[:, -1, -1]
    fit = np.einsum("bi,bij,bj->b", ey, np.linalg.pinv(e, rcond=1e-10, hermitian=True), ey)
    return bool(np.sum(yy - fit) <= ZERO_RESIDUAL * np.sum(yy))


class _ClassREML:
    """REML for ``y = X beta + Z u + e`` with the random terms of :data:`COMPONENTS`, in lme4's
    relative form: ``V / s2 = I + g_cq Z_q Z_q' + E_c Psi E_c'`` per class (``gamma = (g_class,
    g_class_method, g_class_query)``, variances over the residual variance s2). X = intercept +
    treatment dummies of methods 1..M-1, the same span as the method indicators E, so the GLS fit
    is done in E's coordinates (the method means) and mapped to X's at the end (``|X'V^-1X| =
    |E'V^-1E|``: the map has determinant 1).

    Per class c, with rows ``a = [E, y]`` (y shifted by its mean: fewer digits cancel) and per query
    q of n_q rows the column sums ``s_q``: ``a' W^-1 a = Kw_c + sum_k B_ck / (1 + k g_cq)`` where
    W = I + g_cq Z_q Z_q', Kw_c is the cross-product of the within-query deviations and
    ``B_ck = sum_{q in c, n_q = k} s_q s_q' / k``; ``log|W| = sum_q log(1 + n_q g_cq)``. Then
    ``a' V^-1 a = K - K_aE (I + Psi K_EE)^-1 Psi K_Ea`` and ``log|V| = log|W| + log|I + Psi K_EE|``
    (Woodbury, Sylvester). Every step is a rational function of gamma, evaluated with complex
    arithmetic as it stands, so ``Im f(x + ih) / h`` is f's exact derivative (complex step)."""

    def __init__(self, y: np.ndarray, cls: np.ndarray, query: np.ndarray, meth: np.ndarray, n_methods: int,
                 n_classes: int) -> None:
        m = self.m = n_methods
        self.n = y.size
        self.shift = float(y.mean())
        a = np.column_stack([meth[:, None] == np.arange(m), y - self.shift]).astype(np.float64)
        n_q = np.bincount(query).astype(np.float64)
        s = _binsum(query, a, n_q.size)
        q_class = np.zeros(n_q.size, np.int64)
        q_class[query] = cls
        self.kw = _crossproducts(cls, a - s[query] / n_q[query, None], n_classes)  # within-query deviations
        sizes, which = np.unique(n_q, return_inverse=True)
        self.sizes, self.n_sizes = sizes, np.bincount(which).astype(np.float64)
        b = _binsum(q_class * sizes.size + which, _outer(s) / n_q[:, None], n_classes * sizes.size)
        # sizes x (classes x (m+1)^2), so that the query-size weights are one matrix product
        self.b = b.reshape(n_classes, sizes.size, (m + 1) ** 2).transpose(1, 0, 2).reshape(sizes.size, -1).copy()
        # beta = D mu: the reference method's mean, then each method's difference from it
        self.d = np.eye(m)
        self.d[1:, 0] = -1.0

    def parts(self, gamma: np.ndarray) -> tuple:
        """(rss, log|V/s2| + log|X'V^-1X s2|, E'V^-1E s2, the method means of the shifted y) at
        ``gamma`` (real or complex): rss is the GLS residual ``r' (V/s2)^-1 r``."""
        g_class, g_cm, g_q = gamma
        m = self.m
        w = 1.0 / (1.0 + self.sizes * g_q)
        # real and imaginary parts apart: numpy would copy the real matrix to complex first
        between = w.real @ self.b + 1j * (w.imag @ self.b) if np.iscomplexobj(w) else w @ self.b
        k = self.kw + between.reshape(self.kw.shape)
        psi = g_class * np.ones((m, m)) + g_cm * np.eye(m)
        ke = k[:, :m, :]
        a = np.eye(m) + psi @ k[:, :m, :m]
        tot = (k - np.swapaxes(ke, 1, 2) @ np.linalg.solve(a, psi @ ke)).sum(axis=0)
        e, ey = tot[:m, :m], tot[:m, m]
        mu = np.linalg.solve(e, ey)
        rss = tot[m, m] - ey @ mu
        logdet = self.n_sizes @ np.log1p(self.sizes * g_q) + _logdet(a).sum() + _logdet(e)
        return rss, logdet, e, mu

    def criterion(self, gamma: np.ndarray) -> float | complex:
        """-2 x the REML log-likelihood with s2 profiled out (lme4's ``REMLcrit``):
        ``(n - p) (1 + log(2 pi rss / (n - p))) + log|V/s2| + log|X'V^-1X s2|``."""
        rss, logdet, _, _ = self.parts(gamma)
        dof = self.n - self.m
        return dof * (1 + np.log(2 * math.pi * rss / dof)) + logdet

    def deviance(self, varpar: np.ndarray) -> float | complex:
        """lmerTest's ``devfun_vp``: the REML deviance at ``(theta..., sigma)`` (theta = relative
        standard deviations of the active terms, sigma the residual's), not profiled."""
        gamma, sigma2 = self._gamma(varpar), varpar[-1] ** 2
        rss, logdet, _, _ = self.parts(gamma)
        return logdet + rss / sigma2 + (self.n - self.m) * np.log(2 * math.pi * sigma2)

    def covbeta(self, varpar: np.ndarray) -> np.ndarray:
        """lmerTest's ``get_covbeta``: ``sigma^2 (X' (V/s2)^-1 X)^-1`` at ``(theta..., sigma)``."""
        _, _, e, _ = self.parts(self._gamma(varpar))
        return varpar[-1] ** 2 * (self.d @ np.linalg.inv(e) @ self.d.T)

    def _gamma(self, varpar: np.ndarray) -> np.ndarray:
        gamma = np.zeros(3, dtype=np.result_type(varpar, np.float64))
        gamma[self._active] = varpar[:-1] ** 2
        return gamma

    def gradient(self, f, x: np.ndarray) -> np.ndarray:
        """The exact gradient of a real-analytic ``f`` at x (complex step)."""
        out = np.empty(x.size)
        for j in range(x.size):
            z = x.astype(np.complex128)
            z[j] += 1j * _STEP
            out[j] = np.imag(f(z)) / _STEP
        return out

    def jacobian(self, f, x: np.ndarray) -> np.ndarray:
        """d f / d x_j for array-valued f, stacked on the last axis (complex step)."""
        cols = []
        for j in range(x.size):
            z = x.astype(np.complex128)
            z[j] += 1j * _STEP
            cols.append(np.imag(f(z)) / _STEP)
        return np.stack(cols, axis=-1)

    def hessian(self, f, x: np.ndarray, levels: int = 4) -> np.ndarray:
        """Central differences of the exact gradient, Richardson-extrapolated over steps h, h/2,
        h/4, h/8 (h = 0.1 |x_j|, 1e-4 at 0: numDeriv's defaults): error O(h^8) plus rounding."""
        k = x.size
        out = np.empty((k, k))
        for j in range(k):
            h = 0.1 * abs(x[j]) if abs(x[j]) > 1e-4 else 1e-4
            table = []
            for level in range(levels):
                step = np.zeros(k)
                step[j] = h / 2**level
                table.append((self.gradient(f, x + step) - self.gradient(f, x - step)) / (2 * step[j]))
            for order in range(1, levels):
                table = [(4**order * table[i + 1] - table[i]) / (4**order - 1) for i in range(len(table) - 1)]
            out[:, j] = table[0]
        return (out + out.T) / 2

    def maximise(self, active: np.ndarray) -> tuple[np.ndarray, bool]:
        """(gamma maximising the REML likelihood over gamma >= 0, inactive terms fixed at 0;
        whether the search converged). The criterion on a coarse grid picks the start, L-BFGS-B
        with the exact gradient finds the basin, Newton steps on the free coordinates (Hessian
        from differences of the exact gradient) polish it to machine precision; a coordinate stays
        at the bound 0 where the criterion rises from it."""
        from itertools import product

        from scipy.optimize import minimize

        idx = np.flatnonzero(active)
        self._active = active

        def full(x: np.ndarray) -> np.ndarray:
            gamma = np.zeros(3, dtype=np.result_type(x, np.float64))
            gamma[idx] = x
            return gamma

        def f(x: np.ndarray) -> float:
            value = float(np.real(self.criterion(full(x))))
            return value if math.isfinite(value) else math.inf

        def grad(x: np.ndarray) -> np.ndarray:
            return self.gradient(lambda z: self.criterion(full(z)), x)

        if idx.size == 0:
            return np.zeros(3), True
        grid = [np.array(p) for p in product([0.0, 0.1, 1.0, 10.0], repeat=idx.size)]
        x = min(grid, key=f)
        res = minimize(lambda z: (f(z), grad(z)), x, jac=True, method="L-BFGS-B",
                       bounds=[(0.0, GAMMA_MAX)] * idx.size, options={"ftol": 1e-15, "gtol": 1e-9, "maxiter": 500})
        x = np.clip(res.x, 0.0, GAMMA_MAX)
        g = grad(x)
        for _ in range(100):  # Newton on the free coordinates, with backtracking
            free = (x > 0) | (g < 0)
            if not free.any():
                break
            hess = self._hessian_at(grad, x)[np.ix_(free, free)]
            val, vec = np.linalg.eigh(hess)
            if not np.all(np.isfinite(val)) or val.max() <= 0:
                break
            # Newton's step where the Hessian is positive; elsewhere its eigenvalues made positive
            # (|lambda|, floored) — a descent direction scaled like the criterion's curvature
            newton = bool(val.min() > 0)
            val = np.maximum(np.abs(val), 1e-8 * val.max())
            step = -(vec / val) @ (vec.T @ g[free])
            # near the optimum the criterion is flat to its rounding (1e-13 of it can hide a gradient
            # of 1e-7), so a step is taken when it lowers the criterion or the gradient; the search
            # stops when neither falls
            f0, g0, t = f(x), np.max(np.abs(g[free])), 1.0
            while t > 1e-12:
                x_new = x.copy()
                x_new[free] = np.clip(x[free] + t * step, 0.0, GAMMA_MAX)
                g_new = grad(x_new)
                f_new = f(x_new)
                if f_new < f0 or (f_new <= f0 + 1e-12 * max(1.0, abs(f0)) and np.max(np.abs(g_new[free])) < g0):
                    break
                t /= 2
            else:
                break
            x, g = x_new, g_new
            if newton and t == 1.0 and np.max(np.abs(g_new[free])) >= g0:  # at the optimum to rounding
                break
        g = grad(x)
        scale = max(1.0, abs(f(x)))
        converged = bool(np.all(np.where(x > 0, np.abs(g) * np.maximum(x, 1.0), np.maximum(-g, 0.0)) <= 1e-6 * scale))
        converged &= bool(np.all(x < GAMMA_MAX))
        return full(x), converged

    @staticmethod
    def _hessian_at(grad, x: np.ndarray) -> np.ndarray:
        """Central differences of the exact gradient (for the Newton steps: a few digits suffice)."""
        out = np.empty((x.size, x.size))
        for j in range(x.size):
            h = 1e-5 * max(x[j], 1e-3)
            e = np.zeros(x.size)
            e[j] = h
            out[:, j] = (grad(x + e) - grad(x - e)) / (2 * h)
        return (out + out.T) / 2

    def estimates(self, gamma: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(beta, Cov(beta) = s2 (X' V^-1 X)^-1, s2) at ``gamma``, s2 = rss / (n - p)."""
        rss, _, e, mu = self.parts(gamma)
        beta = self.d @ mu
        beta[0] += self.shift
        scale = float(rss / (self.n - self.m))
        return beta, scale * (self.d @ np.linalg.inv(e) @ self.d.T), scale

    def satterthwaite(self, gamma: np.ndarray, active: np.ndarray) -> tuple[np.ndarray, str]:
        """(Satterthwaite df per coefficient, a note on the Hessian or ""), as lmerTest's
        ``contest1D``: ``df = 2 Var(b)^2 / (g' A g)``, ``A = 2 H^+`` over ``(theta, sigma)``."""
        self._active = active
        _, _, s2 = self.estimates(gamma)
        varpar = np.r_[np.sqrt(gamma[active]), math.sqrt(s2)]
        hess = self.hessian(self.deviance, varpar)
        val, vec = np.linalg.eigh(hess)
        note = ""
        if (val < -HESSIAN_TOL).any():
            note = "the REML deviance's Hessian has negative eigenvalues (not at a minimum); df may be off."
        elif (np.abs(val) <= HESSIAN_TOL).any():
            note = ("the REML deviance's Hessian is singular (variance parameters not all identifiable); df from "
                    "its pseudo-inverse, as lmerTest.")
        pos = val > HESSIAN_TOL
        a = 2 * (vec[:, pos] / val[pos]) @ vec[:, pos].T
        jac = self.jacobian(self.covbeta, varpar)  # p x p x k
        cov = self.covbeta(varpar)
        g = np.stack([jac[j, j] for j in range(cov.shape[0])])
        denom = np.einsum("ij,jk,ik->i", g, a, g)
        with np.errstate(divide="ignore", invalid="ignore"):
            return 2 * np.diag(cov) ** 2 / denom, note


def _logdet(a: np.ndarray) -> np.ndarray:
    """log det of (a stack of) matrices, analytic in complex arguments: ``log(sign) + log|det|`` is
    the principal ``log(det)`` (its imaginary part, the argument, carries the complex step)."""
    sign, logabs = np.linalg.slogdet(a)
    return np.log(sign) + logabs if np.iscomplexobj(sign) else logabs
