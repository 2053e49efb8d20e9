"""A test for every reported metric between methods: McNemar for hit rates, sign-flip permutation
for graded metrics, Holm within each metric, every query used."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis_core import Dataset, evaluate
from analysis_core.stats.analysis import analyse
from analysis_core.stats.paired_tests import metric_paired_tests
from analysis_core.stats.variability import ap_frame, metric_frame


def _long(values: dict[str, np.ndarray], metric: str) -> pd.DataFrame:
    n = len(next(iter(values.values())))
    return pd.concat([pd.DataFrame({"method": m, "query": np.arange(n), "label": "x", "metric": metric, "value": v})
                      for m, v in values.items()], ignore_index=True)


@pytest.mark.parametrize("seed", range(5))
def test_mcnemar_equals_statsmodels_and_the_binomial_test_on_the_discordant_table(seed):
    from statsmodels.stats.contingency_tables import mcnemar

    rng = np.random.default_rng(seed)
    a = (rng.random(40) < 0.7).astype(float)
    b = np.where(rng.random(40) < 0.3, 1 - a, a)
    row = metric_paired_tests(_long({"a": a, "b": b}, "precision_at_1")).iloc[0]
    only_a, only_b = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    table = [[int(np.sum((a == 1) & (b == 1))), only_a], [only_b, int(np.sum((a == 0) & (b == 0)))]]
    assert (row["discordant_a"], row["discordant_b"]) == (only_a, only_b)
    assert row["test"] == "McNemar exact"
    assert row["p_value"] == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    if only_a + only_b:
        assert row["p_value"] == pytest.approx(stats.binomtest(only_a, only_a + only_b, 0.5).pvalue, rel=1e-9)
    assert row["mean_diff"] == pytest.approx((only_a - only_b) / 40)


def test_fractional_hits_from_ties_use_the_permutation_test_and_say_so():
    a = np.array([1, 0.5, 0, 1, 1, 0.25])
    b = np.array([0, 0.5, 0, 0, 1, 0])
    row = metric_paired_tests(_long({"a": a, "b": b}, "recall_at_4")).iloc[0]
    assert row["test"] == "sign-flip permutation" and "fractional hits" in row["note"]


@pytest.mark.parametrize("n", [5, 9, 12])
def test_map_at_r_permutation_p_equals_exact_enumeration(n):
    rng = np.random.default_rng(n)
    a, b = rng.uniform(0, 1, n), rng.uniform(0, 1, n)
    d = a - b
    exact = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product([-1, 1], repeat=n)])
    row = metric_paired_tests(_long({"a": a, "b": b}, "map_at_r")).iloc[0]
    assert row["test"] == "sign-flip permutation"
    assert row["p_value"] == pytest.approx(exact, abs=1e-12)
    ci = stats.ttest_rel(a, b).confidence_interval(0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)


@pytest.mark.slow
def test_holm_is_applied_within_each_metric_as_statsmodels_does():
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(4)
    n = 30
    frames = []
    for metric, hit in (("ap", False), ("precision_at_1", True), ("recall_at_4", True), ("rr", False)):
        base = rng.uniform(0, 1, n)
        vals = {m: (base + shift + rng.normal(0, 0.2, n) > 0.6).astype(float) if hit else
                np.clip(base + shift + rng.normal(0, 0.1, n), 0, 1) for m, shift in (("a", 0), ("b", 0.1), ("c", 0.2))}
        frames.append(_long(vals, metric))
    out = metric_paired_tests(pd.concat(frames, ignore_index=True))
    assert set(out["metric"]) == {"ap", "precision_at_1", "recall_at_4", "rr"}
    for metric, part in out.groupby("metric"):
        assert len(part) == 3
        np.testing.assert_allclose(part["p_holm"], multipletests(part["p_value"], method="holm")[1], rtol=1e-12)
        expected_test = "McNemar exact" if metric in ("precision_at_1", "recall_at_4") else "sign-flip permutation"
        assert (part["test"] == expected_test).all()


def test_seven_methods_ten_classes_every_query_enters_the_mixed_model_and_paired_tests_and_the_cap_is_stated():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 6)
    centres = 2.0 * np.eye(10, 12)
    embs = {f"e{i}": (centres[y] + (1.6 - 0.15 * i) * rng.standard_normal((y.size, 12))).astype(np.float32)
            for i in range(7)}
    ev = evaluate(Dataset(labels=y, embeddings=embs))
    ap = ap_frame(ev)
    n_queries = ap["query"].nunique()
    res = analyse(ap, metrics=metric_frame(ev), posthoc=("tukey",), n_permutations=500)
    assert ap.groupby(["method", "label"]).ngroups == 70
    assert "tukey" not in res.posthoc
    assert any("70 groups" in w and "skipped" in w for w in res.warnings)
    assert (res.paired["n"] == n_queries).all()  # every scored query, every pair, every metric
    assert len(res.paired) == 21 * len(set(res.paired["metric"]))
    assert res.mixed.table["term"].tolist() == ["Intercept"] + [f"method[e{i}]" for i in range(1, 7)]
    assert res.mixed.table["p_value"].notna().all()
    assert res.mixed.n_obs == 7 * n_queries


@pytest.mark.slow
def test_holm_gives_statsmodels_bits_without_its_garbage_collection():
    from statsmodels.stats.multitest import multipletests

    from analysis_core.stats.multiplicity import holm_adjust

    rng = np.random.default_rng(0)
    for n in (1, 2, 3, 7, 45, 200):
        for p in (rng.uniform(0, 1, n), rng.uniform(0, 0.01, n), np.round(rng.uniform(0, 1, n), 1)):
            assert holm_adjust(p).tobytes() == multipletests(p, method="holm")[1].tobytes()


def test_pairs_are_those_of_a_pivot_table_and_the_sign_flip_draws_are_reused_unchanged():
    from analysis_core.stats import paired_tests as pt
    from analysis_core.stats import permutation as mt
    from analysis_core.stats.variability import clean_values

    rng = np.random.default_rng(2)
    rows = [(m, q, v) for q in range(30) for m in ("b", "a", "c10", "c9") if rng.random() < 0.8
            for v in [rng.random() if rng.random() > 0.1 else np.nan]]
    df = pd.DataFrame(rows + rows[:7], columns=["method", "query", "value"])  # repeated rows: the first counts
    wide = clean_values(df, "value").pivot_table(index="query", columns="method", values="value", aggfunc="first")
    expected = [(a, b, wide[[a, b]].dropna()) for a, b in itertools.combinations(sorted(wide.columns), 2)]
    got = list(pt._pairs(df, "value"))
    assert [(a, b) for a, b, _, _ in got] == [(a, b) for a, b, _ in expected]
    for (_, _, va, vb), (a, b, both) in zip(got, expected, strict=True):
        assert va.tobytes() == both[a].to_numpy().tobytes() and vb.tobytes() == both[b].to_numpy().tobytes()
    d = rng.normal(0, 1, (40, 3))
    first = mt.sign_flip_p_values(d, 2000, seed=1)[0]
    assert (40, 2000, 1) in mt._SIGN_CACHE and mt.sign_flip_p_values(d, 2000, seed=1)[0].tobytes() == first.tobytes()


def test_sign_flips_of_several_matrices_share_the_draw_and_keep_the_bits_of_one_call_each():
    from analysis_core.stats import permutation as mt

    rng = np.random.default_rng(5)
    mats = [rng.normal(0, 1, (40, 3)), np.round(rng.normal(0, 1, 40), 1), rng.normal(0, 1, (25, 2)),
            rng.normal(0, 1, (12, 2)), np.asfortranarray(rng.normal(0, 1, (40, 2)))]
    alone = []
    for d in mats:
        mt._P_CACHE.clear()
        alone.append(mt.sign_flip_p_values(d, 3000, seed=4))
    mt._P_CACHE.clear()
    together = mt.sign_flip_p_values_many(mats, 3000, seed=4)
    again = mt.sign_flip_p_values_many(mats, 3000, seed=4)  # stored: the same bits, not recomputed
    for (p, exact), (q, e2), (r, e3) in zip(alone, together, again, strict=True):
        assert p.tobytes() == q.tobytes() == r.tobytes() and exact == e2 == e3
    assert [e for _, e in together] == [False, False, False, True, False]


def test_an_analysis_prepared_once_gives_at_each_alpha_what_a_fresh_analysis_gives():
    from analysis_core.stats.analysis import prepare

    rng = np.random.default_rng(3)
    n = 60
    label = np.repeat([f"c{i}" for i in range(6)], n // 6)
    frames = [pd.DataFrame({"method": m, "query": np.arange(n), "label": label,
                            "ap": np.clip(rng.normal(0.5 + 0.05 * j, 0.2, n), 0, 1)}) for j, m in enumerate("abc")]
    ap = pd.concat(frames, ignore_index=True)
    prepared = prepare(ap)
    for alpha in (0.05, 0.01, 0.2, 0.05):
        got, want = prepared.at(alpha), analyse(ap, alpha)
        assert got.warnings == want.warnings and got.alpha == alpha
        pd.testing.assert_frame_equal(got.paired, want.paired, check_exact=True)
        pd.testing.assert_frame_equal(got.mixed.table, want.mixed.table, check_exact=True)
        for name in want.posthoc:
            pd.testing.assert_frame_equal(got.posthoc[name].table, want.posthoc[name].table, check_exact=True)
        pd.testing.assert_frame_equal(got.summary_frame(), want.summary_frame(), check_exact=True)


def test_signs_kept_packed_are_the_signs_drawn(monkeypatch):
    from analysis_core.stats import permutation as mt

    d = np.random.default_rng(6).normal(0, 1, (300, 2))
    drawn = [c.copy() for c in mt._random_signs(300, 5000, 9)]  # kept as int8 signs
    monkeypatch.setattr(mt, "_SIGN_CACHE", {})
    monkeypatch.setattr(mt, "_SIGN_CACHE_BYTES", 1 << 20)  # 1.5 M signs: more than half, kept packed
    first = [c.copy() for c in mt._random_signs(300, 5000, 9)]
    assert mt._SIGN_CACHE[(300, 5000, 9)][2]  # packed
    again = list(mt._random_signs(300, 5000, 9))
    assert all(a.tobytes() == b.tobytes() == c.tobytes() and c.dtype == np.int8
               for a, b, c in zip(drawn, first, again, strict=True))
    mt._P_CACHE.clear()
    assert mt.sign_flip_p_values(d, 5000, 9)[0].tobytes() == mt._sign_flip([d], 300, 5000, 9)[0][0].tobytes()


@pytest.mark.parametrize("n", [17, 37, 4616])
def test_the_signs_are_numpys_integer_draws_chunk_by_chunk(n):
    from analysis_core.stats import permutation as mt

    chunk = max(1, 4_000_000 // n)
    rng = np.random.default_rng(3)
    for got in mt._random_signs(n, 10_000, 3):
        want = rng.integers(0, 2, (min(chunk, got.shape[0]), n), dtype=np.int8) * 2 - 1
        assert got.tobytes() == want.astype(np.int8).tobytes()
    assert mt._raw_bits_match()  # the fast path was the one tested


def test_wilcoxon_ranks_differences_equal_in_exact_arithmetic_as_ties():
    """Values on a grid of tenths: their exact differences are whole tenths, so |d| tie exactly;
    in float64, 0.3 - 0.2 and 0.8 - 0.9 differ in the last bits. The oracle is scipy's Wilcoxon on
    the exact differences (integers: tenths)."""
    from scipy import stats

    from analysis_core.stats.paired_tests import paired_tests

    rng = np.random.default_rng(11)
    for _ in range(30):
        n = int(rng.integers(6, 40))
        a10, b10 = rng.integers(0, 11, n), rng.integers(0, 11, n)
        df = pd.DataFrame({"method": ["a"] * n + ["b"] * n, "query": list(range(n)) * 2,
                           "value": np.r_[a10 / 10, b10 / 10]})
        exact = (a10 - b10).astype(float)
        nz = exact[exact != 0]
        if nz.size < 2:
            continue
        method = "exact" if nz.size <= 50 and np.unique(np.abs(nz)).size == nz.size else "asymptotic"
        expected = stats.wilcoxon(nz, correction=False, method=method).pvalue
        got = paired_tests(df, value="value", n_permutations=200)["p_wilcoxon"].iloc[0]
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
