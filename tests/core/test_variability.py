"""Variability statistics against outside oracles (scipy, direct computation) and planted
effects."""

from __future__ import annotations

import itertools
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis_core import Dataset, evaluate
from analysis_core.stats.bands import band, pr_bands
from analysis_core.stats.mixed_model import mixed_model
from analysis_core.stats.paired_tests import paired_tests
from analysis_core.stats.posthoc import games_howell, tukey_hsd
from analysis_core.stats.variability import ap_frame, balanced_subsample, one_way

from .oracle import leave_one_out_rows, score_matrix


def _groups_frame(rng, means, sds, sizes):
    rows = []
    for g, (m, s, n) in enumerate(zip(means, sds, sizes, strict=True)):
        rows += [dict(method="m", query=len(rows) + i, label=f"c{g}", ap=v) for i, v in enumerate(rng.normal(m, s, n))]
    return pd.DataFrame(rows)


def _samples(df):
    return [g["ap"].to_numpy() for _, g in df.groupby("label", sort=True)]


def _assert_matches_scipy(table, df, ref):
    """Pairwise rows (group2 - group1) against scipy's tukey_hsd result (statistic[j, i] = m_j - m_i)."""
    names = sorted(df["label"].unique())
    ci = ref.confidence_interval(0.95)
    for row in table.itertuples():
        i, j = names.index(row.group1), names.index(row.group2)
        assert row.meandiff == pytest.approx(ref.statistic[j, i], abs=1e-12)
        assert row.p_adj == pytest.approx(ref.pvalue[j, i], rel=1e-7, abs=1e-12)
        assert row.lower == pytest.approx(ci.low[j, i], rel=1e-7)
        assert row.upper == pytest.approx(ci.high[j, i], rel=1e-7)


@pytest.mark.parametrize("interpolated", [False, True])
def test_bands_on_a_sub_grid_equal_an_evaluation_on_that_grid(interpolated):
    """The PR page evaluates once on 61 recall points and takes coarser grids as column subsets:
    exact, since a curve's value at r depends on r alone (coarse values: tied scores)."""
    rng = np.random.default_rng(3)
    X = np.round(rng.standard_normal((160, 4)), 1).astype(np.float32)
    ds = Dataset(labels=rng.integers(0, 4, 160), embeddings={"a": X, "b": X + 0.3})
    fine = evaluate(ds, n_recall=61, interpolated=interpolated)
    for n_recall in (3, 4, 11, 16, 31):
        coarse = evaluate(ds, n_recall=n_recall, interpolated=interpolated)
        for kind in ("t", "bootstrap"):
            a = pr_bands(fine, kind=kind, n_recall=n_recall, n_boot=200)
            b = pr_bands(coarse, kind=kind, n_boot=200)
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            some = pr_bands(fine, kind=kind, n_recall=n_recall, classes=["1", "all"], n_boot=200)
            order = ["method", "class", "recall"]
            pd.testing.assert_frame_equal(some.sort_values(order, ignore_index=True),
                                          b[b["class"].isin(["1", "all"])].sort_values(order, ignore_index=True))
    with pytest.raises(ValueError, match="N_P - 1 must divide 60"):
        pr_bands(fine, n_recall=8)


def _max_t_of_resampled_rows(curves, draws, reps):
    """The studentized bootstrap's statistic, one resample at a time: the resampled rows' mean and
    standard error (sd / sqrt(n)) and the largest |mean* - mean| / se* over the grid."""
    n, mean = curves.shape[0], curves.mean(axis=0)
    worst = []
    for _ in range(reps):
        rows = curves[draws.integers(0, n, (1, n))][0]
        worst.append(np.max(np.abs(rows.mean(axis=0) - mean) / (rows.std(axis=0, ddof=1) / np.sqrt(n))))
    return np.array(worst)


def test_the_bootstrap_band_equals_resampling_rows_one_at_a_time():
    """Each resample's mean and standard error from its draw counts (one matrix product per chunk)
    equal those of the resampled rows, with the same draws from the seed."""
    rng = np.random.default_rng(1)
    curves, recall = rng.random((57, 5)), np.linspace(0, 1, 5)
    got = band(curves, recall, kind="bootstrap", n_boot=300, seed=9)
    worst = _max_t_of_resampled_rows(curves, np.random.default_rng(9), 300)
    se = curves.std(axis=0, ddof=1) / np.sqrt(57)
    np.testing.assert_allclose(got["high"] - got["mean"], np.quantile(worst, 0.95) * se, rtol=1e-10)


def test_the_bootstrap_band_over_several_chunks_of_resamples_equals_resampling_rows_one_at_a_time():
    """Many queries: the resamples come in chunks (2**22 draws each) sharing one count buffer,
    the last chunk shorter; the same band as resampling the rows, and per-method threads in
    pr_bands give each method's band alone."""
    n, reps = 20_000, 450  # chunks of 209, 209, 32
    rng = np.random.default_rng(4)
    curves, recall = rng.random((n, 3)), np.linspace(0, 1, 3)
    got = band(curves, recall, kind="bootstrap", n_boot=reps, seed=2)
    worst = _max_t_of_resampled_rows(curves, np.random.default_rng(2), reps)
    se = curves.std(axis=0, ddof=1) / np.sqrt(n)
    np.testing.assert_allclose(got["high"] - got["mean"], np.quantile(worst, 0.95) * se, rtol=1e-9)


def test_bootstrap_bands_of_several_methods_computed_at_once_are_each_methods_band_alone():
    rng = np.random.default_rng(8)
    y = rng.integers(0, 5, 300)
    ds = Dataset(labels=y, embeddings={m: (rng.standard_normal((5, 6))[y] + s * rng.standard_normal((300, 6)))
                                       .astype(np.float32) for m, s in (("a", 0.5), ("b", 1.0), ("c", 2.0))})
    ev = evaluate(ds)
    got = pr_bands(ev, kind="bootstrap", n_boot=300, seed=5)
    for m in ev.methods:
        rows, recall, curves = ev.pr_curves(m)
        labels = ds.labels[rows].astype(str)
        for cls in ["all", "2"]:
            want = band(curves if cls == "all" else curves[labels == cls], recall, kind="bootstrap", n_boot=300, seed=5,
                        groups=labels if cls == "all" else None)
            mine = got[(got["method"] == m) & (got["class"] == cls)].reset_index(drop=True)
            pd.testing.assert_frame_equal(mine[list(want.columns)], want, check_exact=True)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(0, 6), n=st.integers(1, 40), seed=st.integers(0, 2**31))
def test_draw_counts_are_bincounts_of_each_row_and_refuse_draws_outside_the_rows(m, n, seed):
    from analysis_core.stats.resampling import draw_counts

    draws = np.random.default_rng(seed).integers(0, n, (m, 3 * n))
    want = np.array([np.bincount(r, minlength=n) for r in draws], np.float64).reshape(m, n)
    np.testing.assert_array_equal(draw_counts(draws, n), want)
    np.testing.assert_array_equal(draw_counts(draws, n, np.full(m * n + 5, 7.0)), want)  # a used buffer
    if m:
        draws[m - 1, 0] = n
        with pytest.raises(ValueError):
            draw_counts(draws, n)


def test_pr_band_equals_direct_computation_from_sorted_rankings():
    rng = np.random.default_rng(8)
    X = rng.standard_normal((90, 6)).astype(np.float32)
    y = rng.integers(0, 3, 90)
    ev = evaluate(Dataset(labels=y, embeddings={"m": X}), n_recall=11)
    bands = pr_bands(ev, alpha=0.05, unit="query")
    S = score_matrix(X, "cosine")
    grid = np.linspace(0, 1, 11)
    curves, labels = [], []
    for i, scores, rel in leave_one_out_rows(S, y):
        ranks = np.nonzero(rel[np.argsort(-scores)])[0] + 1
        R = ranks.size
        curves.append(np.interp(grid, np.arange(1, R + 1) / R, np.arange(1, R + 1) / ranks))
        labels.append(str(y[i]))
    curves, labels = np.array(curves), np.array(labels)
    for cls in ["all", "0", "2"]:
        c = curves if cls == "all" else curves[labels == cls]
        n = c.shape[0]
        mean = c.mean(0)
        half = stats.t.ppf(0.975, n - 1) * c.std(0, ddof=1) / np.sqrt(n)
        got = bands[(bands["method"] == "m") & (bands["class"] == cls)].sort_values("recall")
        np.testing.assert_allclose(got["mean"], mean, atol=1e-9)
        np.testing.assert_allclose(got["low"], mean - half, atol=1e-9)
        np.testing.assert_allclose(got["high"], mean + half, atol=1e-9)
        assert (got["n"] == n).all() and (got["n_units"] == n).all() and (got["unit"] == "query").all()
    # the class unit (the default): the cluster-robust standard error of the mean over the classes
    # (statsmodels' CR1, an intercept-only regression clustered by class) with C - 1 df
    import statsmodels.api as sm

    by_class = pr_bands(ev, alpha=0.05)
    got = by_class[by_class["class"] == "all"].sort_values("recall")
    assert (got["unit"] == "class").all() and (got["n_units"] == 3).all() and (got["note"] == "").all()
    codes = np.unique(labels, return_inverse=True)[1]
    for j in range(grid.size):
        fit = sm.OLS(curves[:, j], np.ones(len(curves))).fit(cov_type="cluster", cov_kwds={"groups": codes})
        half = stats.t.ppf(0.975, 2) * fit.bse[0]
        assert got["low"].iloc[j] == pytest.approx(fit.params[0] - half, abs=1e-9)
        assert got["high"].iloc[j] == pytest.approx(fit.params[0] + half, abs=1e-9)
    # a class's own band is over its queries whatever the unit of the overall band
    pd.testing.assert_frame_equal(by_class[by_class["class"] != "all"], bands[bands["class"] != "all"])


def test_bootstrap_simultaneous_band_is_wider_than_pointwise_and_seeded():
    rng = np.random.default_rng(0)
    curves = np.clip(rng.normal(0.6, 0.2, (80, 11)), 0, 1)
    grid = np.linspace(0, 1, 11)
    t = band(curves, grid, kind="t")
    b1 = band(curves, grid, kind="bootstrap", seed=3)
    b2 = band(curves, grid, kind="bootstrap", seed=3)
    pd.testing.assert_frame_equal(b1, b2)
    assert ((b1["high"] - b1["low"]) > (t["high"] - t["low"])).all()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tukey_hsd_agrees_with_scipy(seed):
    rng = np.random.default_rng(seed)
    df = _groups_frame(rng, [0.5, 0.55, 0.7, 0.5], [0.1] * 4, [12, 15, 9, 20])
    res = tukey_hsd(df, alpha=0.05)
    _assert_matches_scipy(res.table, df, stats.tukey_hsd(*_samples(df)))
    # simultaneous intervals: centred on the group means
    means = df.groupby("label")["ap"].mean()
    np.testing.assert_allclose(res.intervals.set_index("group")["mean"], means[res.intervals["group"]], atol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_welch_anova_and_games_howell_agree_with_scipy(seed):
    rng = np.random.default_rng(seed)
    df = _groups_frame(rng, [0.5, 0.6, 0.55], [0.05, 0.2, 0.1], [10, 25, 14])
    tests = one_way(df).tests.set_index("test")
    samples = _samples(df)
    ref_w = stats.f_oneway(*samples, equal_var=False)
    assert tests.loc["welch", "statistic"] == pytest.approx(ref_w.statistic, rel=1e-9)
    assert tests.loc["welch", "p_value"] == pytest.approx(ref_w.pvalue, rel=1e-6)
    ref_f = stats.f_oneway(*samples)
    assert tests.loc["anova", "statistic"] == pytest.approx(ref_f.statistic, rel=1e-9)
    assert tests.loc["anova", "p_value"] == pytest.approx(ref_f.pvalue, rel=1e-6)
    assert tests.loc["kruskal", "p_value"] == pytest.approx(stats.kruskal(*samples).pvalue, rel=1e-9)
    _assert_matches_scipy(games_howell(df).table, df, stats.tukey_hsd(*samples, equal_var=False))


def _embedded(rng, spreads, n_per_class, dim=8, methods=("A", "B"), method_noise=None):
    """Classes with their own spread (a class effect on AP) embedded by several methods.
    Centres are orthogonal and equidistant, so with equal spreads the classes are exchangeable:
    no class effect (a true null)."""
    k = len(spreads)
    y = np.repeat(np.arange(k), n_per_class)
    centres = 2.0 * np.eye(k, dim)
    embs = {}
    for m in methods:
        noise = (method_noise or {}).get(m, 1.0)
        embs[m] = (centres[y] + noise * np.asarray(spreads)[y, None] * rng.standard_normal((y.size, dim))).astype(
            np.float32)
    return Dataset(labels=y, embeddings=embs)


def _ap_table(rng, class_params, n_per_class=12, methods=("A", "B")):
    """Per-query AP drawn from Beta(a, b) per class: the statistics' input with a known truth."""
    rows = []
    for c, (a, b) in enumerate(class_params):
        for q in range(n_per_class):
            for m in methods:
                rows.append(dict(method=m, query=c * n_per_class + q, label=f"c{c}", ap=rng.beta(a, b)))
    return pd.DataFrame(rows)


def test_paper_003_design_detects_a_planted_class_effect_end_to_end():
    # 2 methods x 5 classes = 10 groups, as in Brughi et al.; two classes much tighter
    ds = _embedded(np.random.default_rng(0), [0.3, 0.3, 1.8, 1.8, 1.8], 12)
    ap = ap_frame(evaluate(ds))
    assert ap.groupby(["method", "label"]).ngroups == 10
    assert one_way(ap).tests.set_index("test").loc["anova", "p_value"] < 1e-3
    tk = tukey_hsd(ap)
    tight = {f"{m} | {c}" for m in "AB" for c in "01"}
    pairs = zip(tk.table["group1"], tk.table["group2"], strict=True)
    planted = tk.table[[(a in tight) != (b in tight) for a, b in pairs]]
    assert len(planted) == 4 * 6 and planted["reject"].all()  # every tight-vs-diffuse pair is detected


def test_one_way_tests_detect_an_effect_and_hold_their_level_under_a_null():
    rng = np.random.default_rng(7)
    effect = _ap_table(rng, [(8, 2), (8, 2), (3, 4), (3, 4), (3, 4)])
    t = one_way(effect).tests.set_index("test")
    assert (t.loc[["anova", "welch", "kruskal"], "p_value"] < 1e-3).all()
    rejections = {"anova": 0, "welch": 0, "kruskal": 0}
    tukey_any = 0
    for seed in range(40):
        null = _ap_table(np.random.default_rng(1000 + seed), [(4, 3)] * 5)
        t = one_way(null).tests.set_index("test")
        for k in rejections:
            rejections[k] += t.loc[k, "p_value"] < 0.05
        tukey_any += tukey_hsd(null).table["reject"].any()
    # about 2 of 40 expected at alpha = 0.05; 7 or more has probability < 1 % under the null
    assert all(v <= 6 for v in rejections.values()), rejections
    assert tukey_any <= 6  # Tukey controls the family-wise rate over all 45 pairs


def test_paper_003_design_runs_on_demo_data():
    from pathlib import Path

    from analysis_core import load_files

    ds = load_files([Path(__file__).resolve().parents[2] / "demo_data" / "digits.npz"])
    keep = np.isin(ds.labels, [0, 1, 2, 3, 4])
    sub = ds.subset(np.nonzero(keep)[0])
    ev = evaluate(sub, methods=["pixels", "lda9"])
    ap = balanced_subsample(ap_frame(ev), 5, seed=0)
    assert ap.groupby(["method", "label"]).size().eq(5).all() and len(ap) == 50
    assert len(one_way(ap).tests) >= 3
    assert len(tukey_hsd(ap).table) == 45  # 10 groups -> 45 pairs


def test_mixed_model_and_paired_tests_find_a_planted_difference_and_not_a_null():
    rng = np.random.default_rng(1)
    planted = _embedded(rng, [1.0] * 6, 15, method_noise={"A": 1.6, "B": 0.8})
    ap = ap_frame(evaluate(planted))
    mm = mixed_model(ap).table.set_index("term")
    assert mm.loc["method[B]", "coef"] > 0 and mm.loc["method[B]", "p_value"] < 1e-3
    pt = paired_tests(ap, n_permutations=2000).iloc[0]
    assert pt["mean_diff"] < 0 and pt["p_permutation_holm"] < 0.01 and pt["p_wilcoxon_holm"] < 0.01
    assert pt["losses"] > pt["wins"] and pt["wins"] + pt["ties"] + pt["losses"] == pt["n"]
    null_hits = 0
    for seed in range(10):
        null = _embedded(np.random.default_rng(50 + seed), [1.0] * 6, 15)
        p = paired_tests(ap_frame(evaluate(null)), n_permutations=1000, seed=seed).iloc[0]["p_permutation"]
        null_hits += p < 0.05
    assert null_hits <= 3


def test_paired_permutation_p_value_matches_exhaustive_sign_flips():
    d = np.array([0.3, -0.1, 0.25, 0.05, 0.2, -0.02, 0.15, 0.1])
    df = pd.DataFrame({"method": ["a"] * 8 + ["b"] * 8, "query": list(range(8)) * 2,
                       "label": ["x"] * 16, "ap": np.r_[d, np.zeros(8)]})
    exact = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12
                     for s in itertools.product([-1, 1], repeat=8)])
    got = paired_tests(df, n_permutations=40000, seed=1).iloc[0]["p_permutation"]
    assert got == pytest.approx(exact, abs=0.01)


def test_groups_are_those_of_a_pandas_groupby_in_row_order():
    from analysis_core.stats.variability import clean_values, group_column, groups

    rng = np.random.default_rng(7)
    n = 400
    df = pd.DataFrame({"method": rng.choice(["b", "a", "a10", "a9"], n), "query": np.arange(n),
                       "label": rng.choice([f"class {i}" for i in range(30)] + ["Z", "é", "1"], n),
                       "ap": np.round(rng.random(n), 2)})
    warn: list[str] = []
    names, samples = groups(df, warn)
    c = clean_values(df)
    want = [(str(k), g["ap"].to_numpy()) for k, g in c.groupby(group_column(c), sort=True) if len(g) >= 2]
    assert names == [k for k, _ in want]
    assert all(s.tobytes() == w.tobytes() for s, (_, w) in zip(samples, want, strict=True))


def test_scipy_tests_without_their_wrapper_give_the_same_bits_on_groups():
    from analysis_core.stats.variability import _bare

    rng = np.random.default_rng(11)
    for trial in range(60):
        samples = [np.round(rng.random(int(rng.integers(3, 30))), int(rng.integers(1, 5)))
                   for _ in range(int(rng.integers(2, 40)))]
        if trial % 5 == 0:
            samples[0] = np.full(samples[0].size, 0.5)
        for test, kw in ((stats.f_oneway, {}), (stats.f_oneway, {"equal_var": False}), (stats.kruskal, {}),
                         (stats.levene, {"center": "median"})):
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                a, b = test(*samples, **kw), _bare(test, samples)(*samples, **kw)
            assert np.array([a.statistic, a.pvalue]).tobytes() == np.array([b.statistic, b.pvalue]).tobytes()
    assert _bare(stats.kruskal, [np.array([1.0, np.nan])]) is stats.kruskal  # NaN: the wrapper's policy


def test_the_deviation_shortcut_agrees_with_merging_each_group():
    from analysis_core.stats.variability import _deviations_vary, merge_rounding_noise

    rng = np.random.default_rng(13)
    for trial in range(300):
        samples = [np.round(rng.random(int(rng.integers(3, 12))), int(rng.integers(0, 3)))
                   for _ in range(int(rng.integers(1, 6)))]
        if trial % 3 == 0:
            samples = [np.array([0.25, 0.75] * int(rng.integers(2, 5))) + rng.choice([0.0, 1e-14]) for _ in samples]
        merged = [merge_rounding_noise(np.abs(s - np.median(s))) for s in samples]
        assert _deviations_vary(samples) == any(np.ptp(d) > 0 for d in merged)


@pytest.mark.parametrize("kind", ["t", "bootstrap"])
def test_pr_bands_report_progress_up_to_every_band_and_stop_when_it_raises(kind):
    """Progress counts bands (the bootstrap's in fractions, as its resamples are drawn) up to the
    number of bands; an exception from it (a dashboard guess replaced by a newer one) stops the
    computation, bootstrap or not, whichever thread raised it."""
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 2000)
    ds = Dataset(labels=y, embeddings={m: (rng.standard_normal((4, 6))[y] + s * rng.standard_normal((2000, 6)))
                                       .astype(np.float32) for m, s in (("a", 0.5), ("b", 1.0), ("c", 2.0))})
    ev = evaluate(ds)
    calls: list[tuple[float, int]] = []
    got = pr_bands(ev, kind=kind, n_boot=5000, classes=["all", "1"], progress=lambda d, t, s: calls.append((d, t)))
    assert {t for _, t in calls} == {6} and max(d for d, _ in calls) == pytest.approx(6)
    if kind == "bootstrap":
        assert len(calls) > 6  # 5000 resamples of 2000 queries: two chunks for "all"
    pd.testing.assert_frame_equal(got, pr_bands(ev, kind=kind, n_boot=5000, classes=["all", "1"]))

    class Stop(Exception):
        pass

    stops: list[float] = []

    def stop(done, total, stage):
        stops.append(done)
        raise Stop

    with pytest.raises(Stop):
        pr_bands(ev, kind=kind, n_boot=5000, classes=["all", "1"], progress=stop)
    # the chunks in flight when it raised finish, no new one starts (18 chunks in all here)
    assert len(stops) <= (os.cpu_count() or 1)


@settings(max_examples=60, deadline=None)
@given(alpha=st.sampled_from([0.4, 0.3, 0.25, 0.2, 0.1, 0.05, 0.01, 0.005, 0.001]) | st.floats(0.0002, 0.45),
       below=st.integers(1, 50))
def test_a_bootstrap_band_needs_the_resamples_that_put_its_quantile_within_alpha_over_10_of_its_level(alpha, below):
    """Oracle: B uniform draws' order statistics have expected values k / (B + 1) (the Beta
    distribution's mean), and np.quantile is linear in them, so the expected level of the
    quantile the band uses is np.quantile of those expectations. The band must take at least the
    fewest B whose level falls short of 1 - alpha by at most alpha / 10, found here by search."""
    from analysis_core.errors import InputError
    from analysis_core.stats.bands import bootstrap_resamples

    def shortfall(b):
        return (1 - alpha) - np.quantile(np.arange(1, b + 1) / (b + 1), 1 - alpha)

    lo, hi = 1, 2
    limit = alpha / 10 * (1 + 1e-9)  # equality (179 at alpha = 0.05) is within, whatever the rounding
    while shortfall(hi) > limit:  # the shortfall decreases with B: double, then bisect
        lo, hi = hi, 2 * hi
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (mid + 1, hi) if shortfall(mid) > limit else (lo, mid)
    fewest = lo
    assert bootstrap_resamples(fewest, alpha) == fewest
    assert bootstrap_resamples(None, alpha) == max(2000, fewest)  # the default is raised when alpha needs it
    if fewest - below >= 1:
        with pytest.raises(InputError) as err:
            bootstrap_resamples(fewest - below, alpha)
        assert f"at least {fewest}" in str(err.value) and "too narrow" in str(err.value)
    if fewest <= 400:  # the band itself, at the minimum and refused just below
        rng = np.random.default_rng(0)
        curves, recall = rng.random((12, 4)), np.linspace(0, 1, 4)
        ok = band(curves, recall, alpha=alpha, kind="bootstrap", n_boot=fewest, seed=1)
        assert np.isfinite(ok["high"]).all() and (ok["high"] >= ok["mean"]).all()
        if fewest > 1:
            with pytest.raises(InputError):
                band(curves, recall, alpha=alpha, kind="bootstrap", n_boot=fewest - 1, seed=1)
    assert np.isfinite(band(np.eye(3), np.linspace(0, 1, 3), alpha=alpha, kind="t", n_boot=1)["high"]).all()


@pytest.mark.parametrize("alpha", [1e-6, 1e-12, 1e-310])
def test_an_alpha_too_small_for_any_bootstrap_is_refused_with_a_message(alpha):
    from analysis_core.errors import InputError

    with pytest.raises(InputError, match="larger alpha"):
        band(np.eye(3), np.linspace(0, 1, 3), alpha=alpha, kind="bootstrap")
