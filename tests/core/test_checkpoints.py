"""Checkpoints over training on the training demo: values, intervals, best, best vs last."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from analysis_core import evaluate, load_files
from analysis_core.stats.checkpoints import checkpoint_analysis

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def analysis():
    ds = load_files([ROOT / "demo_data" / "training.npz"])
    evs = {sp: evaluate(ds, split=sp) for sp in ("train", "test_unseen")}
    return evs, checkpoint_analysis(evs, unit="query")


def test_at_the_class_unit_intervals_and_best_vs_last_come_from_the_jackknife_and_3_classes_decide_nothing(analysis):
    evs, _ = analysis
    ca = checkpoint_analysis(evs)  # the default unit: class
    t = ca.table[ca.table["metric"] == "map"]
    assert (t["unit"] == "class").all()
    for r in t.itertuples():
        jk = evs[r.split].class_jackknife()
        iv = jk.intervals(0.05).set_index(["method", "metric"]).loc[(r.method, "map")]
        assert r.n_units == jk.n_units == {"train": 7, "test_unseen": 3}[r.split]
        assert (r.ci_low, r.ci_high) == pytest.approx((max(0.0, iv["ci_low"]), min(1.0, iv["ci_high"])), abs=1e-12)
    tests = ca.tests.set_index(["split", "family", "metric"])
    row = tests.loc[("test_unseen", "mlp64", "map")]
    want = evs["test_unseen"].class_jackknife().differences(0.05, pairs=[(row["best"], row["last"])], metrics=["map"])
    assert row["mean_diff"] == pytest.approx(want["mean_diff"].iloc[0], abs=1e-12)
    assert row["unit"] == "class" and row["n_units"] == 3
    assert np.isnan(row["p_value"]) and "too few to decide" in row["note"]  # 3 classes: no claim, an interval


def test_checkpoint_table_holds_the_summary_values_in_step_order_with_intervals(analysis):
    evs, ca = analysis
    t = ca.table
    assert set(t["family"]) == {"mlp32", "mlp64"}
    for (split, _family), part in t[t["metric"] == "map"].groupby(["split", "family"]):
        assert part["step"].tolist() == [0, 1, 3, 10, 30]
        for r in part.itertuples():
            pq = evs[split].per_query(r.method)
            ap = pq.loc[pq["n_positives"] > 0, "ap"].to_numpy()
            assert r.value == evs[split].summary()["methods"][r.method]["map"]["expected"]
            half = stats.t.ppf(0.975, ap.size - 1) * ap.std(ddof=1) / np.sqrt(ap.size)
            assert (r.ci_low, r.ci_high) == pytest.approx((r.value - half, r.value + half), abs=1e-12)
        assert part.loc[part["is_best"], "value"].tolist() == [part["value"].max()]


def test_best_against_last_is_the_paired_difference_of_the_two_checkpoints(analysis):
    evs, ca = analysis
    row = ca.tests.set_index(["split", "family", "metric"]).loc[("test_unseen", "mlp64", "map")]
    assert row["best"] == "mlp64_e0" and row["last"] == "mlp64_e30"  # the unseen classes get worse with training
    ev = evs["test_unseen"]
    a, b = (ev.per_query(m).query("n_positives > 0").set_index("query")["ap"] for m in (row["best"], row["last"]))
    d = (a - b).to_numpy()
    assert row["mean_diff"] == pytest.approx(d.mean(), abs=1e-12)
    ci = stats.ttest_1samp(d, 0).confidence_interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert row["p_value"] < 0.01
    p1 = ca.tests.set_index(["split", "family", "metric"]).loc[("test_unseen", "mlp64", "precision_at_1")]
    if p1["test"] == "McNemar exact":
        h = {m: ev.per_query(m).query("n_positives > 0").set_index("query")["precision_at_1"]
             for m in (p1["best"], p1["last"])}
        only_best = int(((h[p1["best"]] == 1) & (h[p1["last"]] == 0)).sum())
        only_last = int(((h[p1["best"]] == 0) & (h[p1["last"]] == 1)).sum())
        assert p1["p_value"] == pytest.approx(stats.binomtest(only_best, only_best + only_last).pvalue, rel=1e-9)


def test_undefined_intervals_and_one_member_families_say_why():
    """A family of one checkpoint (``a_e5`` beside ``b_e1``, ``b_e2``) has nothing to compare:
    the tests row says so instead of "the last checkpoint is the best". JSD (a statistic of all
    pairs) has no interval, and the table's note says why; a defined interval has no note."""
    from analysis_core.io import Dataset

    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(4), 3)
    ds = Dataset(labels=y, embeddings={m: rng.standard_normal((y.size, 4)) for m in ("a_e5", "b_e1", "b_e2")})
    ca = checkpoint_analysis({"all": evaluate(ds)}, n_permutations=200)
    tests = ca.tests.set_index("family")
    assert (tests.loc[["a"], "note"] == "one checkpoint in this family: nothing to compare").all()
    assert tests.loc[["a"], "mean_diff"].isna().all()
    assert not tests.loc[["b"], "note"].str.contains("nothing to compare").any()
    t = ca.table
    assert t["ci_low"].isna().any()
    assert (t.loc[t["ci_low"].isna(), "note"] != "").all()
    assert t.loc[t["metric"] == "jsd", "note"].str.contains("all pairs").all()
    assert (t.loc[t["ci_low"].notna(), "note"] == "").all()


def test_methods_without_a_step_beside_checkpoints_are_their_own_families_not_dropped():
    """``baseline`` beside ``mlp_e1``, ``mlp_e2`` was missing from the Training page's figure and
    tables with no note; a method named like a family (``mlp``) must not merge into it."""
    from analysis_core.io import Dataset
    from analysis_core.stats.checkpoints import families_of, without_step

    methods = ["mlp_e1", "mlp_e2", "baseline", "mlp"]
    fams = families_of(methods)
    assert fams == {"mlp": [("mlp_e1", 1), ("mlp_e2", 2)], "baseline": [("baseline", 0)],
                    "mlp (no step)": [("mlp", 0)]}
    assert without_step(methods) == ["baseline", "mlp"] and without_step(["a", "b"]) == []
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 5)
    ds = Dataset(labels=y, embeddings={m: rng.normal(size=(20, 4)) for m in methods})
    ca = checkpoint_analysis({"all": evaluate(ds)}, n_permutations=100)
    assert set(ca.table["method"]) == set(methods)


@pytest.mark.slow
def test_methods_without_a_step_are_never_a_training_curve():
    """Unrelated methods (or runs named by seed) in their order are no training run: no family,
    no checkpoint table or figure in the report, and the report says why (the digits demo's
    lda9, pca16, pixels were drawn as "metrics over training" at steps 0, 1, 2)."""
    from analysis_core.report import build_report
    from analysis_core.stats.checkpoints import families_of

    assert families_of(["lda9", "pca16", "pixels"]) == {}
    assert families_of(["triplet_seed0", "triplet_seed1", "proxyanchor_seed0"]) == {}
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    rep = build_report(ev, sweep_repeats=1)
    assert not {"checkpoints", "checkpoint_tests", "checkpoint_classes"} & set(rep.tables)
    assert not [f for f in rep.figures if "checkpoint" in f]
    assert any("no method has a checkpoint step" in w for w in rep.warnings)
