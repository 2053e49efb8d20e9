"""Edges found by a hostile pass over the API and the statistics (2026-11-23): settings the engine
cannot take, labels that are missing, a class count of one, the area of an error-vs-reject curve,
non-finite values in the statistics, the generalization gap's interval, integer scores beyond
float64's 2^53, and which one-way tests the advice points to when groups are small."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

import analysis_core as ac
from analysis_core.errors import InputError
from analysis_core.stats.analysis import analyse
from analysis_core.stats.class_sweep import class_count_sweep
from analysis_core.stats.error_reject import error_reject_curve
from analysis_core.stats.generalization import generalization_gap
from analysis_core.stats.grouped_recall import GroupedRecall
from analysis_core.stats.posthoc import games_howell, tukey_hsd
from analysis_core.stats.variability import WELCH_MIN_GROUP, one_way


def _data(n_classes=4, per=6, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n_classes * per, d)).astype(np.float32), np.repeat(np.arange(n_classes), per)


@pytest.mark.parametrize("option, value", [
    ("n_bins", 0), ("n_bins", -1), ("n_bins", 2.5), ("alpha", 0), ("alpha", 1), ("alpha", 2.0), ("alpha", -0.5),
    ("alpha", "0.05"), ("ks", 4), ("ks", ("a",)), ("ks", (10**20,)), ("ks", (2.7,)), ("ks", ()), ("n_threads", -1),
    ("n_threads", 0), ("group_size", 0), ("group_size", 1), ("group_repeats", 0), ("seed", "a"), ("seed", -1),
    ("n_recall", 2.5), ("n_recall", 1), ("max_classes", 2.5), ("max_classes", 1), ("query_sample", 2.5),
    ("block_size", 0), ("n_bins", True),
])
def test_a_setting_out_of_range_is_refused_by_name_before_any_computation(option, value):
    """Each bad value raises InputError naming the setting (n_bins = 0 used to be taken: the
    binning wrote outside its histogram and the process could crash)."""
    X, y = _data()
    with pytest.raises(InputError) as exc:
        ac.evaluate(X, y, **{option: value})
    assert option.split("_")[0] in str(exc.value) or "k" in str(exc.value)
    assert "Fix:" in str(exc.value)


def test_integral_settings_given_as_floats_are_taken_and_equal_the_integers():
    X, y = _data()
    a = ac.evaluate(X, y, ks=(1, 2), n_bins=20).to_dict()
    b = ac.evaluate(X, y, ks=(1.0, 2.0), n_bins=20.0).to_dict()
    assert a["methods"] == b["methods"]


def test_pair_counts_do_not_depend_on_the_number_of_bins():
    """Pair counts and mean similarities come from the pairs, not from the binning: a single bin
    gives the same as 200 (the n_bins = 0 bug gave zero pairs)."""
    X, y = _data(5, 7)
    one = ac.evaluate(X, y, n_bins=1).to_dict()["methods"]["embeddings"]
    many = ac.evaluate(X, y, n_bins=200).to_dict()["methods"]["embeddings"]
    n_pos = sum(c * (c - 1) // 2 for c in np.bincount(y))
    assert one["n_pos_pairs"] == many["n_pos_pairs"] == n_pos
    assert one["n_neg_pairs"] == many["n_neg_pairs"] == len(y) * (len(y) - 1) // 2 - n_pos
    assert one["mean_pos_similarity"] == pytest.approx(many["mean_pos_similarity"], abs=1e-12)


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA])
def test_missing_labels_in_arrays_are_refused_as_in_files(missing):
    X, _ = _data(3, 4)
    labels = ["cat"] * 4 + ["dog"] * 4 + ["emu"] * 3 + [missing]
    for given_as in (np.array(labels, dtype=object), pd.Series(labels, dtype=object)):
        with pytest.raises(InputError, match="missing labels at row 11"):
            ac.evaluate(X, given_as)


@pytest.mark.parametrize("counts", [[1], [1, 3], [0], [7], [2.5]])
def test_a_class_count_sweep_refuses_counts_without_a_retrieval_problem(counts):
    """One class has no negatives (every metric 1 by construction); more classes than the data
    has would be labelled with classes it does not have."""
    X, y = _data(6, 5)
    with pytest.raises(InputError, match="class count"):
        class_count_sweep(X, y, counts=counts, repeats=1, group_size=2)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 60), n_points=st.integers(2, 300),
       levels=st.integers(1, 6), error=st.sampled_from(["p@1", "ap", "AP"]))
def test_the_error_reject_area_is_the_step_curves_integral_whatever_the_grid(seed, n, n_points, levels, error):
    """The area under the error-vs-reject curve by brute force over x in [0, 1): rejecting x keeps
    n - floor(x n) queries, whose expected error (ties in confidence in random order) is that of
    the kept ones; the area is the integral of that step function, not of the plotted grid. A
    constant confidence gives the overall error."""
    rng = np.random.default_rng(seed)
    conf = rng.integers(0, levels, n).astype(float)
    ap = rng.random(n).round(1)
    p1 = (rng.random(n) < 0.5).astype(float)
    e = 1 - (p1 if error == "p@1" else ap)
    curve = error_reject_curve(conf, ap, p1, error=error, n_points=n_points)

    def expected_error(keep: int) -> float:  # the kept ones: most confident first, ties averaged
        total, left = 0.0, keep
        for c in sorted(set(conf), reverse=True):
            block = e[conf == c]
            take = min(left, block.size)
            total += take * block.mean()
            left -= take
            if not left:
                break
        return total / keep

    area = sum(expected_error(n - j) for j in range(n)) / n  # x in [j/n, (j+1)/n) keeps n - j
    assert curve.auc == pytest.approx(area, abs=1e-12)
    assert curve.oracle_auc <= curve.auc + 1e-12
    if levels == 1:
        assert curve.auc == pytest.approx(e.mean(), abs=1e-12)


@pytest.mark.parametrize("kw", [{"error": "top-5"}, {"n_points": 1}, {"confidence": [0.5, np.nan, 0.1]},
                                {"confidence": [0.5, 0.2]}])
def test_the_error_reject_curve_refuses_what_it_cannot_use(kw):
    args = {"confidence": [0.5, 0.2, 0.1], "ap": [1.0, 0.5, 0.2], "p_at_1": [1.0, 0.0, 0.0]} | kw
    with pytest.raises(InputError):
        error_reject_curve(args.pop("confidence"), args.pop("ap"), args.pop("p_at_1"), **args)


def test_a_query_without_a_finite_value_is_left_out_of_the_tests_with_a_warning():
    """One NaN AP made every one-way test and every Tukey pair NaN, with warnings blaming the data."""
    rng = np.random.default_rng(1)
    ap = pd.DataFrame({"method": "m", "query": np.arange(15), "label": np.repeat(["x", "y", "z"], 5),
                       "ap": rng.random(15)})
    clean = analyse(ap, posthoc=("tukey",))
    dirty = ap.copy()
    dirty = pd.concat([dirty, pd.DataFrame({"method": ["m", "m"], "query": [15, 16], "label": ["x", "y"],
                                            "ap": [np.nan, np.inf]})], ignore_index=True)
    res = analyse(dirty, posthoc=("tukey",))
    pd.testing.assert_frame_equal(res.one_way.tests, clean.one_way.tests)
    pd.testing.assert_frame_equal(res.posthoc["tukey"].table, clean.posthoc["tukey"].table)
    assert any("2 of 17 rows have no finite 'ap'" in w for w in res.warnings)


def test_analyse_names_a_missing_column():
    ap = pd.DataFrame({"method": "m", "query": range(6), "ap": np.linspace(0, 1, 6)})
    with pytest.raises(InputError, match="no column.*label"):
        analyse(ap)


def _grouped(per_group: list[float], alpha: float = 0.05) -> GroupedRecall:
    """A GroupedRecall of these per-group recalls, its interval as grouped_recall builds it."""
    v = np.array(per_group)
    g = v.size
    sd = v.std(ddof=1)
    se = sd / math.sqrt(g)
    half = stats.t.ppf(1 - alpha / 2, g - 1) * se
    table = pd.DataFrame([dict(k=1, mean=v.mean(), sd=sd, se=se, ci_low=max(0.0, v.mean() - half),
                               ci_high=min(1.0, v.mean() + half), n_groups=g, repeat_sd=np.nan, chance=np.nan)])
    return GroupedRecall(2, alpha, 1, 0, table, pd.DataFrame())


def _per_split(value: float) -> dict:
    return {"recall_at_1": value, "map_at_r": value, "map": value, "jsd": 0.1, "mean_pos_similarity": 0.5}


def test_the_generalization_gap_interval_uses_each_splits_unclipped_standard_error():
    """Train groups [0, 1, 1, 1] (interval clipped at 1), test groups all 0.444: the gap's
    interval is t with Welch-Satterthwaite df from the unclipped standard errors (here the test
    split's is 0, so the train split's 3 df), and it includes 0 (the clipped interval, divided by
    z, excluded it)."""
    train, test = [0.0, 1.0, 1.0, 1.0], [0.4444] * 4
    gap = generalization_gap({"train": _per_split(0.75), "test": _per_split(0.4444)},
                             {"train": _grouped(train), "test": _grouped(test)}, "train")
    row = gap.set_index("metric").loc["grouped_recall_at_1"]
    half = stats.t.ppf(0.975, 3) * np.std(train, ddof=1) / 2
    d = np.mean(train) - np.mean(test)
    assert row["gap_train_minus_test_ci_low"] == pytest.approx(d - half, abs=1e-12)
    assert row["gap_train_minus_test_ci_high"] == pytest.approx(d + half, abs=1e-12)
    assert row["gap_train_minus_test_ci_low"] < 0 < row["gap_train_minus_test_ci_high"]


@settings(max_examples=40, deadline=None)
@given(a=st.lists(st.floats(0, 1), min_size=2, max_size=8), b=st.lists(st.floats(0, 1), min_size=2, max_size=8))
@example(a=[0.0, 0.0], b=[0.0, 2.6e-146])  # variances whose squares underflow (found by hypothesis)
def test_the_generalization_gap_interval_against_welchs_t_interval(a, b):
    """Against the Welch-Satterthwaite t interval of a difference of two independent means, computed
    here from the groups; undefined (NaN) when neither split's groups vary."""
    gap = generalization_gap({"r": _per_split(0.5), "o": _per_split(0.5)}, {"r": _grouped(a), "o": _grouped(b)}, "r")
    row = gap.set_index("metric").loc["grouped_recall_at_1"]
    va, vb = np.var(a, ddof=1) / len(a), np.var(b, ddof=1) / len(b)
    if va + vb == 0:
        assert math.isnan(row["gap_r_minus_o_ci_low"]) and math.isnan(row["gap_r_minus_o_ci_high"])
        return
    top = max(va, vb)  # Welch-Satterthwaite's df do not change with the scale; squares of 1e-292 underflow
    nu = (va / top + vb / top) ** 2 / sum((v / top) ** 2 / (len(x) - 1) for v, x in ((va, a), (vb, b)) if v > 0)
    half = stats.t.ppf(0.975, nu) * math.sqrt(va + vb)
    d = np.mean(a) - np.mean(b)
    assert row["gap_r_minus_o_ci_low"] == pytest.approx(d - half, rel=1e-9, abs=1e-12)
    assert row["gap_r_minus_o_ci_high"] == pytest.approx(d + half, rel=1e-9, abs=1e-12)


def test_integer_scores_beyond_two_to_the_53_keep_their_order():
    s = np.array([2**62 + 1, 2**62, 2**62], dtype=np.int64)
    assert tuple(ac.average_precision([1, 0, 0], s)) == (1.0, 1.0, 1.0)
    assert ac.hit_at_k([1, 0, 0], s, 1) == 1.0
    u = np.array([2**64 - 1, 2**64 - 2], dtype=np.uint64)
    assert tuple(ac.average_precision([0, 1], u)) == (0.5, 0.5, 0.5)
    with pytest.raises(InputError):
        ac.precision_at_k([1, 0], [0.2, 0.1], 10**20)


def _advised(ow) -> tuple[str, str]:
    """The (one-way test, post-hoc procedure) the advice points to."""
    return ("welch", "games-howell") if "read Welch" in ow.advice else ("anova", "tukey")


@pytest.mark.slow
@pytest.mark.parametrize("per_group", [3, 4, WELCH_MIN_GROUP - 1])
def test_the_advised_tests_hold_their_level_on_noise(per_group):
    """Normal noise, 10 equal-variance groups smaller than WELCH_MIN_GROUP: the tests the advice
    points to reject at about alpha (with groups of 3, Welch's ANOVA rejected in ~13 % of runs of
    normal values, ~23 % of uniform ones, and the variance-ratio rule advised it nearly always).
    200 runs at alpha 0.05: the advised one-way test rejects in at most 9 % (binomial 99.9 % bound
    at 5 %: 8.5 %), and so does the advised post-hoc procedure (any pair)."""
    rng = np.random.default_rng(per_group)
    one_way_hits = pair_hits = 0
    runs = 200
    for _ in range(runs):
        ap = pd.DataFrame({"method": "m", "query": np.arange(10 * per_group),
                           "label": np.repeat([f"c{i}" for i in range(10)], per_group),
                           "ap": rng.standard_normal(10 * per_group)})
        ow = one_way(ap)
        test, post = _advised(ow)
        p = ow.tests.set_index("test").loc[test, "p_value"]
        one_way_hits += bool(p < 0.05)
        table = (games_howell if post == "games-howell" else tukey_hsd)(ap, 0.05).table
        pair_hits += bool(table["reject"].any())
    assert one_way_hits / runs <= 0.09, one_way_hits
    assert pair_hits / runs <= 0.09, pair_hits
