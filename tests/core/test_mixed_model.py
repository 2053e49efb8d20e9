"""The mixed model ``value ~ method + (1 | query)`` by REML against outside fits: statsmodels'
MixedLM (and ordinary least squares where REML sits on the boundary, query variance 0), the ANOVA
closed form of complete balanced designs, and lme4 when R is installed; and total on degenerate
tables."""

from __future__ import annotations

import io
import math
import subprocess
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from analysis_core.stats.mixed_model import _QueryInterceptREML, mixed_model

from .oracle import r_has


@st.composite
def designs(draw, complete: bool | None = None) -> pd.DataFrame:
    """2-4 methods x 2-60 queries with a random query intercept whose variance is 0 to 10 times
    the residual's (0 and 1e-3 put REML on the boundary often). Incomplete designs: after the first
    two queries (every method, so each method and two shared queries exist) each method answers
    a query with probability 0.6, at least one method every query — some queries by one only."""
    n_methods, n_queries = draw(st.integers(2, 4)), draw(st.integers(2, 60))
    complete = draw(st.booleans()) if complete is None else complete
    ratio = draw(st.sampled_from([0.0, 1e-3, 0.1, 1.0, 10.0]))  # query variance / residual variance
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    effect, intercept = rng.normal(0, 0.1, n_methods), rng.normal(0, 0.1 * math.sqrt(ratio), n_queries)
    rows = []
    for q in range(n_queries):
        answered = np.ones(n_methods, bool) if complete or q < 2 else rng.random(n_methods) < 0.6
        answered[rng.integers(n_methods)] = True
        rows += [dict(method=f"m{m}", query=f"q{q}", ap=0.5 + effect[m] + intercept[q] + rng.normal(0, 0.1))
                 for m in np.flatnonzero(answered)]
    return pd.DataFrame(rows)


def _design(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y, X (intercept + treatment dummies, the first method in sorted order the reference), query codes."""
    method, names = pd.factorize(df["method"], sort=True)
    X = np.column_stack([np.ones(len(df)), method[:, None] == np.arange(1, names.size)]).astype(np.float64)
    return df["ap"].to_numpy(np.float64), X, pd.factorize(df["query"])[0]


def _model(df: pd.DataFrame) -> _QueryInterceptREML:
    """The fit behind :func:`mixed_model`, for its criterion (-2 x the REML log-likelihood) and full Cov(beta)."""
    y, X, query = _design(df)
    return _QueryInterceptREML(y, query, pd.factorize(df["method"], sort=True)[0], X.shape[1])


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(designs())
def test_reml_equals_statsmodels_mixedlm_and_ordinary_least_squares_on_the_boundary(df):
    """statsmodels' REML log-likelihood has the same constants as our criterion, so the optimum
    reached is compared directly. Its default optimiser (BFGS to gradient 1e-5) stops up to 4e-4
    (relative) off in the variances; where it converged inside, BFGS is run on from there to
    gradient 1e-10, which lands within ~1e-8 (from the default start it can stall), hence rtol
    1e-5 / 1e-6 below. Standard errors: ours are lme4's ``s2 (X' V^-1 X)^-1``, equal to
    statsmodels' on complete designs; on incomplete ones statsmodels adds the observed coupling
    between fixed effects and variance (up to tens of % apart), so there the oracle is that formula
    on a dense V at statsmodels' estimates."""
    import statsmodels.api as sm
    import statsmodels.formula.api as smf

    res = mixed_model(df)
    assert res.converged and res.table["p_value"].notna().all(), res.warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lm = smf.mixedlm("ap ~ C(method)", df, groups=df["query"])
        fit = lm.fit(reml=True)
        if fit.converged and fit.cov_re.iloc[0, 0] > 1e-3 * fit.scale:
            fit = lm.fit(reml=True, start_params=fit.params_object, method="bfgs", gtol=1e-10)
            interior = True
        else:
            interior = False
    theta, theta_sm = res.query_variance / res.residual_variance, float(fit.cov_re.iloc[0, 0]) / fit.scale
    model = _model(df)
    assert model.criterion(theta_sm) == pytest.approx(-2 * fit.llf, rel=1e-9)  # the same function
    assert model.criterion(theta) <= -2 * fit.llf + 1e-9 * abs(fit.llf)  # an optimum at least as good
    y, X, query = _design(df)
    coef, se = res.table["coef"].to_numpy(), res.table["std_err"].to_numpy()
    event("boundary" if theta == 0.0 else "interior" if interior else "statsmodels near the boundary or stopped")
    if theta == 0.0:
        assert any("query variance estimated at 0 (boundary)" in w for w in res.warnings)
        ols = sm.OLS(y, X).fit()
        np.testing.assert_allclose(coef, ols.params, rtol=0, atol=1e-10 * se.max())
        np.testing.assert_allclose(se, ols.bse, rtol=1e-9)
        assert res.residual_variance == pytest.approx(ols.scale, rel=1e-9) and res.query_variance == 0.0
    elif interior:
        np.testing.assert_allclose(coef, fit.fe_params, rtol=0, atol=1e-6 * se.max())
        Z = (query[:, None] == np.arange(query.max() + 1)).astype(np.float64)
        V = np.eye(y.size) + theta_sm * Z @ Z.T
        dense = np.sqrt(np.diag(fit.scale * np.linalg.inv(X.T @ np.linalg.solve(V, X))))
        np.testing.assert_allclose(se, dense, rtol=1e-6)
        if df.groupby("query").size().eq(X.shape[1]).all():
            np.testing.assert_allclose(se, fit.bse_fe, rtol=1e-6)
        assert res.query_variance == pytest.approx(float(fit.cov_re.iloc[0, 0]), rel=1e-5)
        assert res.residual_variance == pytest.approx(fit.scale, rel=1e-5)


@settings(max_examples=40, deadline=None)
@given(designs(complete=True))
def test_complete_balanced_designs_give_the_anova_closed_form(df):
    """Every query answered once by each of k methods: REML is the ANOVA estimator, s2 = MS_residual,
    query variance (MS_query - MS_residual) / k, or, when that is negative, 0 with s2 the residual
    variance of method means alone (the boundary); method differences have SE sqrt(2 s2 / Q), the
    reference mean sqrt((query variance + s2) / Q)."""
    wide = df.pivot(index="query", columns="method", values="ap").sort_index(axis=1).to_numpy()
    n_q, k = wide.shape
    row, col, grand = wide.mean(axis=1), wide.mean(axis=0), wide.mean()
    ss_query, ss_res = k * np.sum((row - grand) ** 2), np.sum((wide - row[:, None] - col + grand) ** 2)
    ms_query, ms_res = ss_query / (n_q - 1), ss_res / ((n_q - 1) * (k - 1))
    if ms_query > ms_res:
        s2, s2_query = ms_res, (ms_query - ms_res) / k
    else:
        s2, s2_query = (ss_query + ss_res) / ((n_q - 1) * k), 0.0
    res = mixed_model(df)
    t = res.table
    assert res.residual_variance == pytest.approx(s2, rel=1e-10)
    assert res.query_variance == pytest.approx(s2_query, rel=1e-10, abs=1e-14 * s2)
    np.testing.assert_allclose(t["coef"], np.r_[col[0], col[1:] - col[0]], rtol=0, atol=1e-12)
    se = np.r_[math.sqrt((s2_query + s2) / n_q), np.full(k - 1, math.sqrt(2 * s2 / n_q))]
    np.testing.assert_allclose(t["std_err"], se, rtol=1e-10)
    event("boundary" if s2_query == 0.0 else "interior")
    assert res.converged and (s2_query == 0.0) == any("boundary" in w for w in res.warnings)


LME4 = """
suppressMessages(library(lme4))
d <- read.csv(file("stdin"))
d$method <- factor(d$method, levels = sort(unique(d$method)))
fit <- lmer(ap ~ method + (1 | query), data = d, REML = TRUE)
vc <- as.data.frame(VarCorr(fit))$vcov
cat(sprintf("%.17g", c(fixef(fit), as.vector(as.matrix(vcov(fit))), vc, REMLcrit(fit))), sep = "\\n")
"""


@pytest.mark.slow
@pytest.mark.r_oracle
@pytest.mark.skipif(not r_has("lme4"), reason="Rscript with lme4 missing (apt-get install r-base-core r-cran-lme4)")
@pytest.mark.parametrize("ratio", [1.0, 0.0])
def test_lme4_lmer_agrees_on_an_incomplete_design(ratio):
    """lme4's ``lmer(ap ~ method + (1 | query), REML = TRUE)``: fixef, vcov, VarCorr and the REML
    criterion, on 3 methods x 40 queries with a quarter of the answers missing; ratio 0 puts the
    fit on the boundary (lme4: a singular fit). lme4's default optimiser (BOBYQA) stops at absolute
    changes of 1e-8 in sigma_query / sigma_residual and in the criterion, hence rtol 1e-6."""
    rng = np.random.default_rng(11)
    rows = [dict(method=f"m{m}", query=f"q{q}", ap=0.4 + 0.05 * m + math.sqrt(ratio) * 0.1 * u + rng.normal(0, 0.1))
            for q, u in enumerate(rng.normal(0, 1, 40)) for m in range(3) if q < 2 or rng.random() < 0.75]
    df = pd.DataFrame(rows)
    out = subprocess.run(["Rscript", "-e", LME4], input=df.to_csv(index=False), capture_output=True, text=True,
                         check=True).stdout
    got = np.loadtxt(io.StringIO(out))
    res = mixed_model(df)
    p = len(res.table)
    fixef, vcov, (s2_query, s2), crit = got[:p], got[p:p + p * p].reshape(p, p), got[p + p * p:-1], got[-1]
    np.testing.assert_allclose(res.table["coef"], fixef, rtol=0, atol=1e-6 * res.table["std_err"].max())
    np.testing.assert_allclose(res.table["std_err"], np.sqrt(np.diag(vcov)), rtol=1e-6)
    assert res.residual_variance == pytest.approx(s2, rel=1e-6)
    assert res.query_variance == pytest.approx(s2_query, rel=1e-6, abs=1e-9 * s2)
    theta, model = res.query_variance / res.residual_variance, _model(df)
    np.testing.assert_allclose(model.estimates(theta)[1], vcov, rtol=1e-6, atol=1e-6 * np.abs(vcov).max())
    assert model.criterion(theta) == pytest.approx(crit, rel=1e-9)
    assert model.criterion(theta) <= crit + 1e-9 * abs(crit)


@st.composite
def degenerate_tables(draw):
    """1-4 methods x 1-5 queries, cells missing at random: constant values, values from {0, 0.5, 1}
    (ties, methods differing by one shift), continuous, identical methods, a method shifted by a
    constant, and sometimes a NaN value."""
    n_methods, n_queries = draw(st.integers(1, 4)), draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["constant", "few", "continuous", "identical", "shifted"]))
    rows = []
    for q in range(n_queries):
        base = draw(st.sampled_from([0.0, 0.5, 1.0])) if kind != "continuous" else draw(st.floats(0, 1))
        for m in range(n_methods):
            if not draw(st.booleans()) and draw(st.booleans()):
                continue  # a missing (method, query)
            v = {"constant": 0.25, "identical": base, "shifted": base + 0.1 * m}.get(kind)
            if v is None:
                v = draw(st.sampled_from([0.0, 0.5, 1.0])) if kind == "few" else draw(st.floats(0, 1))
            rows.append(dict(method=f"m{m}", query=q, ap=v))
    df = pd.DataFrame(rows, columns=["method", "query", "ap"])
    with_nan = len(df) > 0 and draw(st.booleans())
    if with_nan:
        df.loc[draw(st.integers(0, len(df) - 1)), "ap"] = np.nan
    return df, kind, with_nan


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(degenerate_tables(), st.sampled_from([0.01, 0.05, 0.1]))
def test_mixed_model_is_total_on_degenerate_tables(case, alpha):
    df, kind, with_nan = case
    res = mixed_model(df, alpha)
    t = res.table
    event("defined" if t["p_value"].notna().all() else res.warnings[0][:60])
    assert t["term"].iloc[0] == "Intercept"
    assert set(t["term"].iloc[1:]) <= {f"method[{m}]" for m in df["method"]}
    p = t["p_value"].to_numpy(np.float64)
    assert ((p[np.isfinite(p)] >= 0) & (p[np.isfinite(p)] <= 1)).all()
    assert t.loc[~np.isfinite(p), "note"].str.startswith("undefined: ").all()
    assert np.isfinite(p).all() or (math.isnan(res.query_variance) and not res.converged)
    if kind in ("constant", "identical", "shifted") and not with_nan:  # no information about a difference
        assert not (p < alpha).any(), (t, res.warnings)


def test_methods_that_differ_by_one_shift_on_every_query_are_undefined_not_infinitely_significant():
    """Zero residual variance with queries that do differ between methods: the method effect fits
    exactly, so REML pushes the residual variance to 0 and z to infinity; statsmodels reported
    SE 7e-6 and p = 0 here from two queries."""
    df = pd.DataFrame({"method": ["a", "b"] * 2, "query": [0, 0, 1, 1], "ap": [0.0, 0.5, 0.5, 1.0]})
    res = mixed_model(df)
    assert res.table["p_value"].isna().all() and not res.converged
    assert res.warnings == ["mixed model undefined: the method effects fit every within-query difference exactly "
                            "(zero residual variance); nothing is left to test them against."]


def test_two_methods_two_queries_and_a_single_method_query_fit_without_raising():
    df = pd.DataFrame({"method": ["a", "b", "a", "b", "b"], "query": [0, 0, 1, 1, 2], "ap": [0.0, 0.5, 0.5, 0.0, 1.0]})
    res = mixed_model(df)
    assert res.converged and res.n_obs == 5 and res.table["p_value"].between(0, 1).all()
    assert res.query_variance == 0.0 and any("query variance estimated at 0 (boundary)" in w for w in res.warnings)


@settings(max_examples=40, deadline=None)
@given(n_q=st.integers(2, 12), seed=st.integers(0, 2**31 - 1))
def test_two_methods_on_every_query_give_the_paired_t_test_where_the_query_variance_is_inside(n_q, seed):
    """Two methods answering the same n queries: with the query variance inside its range, the
    REML fit is the randomized-block ANOVA, and the method term's t test (df n - 1) is exactly
    scipy's paired t test. Wald z (the convention before) rejected 30 % of null runs at n = 2."""
    from scipy import stats as sps

    rng = np.random.default_rng(seed)
    q = rng.normal(0, 0.3, n_q)
    a, b = 0.5 + q + rng.normal(0, 0.1, n_q), 0.5 + q + rng.normal(0, 0.1, n_q)
    df = pd.DataFrame({"method": ["a"] * n_q + ["b"] * n_q, "query": list(range(n_q)) * 2, "label": "x",
                       "ap": np.r_[a, b]})
    res = mixed_model(df)
    row = res.table.set_index("term").loc["method[b]"]
    if res.query_variance == 0.0:
        assert row["df"] == n_q - 1
        return
    ref = sps.ttest_rel(b, a)
    assert row["df"] == n_q - 1
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-6)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-6)
    ci = ref.confidence_interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-6, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("n_q", [2, 3, 4])
def test_the_mixed_model_rejects_null_data_at_most_at_its_level_with_few_queries(n_q):
    """Null data (no method effect), 3 methods, 2-4 queries: the share of p < 0.05 stays near 5 %
    (Wald z: 30 % at 2 queries, 19 % at 3, 11 % at 4)."""
    rng = np.random.default_rng(n_q)
    hits = runs = 0
    for _ in range(300):
        q = rng.normal(0, 0.3, n_q)
        vals = (0.5 + q[None, :] + rng.normal(0, 0.1, (3, n_q))).ravel()
        df = pd.DataFrame({"method": np.repeat(["a", "b", "c"], n_q), "query": np.tile(np.arange(n_q), 3),
                           "label": "x", "ap": vals})
        p = mixed_model(df).table.set_index("term").loc[["method[b]", "method[c]"], "p_value"]
        runs += 2
        hits += int((p < 0.05).sum())
    assert hits / runs <= 0.08, hits / runs
