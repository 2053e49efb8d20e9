"""The class-level mixed model ``value ~ method + (1 | class) + (1 | class:method) + (1 |
class:query)`` against outside oracles: lme4 + lmerTest through Rscript (fixed effects, standard
errors, Satterthwaite df, variance components, the REML criterion) on a balanced, an unbalanced
(with missing method x query values) and a realistic (per-query AP of an evaluation) table; the
ANOVA closed form of complete balanced designs (REML = the expected-mean-square estimators when
every component is inside its range, and the classic Satterthwaite formula); scipy's paired t test
on class means; and total on degenerate tables."""

from __future__ import annotations

import io
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from analysis_core.stats.class_mixed_model import _ClassREML, class_mixed_model

from .oracle import r_has

COLUMNS = ["term", "coef", "std_err", "t", "df", "p_value", "ci_low", "ci_high", "note", "unit", "n_units"]


def simulate(seed: int, n_classes: int = 12, queries: tuple[int, int] = (8, 8), n_methods: int = 3,
             missing: float = 0.0, sd: tuple[float, float, float, float] = (0.3, 0.15, 0.2, 0.1)) -> pd.DataFrame:
    """Values from the model itself: method means 0.5 + 0.05 m, random class, class x method,
    class:query effects and residual with standard deviations ``sd``; each class has a number of
    queries drawn from ``queries``; after each class's first query a (method, query) value is
    missing with probability ``missing``."""
    rng = np.random.default_rng(seed)
    rows = []
    for c in range(n_classes):
        u_class, u_cm = rng.normal(0, sd[0]), rng.normal(0, sd[1], n_methods)
        for q in range(rng.integers(queries[0], queries[1] + 1)):
            u_q = rng.normal(0, sd[2])
            for m in range(n_methods):
                if q > 0 and rng.random() < missing:
                    continue
                rows.append(dict(method=f"m{m}", query=f"{c}_{q}", label=f"k{c}",
                                 ap=0.5 + 0.05 * m + u_class + u_cm[m] + u_q + rng.normal(0, sd[3])))
    return pd.DataFrame(rows)


def realistic(seed: int = 4, n_classes: int = 10, n_items: int = 8, dim: int = 8) -> pd.DataFrame:
    """Per-query AP of a leave-one-out evaluation of two methods on Gaussian clusters: one shared
    base (class centres + item noise), each method adds its own noise with a scale drawn per class
    (so each method is better on some classes: a class x method interaction)."""
    import analysis_core as ac

    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_items)
    base = rng.normal(0, 1.0, (n_classes, dim))[y] + rng.normal(0, 1.0, (y.size, dim))
    scale_a, scale_b = rng.uniform(0.3, 1.2, n_classes), rng.uniform(0.3, 1.2, n_classes)
    xa = base + scale_a[y, None] * rng.normal(0, 1, base.shape)
    xb = base + scale_b[y, None] * rng.normal(0, 1, base.shape)
    return ac.evaluate({"a": xa, "b": xb}, y).per_query()[["method", "query", "label", "ap"]]


# lme4's default optimiser (nloptwrap's BOBYQA) stops at absolute changes of 1e-8 in the REML
# criterion, which leaves the relative standard deviations ~1e-4 off the optimum (measured: standard
# errors 1.4e-6 and Satterthwaite df 4e-5 relative from ours on UNBALANCED); the reference here is
# lmerTest at the optimum, so the optimiser runs to 1e-14.
LMERTEST = """
suppressMessages(library(lmerTest))
d <- read.csv(file("stdin"))
d$method <- factor(d$method, levels = sort(unique(as.character(d$method))))
d$class <- factor(d$label)
d$query <- factor(d$query)
ctrl <- lmerControl(optimizer = "nloptwrap", optCtrl = list(xtol_abs = 1e-14, ftol_abs = 1e-14, xtol_rel = 0,
                                                            ftol_rel = 0, maxeval = 1e5))
fit <- lmer(ap ~ method + (1 | class) + (1 | class:method) + (1 | class:query), data = d, REML = TRUE,
            control = ctrl)
cs <- coef(summary(fit))
vc <- as.data.frame(VarCorr(fit))
v <- setNames(vc$vcov, vc$grp)[c("class", "class:method", "class:query", "Residual")]
cat(sprintf("%.17g", c(cs[, "Estimate"], cs[, "Std. Error"], cs[, "df"], v, REMLcrit(fit))), sep = "\\n")
"""

DATA = {
    "balanced": lambda: simulate(1),
    "unbalanced": lambda: simulate(2, n_classes=10, queries=(3, 15), missing=0.2),
    "realistic": lambda: realistic(),
}


@pytest.mark.r_oracle
@pytest.mark.skipif(not r_has("lmerTest"), reason="Rscript with lme4 and lmerTest missing")
@pytest.mark.parametrize("name", list(DATA))
def test_lmertest_agrees(name):
    """``lmerTest::lmer(ap ~ method + (1|class) + (1|class:method) + (1|class:query), REML = TRUE)``
    and ``coef(summary(fit))``: estimates, standard errors and Satterthwaite df to 1e-6 (df
    relative: lmerTest takes numerical derivatives, numDeriv's Richardson extrapolation, measured
    ~2e-7 from our exact ones), variance components to 1e-6 relative, and the REML criterion: ours
    at lme4's estimates is lme4's (the same function) and ours at our optimum is no worse. Every
    data set has its variance components inside their range (checked), so that the comparison
    tests the whole fit."""
    df = DATA[name]()
    out = subprocess.run(["Rscript", "-e", LMERTEST], input=df.to_csv(index=False), capture_output=True, text=True,
                         check=True).stdout
    got = np.loadtxt(io.StringIO(out))
    res = class_mixed_model(df)
    t, p = res.table, len(res.table)
    assert res.converged and res.warnings == [], res.warnings
    fixef, se, dfs, variances, crit = got[:p], got[p:2 * p], got[2 * p:3 * p], got[3 * p:3 * p + 4], got[-1]
    assert (variances > 1e-3 * variances[-1]).all(), variances  # inside: no singular fit
    np.testing.assert_allclose(t["coef"], fixef, rtol=0, atol=1e-6)
    np.testing.assert_allclose(t["std_err"], se, rtol=0, atol=1e-6)
    np.testing.assert_allclose(t["std_err"], se, rtol=1e-6)
    np.testing.assert_allclose(t["df"], dfs, rtol=1e-6)
    ours = [res.class_variance, res.class_method_variance, res.query_variance, res.residual_variance]
    np.testing.assert_allclose(ours, variances, rtol=1e-6)
    model = _model(df)
    assert model.criterion(variances[:3] / variances[3]) == pytest.approx(crit, rel=1e-12)
    assert model.criterion(np.array(ours[:3]) / ours[3]) <= crit + 1e-12 * abs(crit)
    assert t.columns.tolist() == COLUMNS and (t["unit"] == "class").all()
    assert (t["n_units"] == df["label"].nunique()).all() and res.n_units == df["label"].nunique()
    assert res.n_obs == len(df)


def _model(df: pd.DataFrame) -> _ClassREML:
    """The REML criterion behind :func:`class_mixed_model` (for the criterion at lme4's estimates)."""
    method = pd.factorize(df["method"], sort=True)[0]
    cls = pd.factorize(df["label"].astype(str))[0]
    query = pd.factorize(pd.MultiIndex.from_arrays([df["label"].astype(str), df["query"].astype(str)]))[0]
    return _ClassREML(df["ap"].to_numpy(np.float64), cls, query, method, method.max() + 1, cls.max() + 1)


@st.composite
def balanced(draw) -> pd.DataFrame:
    n_methods, n_classes, n_queries = draw(st.integers(2, 4)), draw(st.integers(3, 10)), draw(st.integers(2, 6))
    sd = (draw(st.sampled_from([0.05, 0.3])), draw(st.sampled_from([0.05, 0.2])), draw(st.sampled_from([0.05, 0.2])),
          0.1)
    return simulate(draw(st.integers(0, 2**32 - 1)), n_classes, (n_queries, n_queries), n_methods, sd=sd)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(balanced())
def test_complete_balanced_designs_give_the_anova_closed_form(df):
    """C classes x Q queries x M methods, every value present: with every expected-mean-square
    estimate positive, REML is the ANOVA estimator (strata: class, class x method, query within
    class, residual), a method difference has variance ``2 MS_cm / (C Q)`` with (C - 1)(M - 1) df,
    the reference mean ``(MS_c + (M - 1) MS_cm) / (C Q M)`` with the classic Satterthwaite df."""
    a = df.assign(c=pd.factorize(df["label"])[0], q=df.groupby("label")["query"].transform(
        lambda s: pd.factorize(s)[0]), m=pd.factorize(df["method"], sort=True)[0])
    n_c, n_q, n_m = a["c"].max() + 1, a["q"].max() + 1, a["m"].max() + 1
    y = np.zeros((n_c, n_q, n_m))
    y[a["c"], a["q"], a["m"]] = a["ap"]
    grand, c, m = y.mean(), y.mean(axis=(1, 2)), y.mean(axis=(0, 1))
    cm, cq = y.mean(axis=1), y.mean(axis=2)
    ms_c = n_q * n_m * np.sum((c - grand) ** 2) / (n_c - 1)
    ms_cm = n_q * np.sum((cm - c[:, None] - m + grand) ** 2) / ((n_c - 1) * (n_m - 1))
    ms_q = n_m * np.sum((cq - c[:, None]) ** 2) / (n_c * (n_q - 1))
    ms_e = np.sum((y - cq[:, :, None] - cm[:, None, :] + c[:, None, None]) ** 2) / (n_c * (n_q - 1) * (n_m - 1))
    anova = ((ms_c - ms_cm - ms_q + ms_e) / (n_q * n_m), (ms_cm - ms_e) / n_q, (ms_q - ms_e) / n_m, ms_e)
    inside = min(anova[:3]) > 1e-3 * ms_e
    event("inside" if inside else "a component at or near the boundary")
    res = class_mixed_model(df)
    assert res.converged and res.table["p_value"].between(0, 1).all(), res.warnings
    if not inside:
        return
    got = (res.class_variance, res.class_method_variance, res.query_variance, res.residual_variance)
    np.testing.assert_allclose(got, anova, rtol=1e-8)
    t = res.table
    np.testing.assert_allclose(t["coef"], np.r_[m[0], m[1:] - m[0]], rtol=0, atol=1e-12)
    var_int = (ms_c + (n_m - 1) * ms_cm) / (n_c * n_q * n_m)
    se = np.r_[math.sqrt(var_int), np.full(n_m - 1, math.sqrt(2 * ms_cm / (n_c * n_q)))]
    np.testing.assert_allclose(t["std_err"], se, rtol=1e-8)
    df_int = (ms_c + (n_m - 1) * ms_cm) ** 2 / (ms_c**2 / (n_c - 1) + ((n_m - 1) * ms_cm) ** 2
                                                 / ((n_c - 1) * (n_m - 1)))
    np.testing.assert_allclose(t["df"], np.r_[df_int, np.full(n_m - 1, (n_c - 1) * (n_m - 1))], rtol=1e-6)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_classes=st.integers(3, 12), n_queries=st.integers(2, 6), seed=st.integers(0, 2**31 - 1))
def test_two_methods_give_the_paired_t_test_on_class_means_where_the_class_method_variance_is_inside(
        n_classes, n_queries, seed):
    """Two methods answering every query of C balanced classes: the method term's t test is
    scipy's paired t test on the per-class means of the per-query differences (a one-sample t
    test of the C class means, C - 1 df) whenever the class x method and class variances are
    inside their ranges: REML then estimates the class x method stratum's expected mean square by
    its mean square. (The class stratum's expectation holds the class x method variance too, so a
    class variance at 0 moves that estimate: measured, 3 classes x 2 queries, df 3.4 instead of 2.)"""
    from scipy import stats as sps

    df = simulate(seed, n_classes, (n_queries, n_queries), 2, sd=(0.3, 0.1, 0.2, 0.1))
    res = class_mixed_model(df)
    row = res.table.set_index("term").loc["method[m1]"]
    wide = df.pivot_table(index=["label", "query"], columns="method", values="ap")
    diff = (wide["m1"] - wide["m0"]).groupby(level="label").mean()
    means = wide.groupby(level="label").mean()
    if res.class_method_variance == 0.0 or res.class_variance == 0.0:
        event("class or class x method variance at the boundary")
        assert any("variance estimated at 0 (boundary" in w for w in res.warnings)
        return
    event("inside")
    ref = sps.ttest_rel(means["m1"], means["m0"])
    assert ref.statistic == pytest.approx(sps.ttest_1samp(diff, 0).statistic, rel=1e-10)
    assert row["df"] == pytest.approx(n_classes - 1, rel=1e-6)
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-6)
    assert row["p_value"] == pytest.approx(ref.pvalue, rel=1e-5)
    ci = ref.confidence_interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-6, abs=1e-9)


@st.composite
def degenerate_tables(draw):
    """1-3 methods x 1-4 classes x 1-4 queries per class, cells missing at random: constant
    values, values from {0, 0.5, 1}, continuous, identical methods, a method shifted by a
    constant, and sometimes a NaN or infinite value."""
    n_methods, n_classes = draw(st.integers(1, 3)), draw(st.integers(1, 4))
    kind = draw(st.sampled_from(["constant", "few", "continuous", "identical", "shifted"]))
    rows = []
    for c in range(n_classes):
        for q in range(draw(st.integers(1, 4))):
            base = draw(st.sampled_from([0.0, 0.5, 1.0])) if kind != "continuous" else draw(st.floats(0, 1))
            for m in range(n_methods):
                if not draw(st.booleans()) and draw(st.booleans()):
                    continue  # a missing (method, query)
                v = {"constant": 0.25, "identical": base, "shifted": base + 0.1 * m}.get(kind)
                if v is None:
                    v = draw(st.sampled_from([0.0, 0.5, 1.0])) if kind == "few" else draw(st.floats(0, 1))
                rows.append(dict(method=f"m{m}", query=f"{c}-{q}", label=c, ap=v))
    df = pd.DataFrame(rows, columns=["method", "query", "label", "ap"])
    bad = len(df) > 0 and draw(st.booleans())
    if bad:
        df.loc[draw(st.integers(0, len(df) - 1)), "ap"] = draw(st.sampled_from([np.nan, np.inf]))
    return df, kind, bad


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(degenerate_tables(), st.sampled_from([0.01, 0.05, 0.1]))
def test_class_mixed_model_is_total_on_degenerate_tables(case, alpha):
    df, kind, bad = case
    res = class_mixed_model(df, alpha)
    t = res.table
    event("defined" if t["p_value"].notna().all() else (res.warnings or ["?"])[-1][:70])
    assert t.columns.tolist() == COLUMNS and t["term"].iloc[0] == "Intercept"
    assert set(t["term"].iloc[1:]) <= {f"method[{m}]" for m in df["method"]}
    p = t["p_value"].to_numpy(np.float64)
    assert ((p[np.isfinite(p)] >= 0) & (p[np.isfinite(p)] <= 1)).all()
    assert t.loc[~np.isfinite(p), "note"].str.startswith("undefined: ").all()
    assert np.isfinite(p).all() or any("undefined" in w for w in res.warnings)
    if kind in ("constant", "identical", "shifted") and not bad:  # no information about a difference
        assert not (p < alpha).any(), (t, res.warnings)


def _undefined_because(df: pd.DataFrame, why: str) -> None:
    res = class_mixed_model(df)
    assert res.table["p_value"].isna().all() and not res.converged
    assert res.table["note"].str.contains(why, regex=False).all() and any(why in w for w in res.warnings), res.warnings


def test_one_method_one_class_constant_and_identical_methods_are_undefined_with_the_reason():
    df = simulate(3, n_classes=4, queries=(3, 3), n_methods=2)
    _undefined_because(df[df["method"] == "m0"], "compares methods; give at least two")
    _undefined_because(df[df["label"] == "k0"], "1 class(es)")
    _undefined_because(df.assign(ap=0.5), "every value is the same")
    identical = df.assign(ap=df.groupby("query")["ap"].transform("first"))
    _undefined_because(identical, "the methods agree on every query")
    shifted = identical.assign(ap=identical["ap"] + 0.1 * (identical["method"] == "m1"))
    _undefined_because(shifted, "fit every value exactly (zero residual variance)")
    _undefined_because(df.iloc[:0], "compares methods")
    _undefined_because(df.assign(ap=np.nan), "compares methods")


def test_two_classes_fit_with_one_class_method_degree_of_freedom():
    """Two classes: the method effect has (C - 1)(M - 1) = 1 df against the class x method term,
    so its interval is wide, as it should be; the fit is defined."""
    res = class_mixed_model(simulate(5, n_classes=2, queries=(6, 6), n_methods=2, sd=(0.3, 0.2, 0.2, 0.1)))
    row = res.table.set_index("term").loc["method[m1]"]
    assert res.converged and 0 <= row["p_value"] <= 1 and res.n_units == 2
    if res.class_method_variance > 0:
        assert row["df"] == pytest.approx(1.0, rel=1e-6)


def test_classes_of_one_query_leave_out_the_terms_they_cannot_separate():
    """Every class one query: the class:query intercept is the class intercept, the class x
    method term is the residual; both are left out with a warning, and the model is value ~
    method + (1 | class), i.e. the randomized-block analysis of the classes — for two methods
    the paired t test over classes (scipy), unless the class variance sits at 0."""
    from scipy import stats as sps

    df = simulate(6, n_classes=9, queries=(1, 1), n_methods=2, sd=(0.3, 0.1, 0.0, 0.1))
    res = class_mixed_model(df)
    assert any("(class:query) variance cannot be told apart" in w for w in res.warnings)
    assert any("(class:method) variance cannot be told apart" in w for w in res.warnings)
    assert res.query_variance == 0.0 and res.class_method_variance == 0.0 and res.class_variance > 0
    wide = df.pivot(index="label", columns="method", values="ap")
    ref = sps.ttest_rel(wide["m1"], wide["m0"])
    row = res.table.set_index("term").loc["method[m1]"]
    assert row["t"] == pytest.approx(ref.statistic, rel=1e-6) and row["df"] == pytest.approx(8, rel=1e-6)


def test_a_class_method_variance_at_the_boundary_is_a_singular_fit_with_a_warning():
    """Per-query differences whose class means are all equal: the class x method mean square is
    0, below the residual's, so REML puts that variance at 0 (lme4: a singular fit); the method
    term is then tested against the pooled class x method and residual strata."""
    rng = np.random.default_rng(7)
    n_c, n_q = 6, 5
    rows = []
    for c in range(n_c):
        noise = rng.normal(0, 0.1, n_q)
        noise -= noise.mean()  # every class the same mean difference: no class x method variation
        base = rng.normal(0, 0.3) + rng.normal(0, 0.2, n_q)
        for q in range(n_q):
            rows += [dict(method="a", query=f"{c}_{q}", label=c, ap=0.5 + base[q]),
                     dict(method="b", query=f"{c}_{q}", label=c, ap=0.55 + base[q] + noise[q])]
    df = pd.DataFrame(rows)
    res = class_mixed_model(df)
    assert res.class_method_variance == 0.0 and res.converged
    assert any("(class:method) variance estimated at 0 (boundary" in w for w in res.warnings)
    # with that variance at 0 the model is value ~ method + (1|class) + (1|class:query): the method
    # difference has variance 2 s2 / (C Q), s2 the pooled within-class mean square of the
    # differences / 2, which here is the residual of the paired t test over all queries
    d = df.pivot(index="query", columns="method", values="ap")
    diff = d["b"] - d["a"]
    row = res.table.set_index("term").loc["method[b]"]
    assert row["coef"] == pytest.approx(diff.mean(), abs=1e-12)
    assert row["std_err"] == pytest.approx(diff.std(ddof=1) / math.sqrt(len(diff)), rel=1e-8)


def test_non_finite_values_are_left_out():
    df = simulate(8, n_classes=5, queries=(4, 4))
    res = class_mixed_model(df)
    bad = df.copy()
    bad.loc[[3, 10], "ap"] = [np.nan, np.inf]
    res_bad = class_mixed_model(bad)
    assert res_bad.n_obs == len(df) - 2 and res.n_obs == len(df)
    res_dropped = class_mixed_model(df.drop(index=[3, 10]))
    np.testing.assert_allclose(res_bad.table["coef"], res_dropped.table["coef"], rtol=0, atol=0)


def test_alpha_changes_only_the_intervals():
    df = simulate(9, n_classes=6, queries=(3, 5), missing=0.1)
    a, b = class_mixed_model(df, 0.05).table, class_mixed_model(df, 0.2).table
    pd.testing.assert_frame_equal(a.drop(columns=["ci_low", "ci_high"]), b.drop(columns=["ci_low", "ci_high"]))
    assert ((b["ci_high"] - b["ci_low"]) < (a["ci_high"] - a["ci_low"])).all()
