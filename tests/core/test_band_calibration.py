"""The studentized (max-t) bootstrap PR band at its unit of inference: against outside oracles
(explicit resampling loops, exact enumeration of every resample, invariances the definitions
imply) and, in a small simulation through the public API, its coverage (the full one is
benchmarks/calibration_bands.py)."""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_core import Dataset, InputError, evaluate
from analysis_core.stats.bands import band, pr_bands

ROOT = Path(__file__).resolve().parents[2]


def _calibration():
    spec = importlib.util.spec_from_file_location("calibration_bands", ROOT / "benchmarks" / "calibration_bands.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _cr1(rows: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over the rows and its cluster-robust (CR1) standard error, from the clusters' rows."""
    mean = rows.mean(axis=0)
    groups = np.unique(codes)
    resid = np.array([(rows[codes == g] - mean).sum(axis=0) for g in groups])
    C = groups.size
    return mean, np.sqrt(C / (C - 1) * (resid ** 2).sum(axis=0)) / rows.shape[0]


def test_the_class_bootstrap_band_equals_an_explicit_loop_over_resampled_classes():
    """Unequal classes: each resample draws C classes (in sorted class order, the generator
    seeded as the band's), gathers all their queries, and studentizes by the resample's own
    cluster-robust standard error computed from its rows; the max-t quantile of that loop is the
    band's."""
    rng = np.random.default_rng(11)
    sizes = [1, 2, 3, 5, 4, 2, 6, 3]
    codes = np.repeat(np.arange(len(sizes)), sizes)
    curves = rng.random((codes.size, 6))
    perm = rng.permutation(codes.size)  # the rows of a class need not be together
    curves, codes = curves[perm], codes[perm]
    labels = np.array([f"c{c}" for c in codes])  # sorted names = sorted codes (one digit)
    got = band(curves, np.linspace(0, 1, 6), kind="bootstrap", n_boot=400, seed=7, groups=labels)
    mean, se = _cr1(curves, codes)
    draws, worst = np.random.default_rng(7), []
    for _ in range(400):
        drawn = draws.integers(0, len(sizes), (1, len(sizes)))[0]
        rows = np.vstack([curves[codes == g] for g in drawn])
        m, s = _cr1(rows, np.repeat(np.arange(len(sizes)), [sizes[g] for g in drawn]))
        worst.append(np.max(np.abs(m - mean) / s))
    np.testing.assert_allclose(got["mean"], mean, rtol=1e-12)
    np.testing.assert_allclose(got["high"] - got["mean"], np.quantile(worst, 0.95) * se, rtol=1e-9)
    assert (got["unit"] == "class").all() and (got["n_units"] == len(sizes)).all() and (got["n"] == codes.size).all()


@pytest.mark.parametrize("kind", ["t", "bootstrap"])
def test_with_one_query_per_class_the_class_band_is_the_query_band(kind):
    rng = np.random.default_rng(3)
    curves, recall = rng.random((25, 5)), np.linspace(0, 1, 5)
    by_class = band(curves, recall, kind=kind, seed=4, groups=np.arange(25))
    by_query = band(curves, recall, kind=kind, seed=4, unit="query")
    cols = ["recall", "mean", "low", "high", "n", "n_units"]
    pd.testing.assert_frame_equal(by_class[cols], by_query[cols], rtol=1e-12)
    assert (by_class["unit"] == "class").all() and (by_query["unit"] == "query").all()


@pytest.mark.parametrize("kind", ["t", "bootstrap"])
def test_queries_repeated_within_their_class_add_nothing_at_the_class_unit(kind):
    """k identical queries per class carry one class's information: the class band over them is
    the band over one query per class (the same resamples); the query band, which takes them as
    independent, shrinks by about sqrt(k)."""
    rng = np.random.default_rng(5)
    classes, recall = rng.random((12, 7)), np.linspace(0, 1, 7)
    repeated = np.repeat(classes, 4, axis=0)
    groups = np.repeat(np.arange(12), 4)
    once = band(classes, recall, kind=kind, seed=2, unit="query")
    got = band(repeated, recall, kind=kind, seed=2, groups=groups)
    np.testing.assert_allclose(got["low"], once["low"], rtol=1e-10)
    np.testing.assert_allclose(got["high"], once["high"], rtol=1e-10)
    naive = band(repeated, recall, kind=kind, seed=2, unit="query")
    ratio = (once["high"] - once["low"]) / (naive["high"] - naive["low"])
    assert (ratio > 1.5).all()


def _exact_max_t(values: np.ndarray) -> np.ndarray:
    """Every ordered resample of the rows (one per class), equally likely: the studentized bootstrap
    distribution exactly, with the conventions (zero se: point left out; none left: +inf)."""
    C = values.shape[0]
    mean, se = values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(C)
    out = []
    for drawn in itertools.product(range(C), repeat=C):
        rows = values[list(drawn)]
        s = rows.std(axis=0, ddof=1) / np.sqrt(C)
        ok = (s > 1e-12) & (se > 0)
        out.append(np.max(np.abs(rows.mean(axis=0) - mean)[ok] / s[ok]) if ok.any() else np.inf)
    return np.array(out)


@pytest.mark.parametrize("n_classes", [4, 5])
def test_the_class_bootstrap_quantile_approaches_the_exact_bootstrap_distribution(n_classes):
    """With few classes every resample can be enumerated (C^C): the band's quantile from 20 000
    random resamples lies between the exact distribution's 0.94 and 0.96 quantiles."""
    rng = np.random.default_rng(n_classes)
    values = rng.random((n_classes, 3))
    curves = np.repeat(values, 2, axis=0)  # two identical queries per class
    got = band(curves, np.linspace(0, 1, 3), kind="bootstrap", n_boot=20_000, seed=1,
               groups=np.repeat(np.arange(n_classes), 2))
    se = values.std(axis=0, ddof=1) / np.sqrt(n_classes)
    c = ((got["high"] - got["mean"]) / se).to_numpy()
    exact = np.sort(_exact_max_t(values))
    lo, hi = exact[int(0.94 * exact.size)], exact[int(np.ceil(0.96 * exact.size)) - 1]
    assert np.allclose(c, c[0]) and lo - 1e-9 <= c[0] <= hi + 1e-9


def test_one_two_and_three_classes():
    """1 and 2 classes: no class-unit band (NaN, with the reason), either kind. 3 classes: the t
    band with 2 df; the bootstrap draws one class three times in 3/27 = 1/9 of its resamples (no
    spread: unbounded statistic), so at alpha = 0.05 the band is unbounded and reported undefined,
    at alpha = 0.2 it is finite."""
    rng = np.random.default_rng(0)
    recall = np.linspace(0, 1, 4)
    for C in (1, 2):
        curves, groups = rng.random((3 * C, 4)), np.repeat(np.arange(C), 3)
        for kind in ("t", "bootstrap"):
            b = band(curves, recall, kind=kind, groups=groups)
            assert b["low"].isna().all() and b["high"].isna().all() and (b["n_units"] == C).all()
            assert b["note"].str.contains("needs at least 3").all() and b["mean"].notna().all()
    curves, groups = rng.random((9, 4)), np.repeat(np.arange(3), 3)
    t = band(curves, recall, kind="t", groups=groups)
    mean, se = _cr1(curves, groups)
    from scipy import stats

    np.testing.assert_allclose(t["high"], mean + stats.t.ppf(0.975, 2) * se, rtol=1e-12)
    unbounded = band(curves, recall, kind="bootstrap", groups=groups, seed=3)
    assert unbounded["high"].isna().all() and unbounded["note"].str.startswith("unbounded").all()
    finite = band(curves, recall, alpha=0.2, kind="bootstrap", groups=groups, seed=3)
    assert np.isfinite(finite["high"]).all() and (finite["note"] == "").all()


@pytest.mark.parametrize("unit", ["query", "class"])
@pytest.mark.parametrize("kind", ["t", "bootstrap"])
def test_zero_variance_points_give_the_point_and_are_left_out_of_the_maximum(unit, kind):
    """Constant curves: the band is the point, exactly. Columns constant among varying ones: the
    point there, and the other columns' band as without the constant columns."""
    recall = np.linspace(0, 1, 5)
    groups = np.repeat(np.arange(8), 3)
    const = band(np.full((24, 5), 0.3), recall, kind=kind, groups=groups if unit == "class" else None, unit=unit)
    assert (const["low"] == 0.3).all() and (const["high"] == 0.3).all() and (const["mean"] == 0.3).all()
    assert (const["note"] == "").all()
    rng = np.random.default_rng(1)
    varying = rng.random((24, 3))
    mixed = np.c_[np.ones(24), varying[:, :2], np.full(24, 0.1), varying[:, 2]]
    got = band(mixed, recall, kind=kind, seed=5, groups=groups if unit == "class" else None, unit=unit)
    alone = band(varying, recall[[1, 2, 4]], kind=kind, seed=5, groups=groups if unit == "class" else None, unit=unit)
    assert got["low"][0] == got["high"][0] == 1.0 and got["low"][3] == got["high"][3] == 0.1
    np.testing.assert_allclose(got["low"][[1, 2, 4]], alone["low"], rtol=1e-12)
    np.testing.assert_allclose(got["high"][[1, 2, 4]], alone["high"], rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_classes=st.integers(4, 12), discrete=st.booleans())
def test_the_band_contains_the_mean_curve_and_the_seed_reproduces_it(seed, n_classes, discrete):
    """Precisions taking few values (discrete: many resamples agree at some points) included."""
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, n_classes, 40)
    curves = rng.random((40, 6))
    if discrete:
        curves = np.round(curves * 2) / 2
    recall = np.linspace(0, 1, 6)
    for unit in ("query", "class"):
        for kind in ("t", "bootstrap"):
            b = band(curves, recall, kind=kind, n_boot=300, seed=seed % 1000, unit=unit,
                     groups=groups if unit == "class" else None)
            ok = b["low"].notna()
            assert (b["low"][ok] <= b["mean"][ok]).all() and (b["mean"][ok] <= b["high"][ok]).all()
            assert ok.all() or b["note"].str.len().gt(0).all()
            again = band(curves, recall, kind=kind, n_boot=300, seed=seed % 1000, unit=unit,
                         groups=groups if unit == "class" else None)
            pd.testing.assert_frame_equal(b, again)


def test_pr_bands_name_the_unit_and_the_units_and_never_fall_back_silently():
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(6), 5)
    X = (rng.standard_normal((6, 4))[y] + rng.standard_normal((30, 4))).astype(np.float32)
    ev = evaluate(Dataset(labels=y, embeddings={"m": X}))
    for kind in ("t", "bootstrap"):
        b = pr_bands(ev, kind=kind, n_boot=300)
        overall, own = b[b["class"] == "all"], b[b["class"] != "all"]
        assert (overall["unit"] == "class").all() and (overall["n_units"] == 6).all() and (overall["n"] == 30).all()
        assert (own["unit"] == "query").all() and (own["n_units"] == 5).all()
        pd.testing.assert_frame_equal(b, pr_bands(ev, kind=kind, n_boot=300, unit="class"))
        q = pr_bands(ev, kind=kind, n_boot=300, unit="query")
        assert (q["unit"] == "query").all() and (q.loc[q["class"] == "all", "n_units"] == 30).all()
        # the class band is wider here: the queries of a class share their gallery and class centre
        assert ((overall["high"] - overall["low"]).to_numpy()
                > (q.loc[q["class"] == "all", "high"] - q.loc[q["class"] == "all", "low"]).to_numpy()).mean() > 0.5
    two = evaluate(Dataset(labels=y[y < 2], embeddings={"m": X[y < 2]}))
    default = pr_bands(two, classes=["all"])
    assert (default["unit"] == "query").all() and default["note"].str.contains("2 classes").all()
    assert np.isfinite(default["high"]).all()
    asked = pr_bands(two, classes=["all"], unit="class")
    assert (asked["unit"] == "class").all() and asked["high"].isna().all()
    assert asked["note"].str.contains("needs at least 3").all()
    with pytest.raises(InputError, match="unit of inference"):
        pr_bands(ev, unit="run")
    with pytest.raises(ValueError, match="groups"):
        band(np.eye(3), np.linspace(0, 1, 3), unit="class")


def test_coverage_by_simulation_small():
    """50 replicates of each design (the benchmark runs 400): leave-one-out with the class as unit
    (20 classes of 4) and a fixed gallery with new queries (20 per replicate) with the query as
    unit; the band must cover the true curve at every recall point in at least 80 % of them
    (nominal 95 %; measured 0.943 and 0.940 over 400)."""
    cal = _calibration()
    truth = cal.loo_truth(20, 4, reps=300, seed=10)
    assert cal.loo_coverage(20, 4, "class", truth, reps=50, alpha=0.05, seed=10) >= 40
    gallery = cal.Gallery(20, 4, seed=10)
    truth = gallery.truth(n=50_000, seed=10)
    assert cal.query_coverage(gallery, 20, truth, reps=50, alpha=0.05, seed=10) >= 40
