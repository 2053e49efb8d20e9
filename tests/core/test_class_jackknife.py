"""The class unit: the jackknife over classes against a brute-force recomputation through the public
API (each class deleted from the data and the rest evaluated again), scipy's t distribution for the
intervals and p-values, and the edges (two classes, identical methods, a query sample, roles)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import analysis_core as ac
from analysis_core.stats.analysis import analyse
from analysis_core.stats.class_jackknife import class_groups, too_few_to_decide
from analysis_core.stats.variability import ap_frame, metric_frame


def _data(n_classes=6, per_class=5, d=8, seed=0, roles=False):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per_class)
    base = rng.normal(0, 1, (n_classes, d))[y] + rng.normal(0, 0.9, (y.size, d))
    X = {"a": (base + rng.normal(0, 0.5, base.shape)).astype(np.float32),
         "b": (base + rng.normal(0, 0.8, base.shape)).astype(np.float32)}
    role = None
    if roles:
        role = np.where(np.arange(y.size) % per_class < 2, "query", "gallery")
    return X, y, role


def _brute_replicates(X, y, metric_col, role=None):
    """Each class deleted, the rest evaluated from scratch through the public API: mean of the
    metric's per-query column over scored queries, per method."""
    out = []
    for c in np.unique(y):
        keep = y != c
        kw = {} if role is None else {"role": role[keep]}
        ev = ac.evaluate({m: x[keep] for m, x in X.items()}, y[keep], **kw)
        pq = ev.per_query()
        pq = pq[pq["n_positives"] > 0]
        out.append({m: pq.loc[pq["method"] == m, metric_col].mean() for m in X})
    return pd.DataFrame(out)


def _jackknife_se(reps: np.ndarray) -> float:
    g = reps.size
    return math.sqrt((g - 1) / g * np.sum((reps - reps.mean()) ** 2))


@pytest.mark.parametrize("roles", [False, True])
def test_intervals_and_differences_equal_a_brute_force_jackknife(roles):
    X, y, role = _data(roles=roles)
    ev = ac.evaluate(X, y, **({} if role is None else {"role": role}))
    jk = ev.class_jackknife()
    assert jk.n_units == 6 and not jk.why
    brute = _brute_replicates(X, y, "ap", role)
    full = ev.summary_frame().set_index("method")["map"]
    iv = jk.intervals(0.1).set_index(["method", "metric"])
    n_scored = ev.per_query().query("n_positives > 0").groupby("method").size()
    for m in X:
        se = _jackknife_se(brute[m].to_numpy())
        p, n = full[m], int(n_scored[m])
        if n * min(p, 1 - p) >= 10:  # Student t
            half = stats.t.ppf(0.95, 5) * se
            expected = (p - half, p + half)
        else:  # Korn & Graubard: Clopper-Pearson at the effective n, df-adjusted
            n_eff = min(n, p * (1 - p) / se**2) * (stats.t.ppf(0.95, n - 1) / stats.t.ppf(0.95, 5)) ** 2
            x = n_eff * p
            expected = (stats.beta.ppf(0.05, x, n_eff - x + 1), stats.beta.ppf(0.95, x + 1, n_eff - x))
        row = iv.loc[(m, "map")]
        assert row["estimate"] == pytest.approx(p, abs=1e-12)
        assert row["se"] == pytest.approx(se, rel=1e-9)
        assert (row["ci_low"], row["ci_high"]) == pytest.approx(expected, rel=1e-9)
        assert row["unit"] == "class" and row["n_units"] == 6
    d = jk.differences(0.05, metrics=["map"]).iloc[0]
    reps = (brute["a"] - brute["b"]).to_numpy()
    est = full["a"] - full["b"]
    se = _jackknife_se(reps)
    assert d["mean_diff"] == pytest.approx(est, abs=1e-12)
    assert d["se"] == pytest.approx(se, rel=1e-9)
    assert d["p_value"] == pytest.approx(2 * stats.t.sf(abs(est) / se, 5), rel=1e-9)
    assert (d["p_value"] < 0.05) == (not d["ci_low"] <= 0 <= d["ci_high"])  # the test is the interval's


def test_groups_of_classes_partition_every_class_once():
    labels = np.repeat(np.arange(53), 3)
    groups = class_groups(labels, 20, seed=4)
    assert len(groups) == 20
    flat = np.concatenate(groups)
    assert np.array_equal(np.sort(flat), np.arange(53))
    assert {g.size for g in groups} <= {2, 3}
    assert [g.tolist() for g in class_groups(labels, 20, seed=4)] == [g.tolist() for g in groups]
    assert [g.tolist() for g in class_groups(np.arange(5), 20, 0)] == [[0], [1], [2], [3], [4]]


def test_grouped_jackknife_deletes_whole_groups():
    X, y, _ = _data(n_classes=7, per_class=4)
    ev = ac.evaluate(X, y)
    jk = ev.class_jackknife(max_groups=3, seed=1)
    assert jk.n_units == 3 and jk.notes
    for g, members in enumerate(jk.groups):
        keep = ~np.isin(y, members)
        sub = ac.evaluate({m: x[keep] for m, x in X.items()}, y[keep]).summary_frame().set_index("method")["map"]
        assert jk.replicates[g, 0, jk.metrics.index("map")] == pytest.approx(sub["a"], abs=1e-12)


def test_two_classes_are_undefined_with_the_reason_and_identical_methods_never_differ():
    X, y, _ = _data(n_classes=2, per_class=6)
    jk = ac.evaluate(X, y).class_jackknife()
    assert "at least 3" in jk.why
    d = jk.differences(0.05)
    assert d["p_value"].isna().all() and not d["reject"].any() and d["note"].str.contains("undefined").all()
    X, y, _ = _data(n_classes=8, per_class=4)
    same = ac.evaluate({"a": X["a"], "copy": X["a"].copy()}, y).class_jackknife().differences(0.05)
    assert (same["mean_diff"] == 0).all() and not same["reject"].any()
    assert (same["p_value"] == 1).all()


def test_few_classes_give_an_interval_and_no_decision():
    X, y, _ = _data(n_classes=4, per_class=6)
    d = ac.evaluate(X, y).class_jackknife().differences(0.05)
    assert too_few_to_decide(4, 0.05) and not too_few_to_decide(6, 0.05) and too_few_to_decide(5, 0.05)
    varies = d["se"] > 0  # (hit rates of 1 in every replicate do not vary: "no difference", p = 1)
    assert varies.sum() >= 5 and d.loc[varies, "p_value"].isna().all() and not d["reject"].any()
    assert np.isfinite(d["ci_low"]).all() and d.loc[varies, "note"].str.contains("too few to decide").all()


def test_a_query_sample_has_no_class_unit_and_says_why():
    X, y, _ = _data(n_classes=6, per_class=8)
    jk = ac.evaluate(X, y, query_sample=20).class_jackknife()
    assert "query sample" in jk.why
    assert jk.intervals()["note"].str.contains("query sample").all()


def test_analyse_names_the_unit_and_query_unit_keeps_the_per_query_tests():
    X, y, _ = _data(n_classes=8, per_class=5)
    ev = ac.evaluate(X, y)
    ap, long = ap_frame(ev), metric_frame(ev)
    by_query = analyse(ap, metrics=long)  # no jackknife given: the query unit, said in the warnings
    assert by_query.unit == "query" and (by_query.paired["unit"] == "query").all()
    assert (by_query.paired["n_units"] == 40).all()
    assert any("query unit" in w for w in by_query.warnings)
    by_class = analyse(ap, metrics=long, jackknife=ev.class_jackknife())
    assert by_class.unit == "class" and by_class.n_units == 8
    assert set(by_class.paired["metric"]) == set(by_query.paired["metric"])
    assert (by_class.paired["unit"] == "class").all() and (by_class.paired["n_units"] == 8).all()
    with pytest.raises(ac.InputError, match="jackknife"):
        analyse(ap, metrics=long, unit="class")


def _count_passes(monkeypatch) -> list:
    from analysis_core.engine import core

    calls: list = []
    original = core.run_pass
    monkeypatch.setattr(core, "run_pass", lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


@pytest.mark.parametrize("roles", [False, True])
def test_new_cutoffs_give_the_jackknife_of_a_fresh_evaluation_without_a_pass(roles, monkeypatch):
    """The jackknife of ``with_ks(new)`` is a view of the replicates kept for the old cutoffs: the
    same intervals and differences as the jackknife of a fresh ``evaluate(..., ks=new)``, exactly,
    with no pass; its new cutoff columns equal each class deleted and the rest evaluated again at
    the new cutoffs (brute force). Cutoffs beyond those kept (above 32) evaluate again, one pass per
    method, which counts the replicates too."""
    X, y, role = _data(n_classes=7, per_class=6, roles=roles)
    kw = {} if role is None else {"role": role}
    base = ac.evaluate(X, y, ks=(1, 2, 4, 8), **kw)
    base.class_jackknife()
    new = [(3, 5, 16), (1,), (2, 32), (1, 2, 4, 8, 16, 32)]
    fresh = {ks: ac.evaluate(X, y, ks=ks, **kw).class_jackknife() for ks in new}
    calls = _count_passes(monkeypatch)
    for ks, want in fresh.items():
        got = base.with_ks(ks).with_design(None).class_jackknife()
        assert got.metrics == want.metrics and got.groups == want.groups
        np.testing.assert_array_equal(got.replicates, want.replicates)
        np.testing.assert_array_equal(got.estimate, want.estimate)
        for a in (0.01, 0.05):
            pd.testing.assert_frame_equal(got.intervals(a), want.intervals(a), check_exact=True)
            pd.testing.assert_frame_equal(got.differences(a), want.differences(a), check_exact=True)
    assert calls == []
    for g, c in enumerate(sorted(set(y))):  # brute force at the new cutoffs (one class per group)
        keep = y != c
        pq = ac.evaluate({m: x[keep] for m, x in X.items()}, y[keep], ks=(3, 5, 16),
                         **({} if role is None else {"role": role[keep]})).per_query().query("n_positives > 0")
        jk = fresh[(3, 5, 16)]
        for i, m in enumerate(jk.methods):
            for name, col in (("precision_at_16", "precision_at_16"), ("recall_at_5", "recall_at_5")):
                want_mean = pq.loc[pq["method"] == m, col].mean()
                assert jk.replicates[g, i, jk.metrics.index(name)] == pytest.approx(want_mean, abs=1e-12)
    deep = base.with_ks((1, 40)).class_jackknife()
    assert len(calls) == 2  # the evaluation again (40 is beyond the kept cutoffs): its passes count the replicates
    pd.testing.assert_frame_equal(deep.intervals(), ac.evaluate(X, y, ks=(1, 40), **kw).class_jackknife().intervals(),
                                  check_exact=True)
