"""The run-level mixed model ``value ~ family + (1 | family:run) + (1 | class) + (1 | class:family)
+ (1 | query)`` against lme4 + lmerTest through Rscript (estimates, standard errors, Satterthwaite
df, variance components, the REML criterion, and a contrast between two non-reference families
against ``contest1D``) on a balanced and an unbalanced table (unequal runs per family, runs missing
queries); and totality on degenerate tables (no raise, nothing significant without information),
with typed errors on bad input."""

from __future__ import annotations

import io
import subprocess

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from analysis_core.errors import InputError
from analysis_core.stats.run_mixed_model import _RunREML, run_mixed_model

from .oracle import r_has

COEFFICIENT_COLUMNS = ["term", "estimate", "se", "df", "t", "p_value", "ci_low", "ci_high", "note"]
PAIR_COLUMNS = ["family_a", "family_b", "estimate", "se", "df", "t", "p_value", "ci_low", "ci_high", "note"]


def simulate(seed: int, runs: tuple[int, ...] = (3, 3, 3), n_classes: int = 8, per_class: int = 6,
             sd: tuple[float, ...] = (0.05, 0.1, 0.05, 0.15, 0.1), missing: float = 0.0,
             effect: float = 0.03) -> pd.DataFrame:
    """Values from the model itself: family f's mean 0.5 + effect x f; run, class, class x family,
    query and residual effects with standard deviations ``sd``; every run answers ``per_class``
    queries of each class, each (run, query) value missing with probability ``missing``."""
    rng = np.random.default_rng(seed)
    q_class = np.repeat(np.arange(n_classes), per_class)
    u_class, u_query = rng.normal(0, sd[1], n_classes), rng.normal(0, sd[3], q_class.size)
    frames = []
    for f, n_runs in enumerate(runs):
        u_cf = rng.normal(0, sd[2], n_classes)
        for r in range(n_runs):
            v = (0.5 + effect * f + rng.normal(0, sd[0]) + u_class[q_class] + u_cf[q_class] + u_query
                 + rng.normal(0, sd[4], q_class.size))
            keep = rng.random(q_class.size) >= missing
            frames.append(pd.DataFrame({"family": f"f{f}", "run": f"seed{r}", "class": [f"c{c}" for c in q_class[keep]],
                                        "query": [f"q{q}" for q in np.flatnonzero(keep)], "value": v[keep]}))
    return pd.concat(frames, ignore_index=True)


# lme4's default optimiser stops ~1e-5 short of the optimum in the relative standard deviations
# (see test_class_mixed_model); the reference here is lmerTest at the optimum, so it runs to 1e-14.
LMERTEST = """
suppressMessages(library(lmerTest))
d <- read.csv(file("stdin"))
d$family <- factor(d$family, levels = sort(unique(as.character(d$family))))
ctrl <- lmerControl(optimizer = "nloptwrap", optCtrl = list(xtol_abs = 1e-14, ftol_abs = 1e-14, xtol_rel = 0,
                                                            ftol_rel = 0, maxeval = 1e5))
fit <- lmer(value ~ family + (1 | family:run) + (1 | class) + (1 | class:family) + (1 | query), data = d,
            REML = TRUE, control = ctrl)
cs <- coef(summary(fit))
vc <- as.data.frame(VarCorr(fit))
v <- setNames(vc$vcov, vc$grp)[c("family:run", "class", "class:family", "query", "Residual")]
ct <- contest1D(fit, c(0, 1, -1))
cat(sprintf("%.17g", c(cs[, "Estimate"], cs[, "Std. Error"], cs[, "df"], v, REMLcrit(fit), ct[["Estimate"]],
                       ct[["Std. Error"]], ct[["df"]], ct[["Pr(>|t|)"]])), sep = "\\n")
"""

DATA = {
    "balanced": lambda: simulate(1),
    "unbalanced": lambda: simulate(2, runs=(3, 4, 3), n_classes=7, missing=0.15),
}


@pytest.mark.skipif(not r_has("lmerTest"), reason="Rscript with lme4 and lmerTest missing")
@pytest.mark.parametrize("name", list(DATA))
def test_lmertest_agrees(name):
    """``lmerTest::lmer(value ~ family + (1|family:run) + (1|class) + (1|class:family) + (1|query),
    REML = TRUE)``: ``coef(summary(fit))`` estimates, standard errors and Satterthwaite df, the
    variance components, and ``contest1D(fit, c(0, 1, -1))`` (family f1 - f2, neither the
    reference) to 1e-6 relative; the REML criterion at lme4's estimates is lme4's, and ours at our
    optimum is no worse. Every component is inside its range (checked): the whole fit is tested."""
    df = DATA[name]()
    out = subprocess.run(["Rscript", "-e", LMERTEST], input=df.to_csv(index=False), capture_output=True, text=True,
                         check=True).stdout
    got = np.loadtxt(io.StringIO(out))
    res = run_mixed_model(df)
    assert res.converged and res.warnings == [] and res.note == "", res.warnings
    fixef, se, dfs, variances, crit = got[:3], got[3:6], got[6:9], got[9:14], got[14]
    assert (variances > 1e-2 * variances[-1]).all(), variances  # inside: no singular fit
    c = res.coefficients
    assert c.columns.tolist() == COEFFICIENT_COLUMNS and c["term"].tolist() == ["Intercept", "family[f1]", "family[f2]"]
    np.testing.assert_allclose(c["estimate"], fixef, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(c["se"], se, rtol=1e-6)
    np.testing.assert_allclose(c["df"], dfs, rtol=1e-6)
    v = res.variance_components
    assert v["component"].tolist() == ["family:run", "class", "class:family", "query", "residual"]
    np.testing.assert_allclose(v["variance"], variances, rtol=1e-6)
    np.testing.assert_allclose(v["share"], variances / variances.sum(), rtol=1e-6)
    model = _model(df)
    assert model.criterion(variances[:4] / variances[4]) == pytest.approx(crit, rel=1e-12)
    ours = v["variance"].to_numpy()
    assert model.criterion(ours[:4] / ours[4]) <= crit + 1e-12 * abs(crit)
    contrast = res.contrast("f1", "f2")
    assert contrast.columns.tolist() == PAIR_COLUMNS
    np.testing.assert_allclose(contrast[["estimate", "se", "df", "p_value"]].to_numpy()[0], got[15:19], rtol=1e-6)
    pairs = res.pairs().set_index(["family_a", "family_b"])
    pd.testing.assert_series_equal(pairs.loc[("f1", "f2")], contrast.set_index(["family_a", "family_b"]).iloc[0])
    # a pair with the reference is its coefficient, sign reversed
    np.testing.assert_allclose(pairs.loc[("f0", "f1"), ["estimate", "se", "df"]].to_numpy(np.float64),
                               [-fixef[1], se[1], dfs[1]], rtol=1e-6)
    assert res.n_runs == df.groupby("family")["run"].nunique().to_dict()
    assert (res.n_classes, res.n_queries, res.n_obs) == (df["class"].nunique(), df["query"].nunique(), len(df))


def _model(df: pd.DataFrame) -> _RunREML:
    """The REML criterion behind :func:`run_mixed_model` (for the criterion at lme4's estimates)."""
    family = pd.factorize(df["family"], sort=True)[0]
    run = pd.factorize(df["family"] + "/" + df["run"])[0]
    cls = pd.factorize(df["class"])[0]
    cf = pd.factorize(df["class"] + "/" + df["family"])[0]
    query = pd.factorize(df["query"])[0]
    model = _RunREML(df["value"].to_numpy(np.float64), family, [run, cls, cf], query, family.max() + 1)
    return model


def test_one_family_gives_the_intercept_and_the_variance_components():
    df = simulate(3, runs=(4,), n_classes=5)
    res = run_mixed_model(df)
    assert res.coefficients["term"].tolist() == ["Intercept"] and res.pairs().empty
    assert any("one family" in w for w in res.warnings)
    # class:family is the class with one family: left out, said so
    v = res.variance_components.set_index("component")
    assert np.isnan(v.loc["class:family", "variance"]) and v.loc["class:family", "note"].startswith("left out")
    assert np.isfinite(v.drop(index="class:family")["variance"]).all()
    # the intercept is the grand mean of a balanced table (GLS weights are equal)
    assert res.coefficients["estimate"].iloc[0] == pytest.approx(df["value"].mean(), abs=1e-12)


def test_one_run_per_family_says_nothing_about_families():
    """The run is then the family: the seed-to-seed variance is not identifiable, and a family
    difference cannot be told from it; the other variance components are given."""
    df = simulate(4, runs=(1, 1, 1), sd=(0.3, 0.1, 0.05, 0.15, 0.1), effect=0.5)
    res = run_mixed_model(df)
    assert res.coefficients["p_value"].isna().all() and res.pairs()["p_value"].isna().all()
    assert "every family has one run" in res.note and (res.coefficients["note"] == res.note).all()
    assert any("(family:run) variance cannot be told apart" in w for w in res.warnings)
    v = res.variance_components.set_index("component")
    assert np.isnan(v.loc["family:run", "variance"]) and np.isfinite(v.drop(index="family:run")["variance"]).all()


def test_one_run_in_one_family_still_estimates_the_run_variance_from_the_others():
    res = run_mixed_model(simulate(5, runs=(1, 3)))
    assert res.note == "" and np.isfinite(res.coefficients["p_value"]).all()
    assert res.variance_components["variance"].notna().all()


def test_two_classes_fit():
    res = run_mixed_model(simulate(6, runs=(3, 3), n_classes=2, per_class=10))
    assert res.note == "" and res.n_classes == 2
    p = res.coefficients["p_value"].to_numpy()
    assert ((p >= 0) & (p <= 1)).all()


def _undefined(df: pd.DataFrame, why: str):
    res = run_mixed_model(df)
    assert res.coefficients["p_value"].isna().all() and res.pairs()["p_value"].isna().all(), res.coefficients
    assert why in res.note and any(why in w for w in res.warnings), (res.note, res.warnings)
    return res


def test_no_information_is_undefined_with_the_reason():
    df = simulate(7, runs=(2, 3))
    _undefined(df.assign(value=0.5), "every value is the same")
    # every run gives each query the same value, the families shifted: fixed + query fit exactly
    query_effect = df.groupby("query")["value"].transform("first")
    _undefined(df.assign(value=query_effect + 0.1 * (df["family"] == "f1")), "zero residual variance")
    _undefined(df.assign(value=np.nan), "no values")
    res = _undefined(df.iloc[:0], "no values")
    assert res.coefficients["term"].tolist() == ["Intercept"]


def test_nan_values_are_left_out_and_counted():
    df = simulate(8, runs=(2, 3))
    bad = df.copy()
    bad.loc[[3, 50], "value"] = np.nan
    res = run_mixed_model(bad)
    ref = run_mixed_model(df.drop(index=[3, 50]))
    assert res.n_dropped == 2 and res.n_obs == len(df) - 2 and any("2 NaN value(s)" in w for w in res.warnings)
    np.testing.assert_allclose(res.coefficients["estimate"], ref.coefficients["estimate"], rtol=0, atol=0)


@pytest.mark.parametrize("change, says", [
    (lambda d: d.drop(columns="run"), "missing column(s) run"),
    (lambda d: d.assign(value=np.where(d.index == 4, np.inf, d["value"])), "infinite"),
    (lambda d: d.assign(value="x"), "not numeric"),
    (lambda d: d.assign(family=d["family"].where(d.index != 2)), "missing labels in column(s) family"),
    (lambda d: pd.concat([d, d.iloc[:1]]), "more than once"),
    (lambda d: d.assign(**{"class": np.where(d.index == 0, "other", d["class"])}), "appears under 2 classes"),
])
def test_bad_input_is_a_typed_error(change, says):
    with pytest.raises(InputError, match=None) as err:
        run_mixed_model(change(simulate(9, runs=(2, 2), n_classes=3, per_class=2)))
    assert says in str(err.value) and "Fix:" in str(err.value)


def test_alpha_changes_only_the_intervals_and_unknown_families_are_refused():
    df = simulate(10, runs=(2, 3), missing=0.1)
    a, b = run_mixed_model(df, 0.05), run_mixed_model(df, 0.2)
    ci = ["ci_low", "ci_high"]
    pd.testing.assert_frame_equal(a.coefficients.drop(columns=ci), b.coefficients.drop(columns=ci))
    assert ((b.coefficients["ci_high"] - b.coefficients["ci_low"])
            < (a.coefficients["ci_high"] - a.coefficients["ci_low"])).all()
    pd.testing.assert_frame_equal(a.pairs(alpha=0.2), b.pairs())
    with pytest.raises(InputError, match="no family 'zz'"):
        a.contrast("f0", "zz")


@st.composite
def degenerate_tables(draw):
    """1-3 families x 1-3 runs x 1-3 classes x 1-3 queries, values missing at random: constant,
    from {0, 0.5, 1}, continuous, equal across runs and families (a function of the query), or
    families shifted by constants."""
    n_families, n_classes = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    runs = [draw(st.integers(1, 3)) for _ in range(n_families)]
    queries = [draw(st.integers(1, 3)) for _ in range(n_classes)]
    kind = draw(st.sampled_from(["constant", "few", "continuous", "identical", "shifted"]))
    base = {(c, q): draw(st.sampled_from([0.0, 0.5, 1.0])) for c in range(n_classes) for q in range(queries[c])}
    rows = []
    for f in range(n_families):
        for r in range(runs[f]):
            for (c, q), b in base.items():
                if draw(st.integers(0, 4)) == 0:
                    continue
                v = {"constant": 0.25, "identical": b, "shifted": b + 0.1 * f}.get(kind)
                if v is None:
                    v = draw(st.sampled_from([0.0, 0.5, 1.0])) if kind == "few" else draw(st.floats(0, 1))
                rows.append(dict(family=f"f{f}", run=r, **{"class": c}, query=f"{c}-{q}", value=v))
    return pd.DataFrame(rows, columns=["family", "run", "class", "query", "value"]), kind


@settings(max_examples=40, deadline=None)
@given(degenerate_tables(), st.sampled_from([0.01, 0.05]))
def test_run_mixed_model_is_total_on_degenerate_tables(case, alpha):
    df, kind = case
    res = run_mixed_model(df, alpha)
    c, pairs = res.coefficients, res.pairs()
    event("defined" if c["p_value"].notna().all() else (res.note or "a df undefined")[:60])
    assert c.columns.tolist() == COEFFICIENT_COLUMNS and pairs.columns.tolist() == PAIR_COLUMNS
    n_f = df["family"].nunique()
    assert len(pairs) == n_f * (n_f - 1) // 2
    for p, note in ((c["p_value"], c["note"]), (pairs["p_value"], pairs["note"])):
        assert p.dropna().between(0, 1).all()
        assert note[p.isna()].str.startswith("undefined").all()
    if kind in ("constant", "identical", "shifted"):  # no information about a family difference
        assert not (c["p_value"].iloc[1:] < alpha).any() and not (pairs["p_value"] < alpha).any(), (c, res.warnings)
