"""The run-level mixed model

    value ~ family + (1 | family:run) + (1 | class) + (1 | class:family) + (1 | query)

for comparing training procedures ("families") that were each trained several times (runs:
seeds), when every run answers the same queries and each query has a class (its label) — SPEC §4,
"Unit of inference" (the run) and "Runs (replicate trainings)". Families are fixed effects,
treatment-coded with the first family in sorted order as the reference (``Intercept`` is its
mean, ``family[f]`` the difference of family f from it). Random effects, independent normal: a run
intercept within its family (the seed-to-seed variation of a training procedure: a family
difference is judged against it, so it generalises to new trainings), a class intercept, a class
x family interaction (a family effect judged against how much it varies from class to class
generalises over classes), and a query intercept (query ids are unique across classes, so this is
the query within its class; it pairs the runs on a query); the residual is the run x query
interaction.

The fit is REML as lme4's ``lmer`` (relative standard deviations theta >= 0; a component may be
estimated at the boundary 0, a singular fit, said in a warning), ``Cov(beta)`` as lme4's ``vcov``,
and t tests with Satterthwaite's degrees of freedom as lmerTest's ``summary`` for each coefficient
and as lmerTest's ``contest1D(model, L)`` for any contrast ``L' beta`` — every pair of families
(:meth:`RunMixedModelResult.pairs`, :meth:`RunMixedModelResult.contrast`). The machinery is
:mod:`._reml`'s (shared with :mod:`.class_mixed_model`).

Computation: V is never formed. The query intercept is integrated out per query (each query's
block over the runs that answer it is ``I + g 11'``: Sherman-Morrison, :class:`._reml.QueryFold`);
the run, class and class x family intercepts have few levels (runs + classes + classes x families
columns Z), so ``V / s2 = W + Z Psi Z'`` is inverted by Woodbury in their dimension. The REML
criterion is then a function of one cross-product matrix of ``[Z, E, y]`` (E the family
indicators) per distinct number of runs answering a query, computed once: an evaluation costs
O((runs + classes x (families + 1))^3), whatever the number of queries.

Conventions for degenerate data (the function never raises on them; bad input gets
:class:`~analysis_core.errors.InputError`): a random term that the design cannot tell apart from
the fixed effects or from another term is left out, with a warning — the run term when every
family has one run (the run is then the family), the class and class x family terms with one
class, the query term when every class has one query or no query is answered by two runs. Without
a run term nothing is said about families (every coefficient and contrast undefined, with the
reason: there is no seed-to-seed variation to judge a difference against), but the variance
components are given. One family: the intercept and the variance components, no comparison.
Undefined (every number NaN, the reason in ``note`` and ``warnings``): no values, every value the
same, or the fixed and random effects fitting every value exactly (zero residual variance). NaN
values are left out and counted (``n_dropped``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError
from ._reml import NO_DF, REML, Fitted, QueryFold, absorbed, identifiable, indicators, t_tests, woodbury
from .variability import clean_values

#: the random terms, in the order of ``gamma`` (and of priority when two cannot be told apart)
COMPONENTS = ("family:run", "class", "class:family", "query")
COLUMNS = ("family", "run", "class", "query")
_LABEL = "run mixed model"
_SOURCE = "run mixed model input"


@dataclass(frozen=True, eq=False)
class RunMixedModelResult:
    """``value ~ family + (1 | family:run) + (1 | class) + (1 | class:family) + (1 | query)``, REML.

    ``coefficients``: term (``Intercept``, ``family[f]``), estimate, se, df (Satterthwaite), t,
    p_value, ci_low, ci_high (``1 - alpha`` t interval), note (why a number is undefined).
    ``variance_components``: component (``family:run``, ``class``, ``class:family``, ``query``,
    ``residual``), variance, sd, share (of the sum of the variances), note (a term left out). ``note``
    says why the family comparison is undefined ("" when it is defined). ``n_runs``: runs per
    family; ``n_obs``: (run, query) values fitted; ``n_dropped``: NaN values left out."""

    coefficients: pd.DataFrame
    variance_components: pd.DataFrame
    families: list[str]
    n_runs: dict[str, int]
    n_classes: int
    n_queries: int
    n_obs: int
    n_dropped: int
    alpha: float
    converged: bool
    note: str
    warnings: list[str] = field(default_factory=list)
    unit: str = "run"
    fit: Fitted | None = field(default=None, repr=False)  # what a contrast's Satterthwaite df needs

    def summary_frame(self) -> pd.DataFrame:
        return self.coefficients

    def contrast(self, a: str, b: str, alpha: float | None = None) -> pd.DataFrame:
        """The difference of family a's mean from family b's (``a - b``) as one row: family_a,
        family_b, estimate, se, df (lmerTest's ``contest1D``), t, p_value, ci_low, ci_high, note."""
        missing = [f for f in (a, b) if f not in self.families]
        if missing:
            raise InputError(_SOURCE, f"no family {missing[0]!r} (families: {', '.join(self.families)}).",
                             "name two of the fitted families.")
        return self._contrasts([(a, b)], self.alpha if alpha is None else alpha)

    def pairs(self, alpha: float | None = None) -> pd.DataFrame:
        """Every pair of families (a before b in sorted order) as :meth:`contrast` rows, ``a - b``."""
        fams = self.families
        pairs = [(fams[i], fams[j]) for i in range(len(fams)) for j in range(i + 1, len(fams))]
        return self._contrasts(pairs, self.alpha if alpha is None else alpha)

    def _contrasts(self, pairs: list[tuple[str, str]], alpha: float) -> pd.DataFrame:
        index = {f: i for i, f in enumerate(self.families)}
        lmat = np.zeros((len(pairs), len(self.families)))
        for r, (a, b) in enumerate(pairs):
            # a family's mean is Intercept + family[f] (the reference's: Intercept): the intercept cancels
            lmat[r, index[a]] += 1.0
            lmat[r, index[b]] -= 1.0
            lmat[r, 0] = 0.0
        out = pd.DataFrame({"family_a": [p[0] for p in pairs], "family_b": [p[1] for p in pairs]})
        if self.fit is None:
            tests = {k: np.full(len(pairs), np.nan) for k in ("estimate", "se", "t", "df", "p_value", "ci_low",
                                                              "ci_high")}
            return out.assign(**tests, note=self.note)[list(out.columns) + _TEST_COLUMNS]
        estimate = lmat @ self.fit.coef
        se = np.sqrt(np.einsum("ri,ij,rj->r", lmat, self.fit.cov, lmat))
        df = self.fit.df(lmat)
        return out.assign(estimate=estimate, se=se, **t_tests(estimate, se, df, alpha),
                          note=np.array([NO_DF if not np.isfinite(v) else "" for v in df], dtype=object)
                          )[list(out.columns) + _TEST_COLUMNS]


_TEST_COLUMNS = ["estimate", "se", "df", "t", "p_value", "ci_low", "ci_high", "note"]


def run_mixed_model(df: pd.DataFrame, alpha: float = 0.05, value: str = "value") -> RunMixedModelResult:
    """Families of training runs compared with the run as the unit: ``value ~ family + (1 |
    family:run) + (1 | class) + (1 | class:family) + (1 | query)`` by REML, t tests and ``1 -
    alpha`` t intervals with Satterthwaite's degrees of freedom (lme4 + lmerTest's numbers; see the
    module's docstring for the model, the computation and the degenerate cases).

    ``df``: one row per (run, query) with columns ``family``, ``run`` (identified within its
    family), ``class`` (the query's label), ``query`` (unique across classes; every run answers
    the same queries, some may be missing) and ``value`` (e.g. the query's AP). NaN values are left
    out and counted; infinite values, missing columns, missing labels, a query under two classes
    and a (family, run, query) given twice are refused with :class:`~analysis_core.errors.InputError`.

    >>> res = run_mixed_model(table)                                   # doctest: +SKIP
    >>> res.coefficients, res.variance_components, res.pairs()         # doctest: +SKIP

    References: Bates et al. (2015) and Kuznetsova et al. (2017), as in :mod:`._reml`."""
    d, n_dropped = _validated(df, alpha, value)
    families = sorted(d["family"].unique())
    fcode = pd.Categorical(d["family"], categories=families).codes.astype(np.int64)
    rcode = pd.factorize(pd.MultiIndex.from_arrays([d["family"], d["run"]]))[0]
    ccode, classes = pd.factorize(d["class"])
    qcode = pd.factorize(d["query"])[0]
    n_f = max(len(families), 1)
    cfcode = pd.factorize(ccode * n_f + fcode)[0]
    n_runs = {f: int(n) for f, n in d.groupby("family")["run"].nunique().items()}
    terms = ["Intercept"] + [f"family[{f}]" for f in families[1:]]
    warn = [f"{_LABEL}: {n_dropped} NaN value(s) left out."] if n_dropped else []

    def result(coefficients: pd.DataFrame, variances: pd.DataFrame, converged: bool, note: str,
               warnings: list[str], fit: Fitted | None = None) -> RunMixedModelResult:
        return RunMixedModelResult(coefficients, variances, families, n_runs, len(classes), int(d["query"].nunique()),
                                   len(d), n_dropped, alpha, converged, note, warnings, fit=fit)

    def undefined(why: str, variances: pd.DataFrame | None = None, converged: bool = False,
                  fit_warnings: list[str] | None = None) -> RunMixedModelResult:
        coefficients = pd.DataFrame({"term": terms, **{k: np.nan for k in _TEST_COLUMNS[:-1]}, "note": why})
        if variances is None:
            variances = _components(np.full(len(COMPONENTS) + 1, np.nan), np.ones(len(COMPONENTS), bool))
        return result(coefficients, variances, converged, why, warn + (fit_warnings or []) + [f"{_LABEL} {why}"])

    if len(d) == 0:
        return undefined("undefined: no values to fit.")
    y = d[value].to_numpy(np.float64)
    if np.ptp(y) == 0.0:
        return undefined("undefined: every value is the same; there is no variation to model.")
    groupings = [rcode, ccode, cfcode, qcode]
    active = identifiable(groupings, fcode)
    warn += [f"{_LABEL}: the ({name}) variance cannot be told apart from the fixed effects or another term in "
             f"this design ({_WHY_NOT[name]}); it is left out."
             for name, on in zip(COMPONENTS, active, strict=True) if not on]
    if len(families) == 1:
        warn.append(f"{_LABEL}: one family ({families[0]!r}); nothing to compare — the intercept and the variance "
                    "components only.")
    if absorbed(y, fcode, [g for g, on in zip(groupings, active, strict=True) if on]):
        return undefined("undefined: the family effects and the random effects fit every value exactly (zero "
                         "residual variance); nothing is left to test them against.")
    model = _RunREML(y, fcode, groupings[:3], qcode, len(families))
    try:
        fit = model.fit(active, COMPONENTS, _LABEL)
    except (np.linalg.LinAlgError, ValueError, FloatingPointError) as exc:
        return undefined(f"undefined: the REML fit failed ({exc}).")
    variances = _components(np.r_[fit.gamma * fit.s2, fit.s2], active)
    if not active[0]:
        return undefined("undefined: every family has one run, so the seed-to-seed (run) variance cannot be "
                         "estimated and no difference can be told from it; the class mixed model compares these "
                         "trained models.", variances, fit.converged, fit.warnings)
    se = np.sqrt(np.diag(fit.cov))
    dfs = fit.df(np.eye(len(terms)))
    coefficients = pd.DataFrame({"term": terms, "estimate": fit.coef, "se": se,
                                 **t_tests(fit.coef, se, dfs, alpha),
                                 "note": [NO_DF if not np.isfinite(v) else "" for v in dfs]})
    coefficients = coefficients[["term"] + _TEST_COLUMNS]
    return result(coefficients, variances, fit.converged, "", warn + fit.warnings, fit)


_WHY_NOT = {"family:run": "every family has one run", "class": "one class", "class:family": "one class or one family",
            "query": "every class has one query, or no query is answered by two runs"}


def _components(variances: np.ndarray, active: np.ndarray) -> pd.DataFrame:
    """The variance components frame: a term left out has variance NaN and a note."""
    on = np.r_[active, True]
    v = np.where(on, variances, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = v / np.nansum(v) if np.isfinite(v).any() else v
    return pd.DataFrame({"component": [*COMPONENTS, "residual"], "variance": v, "sd": np.sqrt(v), "share": share,
                         "note": ["" if k else "left out: not identifiable in this design" for k in on]})


def _validated(df: pd.DataFrame, alpha: float, value: str) -> tuple[pd.DataFrame, int]:
    """The rows to fit (labels as strings, NaN values left out) and how many NaN values were left
    out; InputError on what cannot be fitted."""
    if not isinstance(df, pd.DataFrame):
        raise InputError(_SOURCE, f"expected a pandas DataFrame, got {type(df).__name__}.",
                         "pass a long table with one row per (run, query).")
    missing = [c for c in (*COLUMNS, value) if c not in df.columns]
    if missing:
        raise InputError(_SOURCE, f"missing column(s) {', '.join(missing)}.",
                         f"give columns {', '.join(COLUMNS)} and {value}: one row per (run, query).")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise InputError(_SOURCE, f"alpha = {alpha!r} is not a level.", "give alpha between 0 and 1, e.g. 0.05.")
    try:
        values = pd.to_numeric(df[value], errors="raise").to_numpy(np.float64)
    except (TypeError, ValueError):
        raise InputError(_SOURCE, f"column {value!r} is not numeric.", "give numbers (NaN for a missing value).") \
            from None
    if np.isinf(values).any():
        raise InputError(_SOURCE, f"{int(np.isinf(values).sum())} infinite value(s) in {value!r}.",
                         "give finite values, or NaN where a value is missing (it is left out).")
    labels = df[list(COLUMNS)]
    if labels.isna().any().any():
        bad = [c for c in COLUMNS if labels[c].isna().any()]
        raise InputError(_SOURCE, f"missing labels in column(s) {', '.join(bad)}.",
                         "give every row a family, run, class and query.")
    d = pd.DataFrame({c: labels[c].astype(str).to_numpy() for c in COLUMNS}).assign(**{value: values})
    keep = ~np.isnan(values)
    d = clean_values(d[keep].reset_index(drop=True), value)
    twice = d.duplicated(["family", "run", "query"])
    if twice.any():
        row = d[twice].iloc[0]
        raise InputError(_SOURCE, f"run {row['run']!r} of family {row['family']!r} answers query {row['query']!r} "
                         f"more than once ({int(twice.sum())} repeated row(s)).",
                         "give one value per (family, run, query).")
    classes = d.groupby("query")["class"].nunique()
    if (classes > 1).any():
        query = classes.index[classes > 1][0]
        raise InputError(_SOURCE, f"query {query!r} appears under {int(classes[query])} classes.",
                         "give each query one class (its label); query ids must be unique across classes.")
    return d, int((~keep).sum())


class _RunREML(REML):
    """REML for ``y = X beta + Z u + e`` with the random terms of :data:`COMPONENTS`: ``V / s2 = W
    + Z Psi Z'`` with ``W = I + g_query Z_q Z_q'`` and Z the indicators of the runs, classes and
    class x family cells, ``Psi`` diagonal (each column its term's ``gamma``). ``[Z, E, y]' W^-1
    [Z, E, y]`` comes from :class:`._reml.QueryFold`; Woodbury in Z's dimension
    (:func:`._reml.woodbury`) integrates the rest out."""

    n_components = len(COMPONENTS)

    def __init__(self, y: np.ndarray, family: np.ndarray, groupings: list[np.ndarray], query: np.ndarray,
                 n_families: int) -> None:
        from scipy.sparse import hstack

        self.p = n_families
        self.n = y.size
        self.shift = float(y.mean())
        zs = [indicators(g) for g in groupings]
        self.nz = sum(z.shape[1] for z in zs)
        self.column_term = np.concatenate([np.full(z.shape[1], k) for k, z in enumerate(zs)])
        ind = hstack(zs + [indicators(family, n_families)]).tocsr()
        self.fold = QueryFold(ind, y - self.shift, query, np.zeros(y.size, np.int64), 1)

    def parts(self, gamma: np.ndarray) -> tuple:
        g_q = gamma[len(COMPONENTS) - 1]
        tot, logdet_psi = woodbury(self.fold.k(g_q)[0], self.nz, gamma[self.column_term])
        return self.gls(tot[self.nz:, self.nz:], self.fold.logdet(g_q) + logdet_psi)

