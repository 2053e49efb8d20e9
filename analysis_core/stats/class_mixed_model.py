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

from ._reml import NO_DF, REML, QueryFold, absorbed, identifiable, t_tests, woodbury
from .variability import clean_values

COMPONENTS = ("class", "class:method", "class:query")  # the random terms, in the order of ``gamma``


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
        if self.why:
            t = pd.DataFrame({"term": self.terms, "coef": np.nan, "std_err": np.nan, "t": np.nan, "df": np.nan,
                              "p_value": np.nan, "ci_low": np.nan, "ci_high": np.nan, "note": self.why,
                              "unit": "class", "n_units": self.n_units})
            return ClassMixedModelResult(t, *self.variances, False, list(self.warnings), self.n_obs, self.n_units)
        coef, se, df = self.coef, self.se, self.df
        assert coef is not None and se is not None and df is not None  # a fit (no why) has them
        table = pd.DataFrame({"term": self.terms, "coef": coef, "std_err": se, **t_tests(coef, se, df, alpha),
                              "note": self.notes, "unit": "class", "n_units": self.n_units})
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
    groupings = [ccode, ccode * len(methods) + mcode, qcode]
    active = identifiable(groupings, mcode)
    warn = [f"class mixed model: the ({name}) variance cannot be told apart from another term in this design (e.g. "
            "every class has one query); it is left out (fixed at 0)." for k, name in enumerate(COMPONENTS)
            if not active[k]]
    if absorbed(y, mcode, [g for g, on in zip(groupings, active, strict=True) if on]):
        return undefined("undefined: the method effects and the random effects fit every value exactly (zero "
                         "residual variance); nothing is left to test them against.", warn)
    model = _ClassREML(y, ccode, qcode, mcode, len(methods), n_classes)
    try:
        fit = model.fit(active, COMPONENTS, "class mixed model")
    except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
        return undefined(f"undefined: the REML fit failed ({exc}).", warn)
    df_ = fit.df(np.eye(len(terms)))
    notes = ["" if np.isfinite(v) else NO_DF for v in df_]
    gamma, s2 = fit.gamma, fit.s2
    variances = (float(gamma[0] * s2), float(gamma[1] * s2), float(gamma[2] * s2), float(s2))
    return ClassMixedFit(terms, "", fit.coef, np.sqrt(np.diag(fit.cov)), df_, notes, variances, fit.converged,
                         warn + fit.warnings, len(d), n_classes)



class _ClassREML(REML):
    """REML for ``y = X beta + Z u + e`` with the random terms of :data:`COMPONENTS`, in lme4's
    relative form: ``V / s2 = W + E_c Psi E_c'`` per class with ``W = I + g_cq Z_q Z_q'`` and
    ``Psi = g_class 11' + g_class_method I`` (methods x methods; ``gamma = (g_class,
    g_class_method, g_class_query)``, variances over the residual variance s2). X = intercept +
    treatment dummies of methods 1..M-1, the same span as the method indicators E (see
    :class:`._reml.REML`).

    Per class, ``[E, y]' W^-1 [E, y]`` comes from :class:`._reml.QueryFold`; the class and class x
    method effects live in the span of E, so ``V / s2`` is inverted by Woodbury in the methods'
    dimension (:func:`._reml.woodbury`): an evaluation costs O(classes x methods^3), whatever the
    number of queries."""

    n_components = len(COMPONENTS)

    def __init__(self, y: np.ndarray, cls: np.ndarray, query: np.ndarray, meth: np.ndarray, n_methods: int,
                 n_classes: int) -> None:
        self.p = n_methods
        self.n = y.size
        self.shift = float(y.mean())
        e = (meth[:, None] == np.arange(n_methods)).astype(np.float64)
        self.fold = QueryFold(e, y - self.shift, query, cls, n_classes)

    def parts(self, gamma: np.ndarray) -> tuple:
        g_class, g_cm, g_q = gamma
        m = self.p
        psi = g_class * np.ones((m, m)) + g_cm * np.eye(m)
        tot, logdet_psi = woodbury(self.fold.k(g_q), m, psi)
        return self.gls(tot.sum(axis=0), self.fold.logdet(g_q) + logdet_psi.sum())
