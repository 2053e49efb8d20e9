"""Statistics and the report on degenerate data: every statistic is defined or undefined with its
reason, nothing raises, nothing claims significance on data that carry no information."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_core import Dataset, InputError, evaluate
from analysis_core.report import build_report
from analysis_core.stats.analysis import analyse

from ..helpers import run_cli

P_COLUMNS = {"p_value", "p_adj", "p_permutation", "p_wilcoxon", "p_permutation_holm", "p_wilcoxon_holm", "p_holm"}


def _p_values_are_probabilities_or_explained(res) -> None:
    """Every p-value in [0, 1], or NaN with an 'undefined' reason on its row."""
    tables = [res.one_way.tests, *(p.table for p in res.posthoc.values())]
    if res.two_way is not None:
        tables += [res.two_way[~res.two_way["term"].str.startswith("Residual")], res.mixed.table, res.paired]
    for t in tables:
        for col in P_COLUMNS & set(t.columns):
            p = t[col].to_numpy(np.float64)
            ok = np.isfinite(p)
            assert ((p[ok] >= 0) & (p[ok] <= 1)).all(), (col, t)
            for note in t.loc[~ok, "note"]:
                assert "undefined" in note or "zero" in note or "no query" in note, (col, note)


def _significant(res, alpha: float) -> list[str]:
    found = [f"one-way {r.test}" for r in res.one_way.tests.itertuples() if r.p_value < alpha]
    found += [f"{k} {r.group1}-{r.group2}" for k, p in res.posthoc.items() for r in p.table.itertuples() if r.reject]
    if res.two_way is not None:
        found += [f"two-way {r.term}" for r in res.two_way.itertuples() if r.p_value < alpha]
        found += [f"mixed {r.term}" for r in res.mixed.table.itertuples() if r.term != "Intercept"
                  and r.p_value < alpha]
        found += [f"paired {r.method_a}-{r.method_b}" for r in res.paired.itertuples() if r.p_value < alpha
                  or r.p_wilcoxon < alpha]
    return found


@st.composite
def ap_tables(draw):
    """Per-query AP tables with the edges on purpose: groups of 1-4 queries, constant groups,
    two groups, identical methods, values from a small set (ties) or continuous."""
    n_classes = draw(st.integers(1, 4))
    n_methods = draw(st.integers(1, 3))
    identical = draw(st.booleans())
    pool = draw(st.sampled_from(["constant", "few", "continuous"]))
    rows, q = [], 0
    base = draw(st.floats(0, 1))
    for c in range(n_classes):
        size = draw(st.integers(1, 4))
        const_group = draw(st.booleans())
        for _ in range(size):
            first = None
            for m in range(n_methods):
                if pool == "constant":
                    v = base
                elif const_group:
                    v = round(0.25 * (c + 1), 2)
                elif pool == "few":
                    v = draw(st.sampled_from([0.0, 0.5, 1.0]))
                else:
                    v = draw(st.floats(0, 1))
                if identical and first is not None:
                    v = first
                first = v if first is None else first
                rows.append(dict(method=f"m{m}", query=q, label=f"c{c}", ap=v))
            q += 1
    return pd.DataFrame(rows), pool == "constant", identical


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ap_tables(), st.sampled_from([0.01, 0.05, 0.1]))
def test_analyse_is_total_and_claims_nothing_on_uninformative_tables(case, alpha):
    ap, constant, identical = case
    res = analyse(ap, alpha, n_permutations=200)
    _p_values_are_probabilities_or_explained(res)
    if constant:
        assert _significant(res, alpha) == []
    if identical and res.paired is not None:
        assert not res.paired["reject"].any()
        assert (res.paired["p_permutation"] == 1.0).all()
        assert res.mixed.table["p_value"].isna().all()


def test_rounding_noise_is_not_variance():
    """Constant AP up to the last bit (0.1 + 0.2 vs 0.3): every test undefined, as R's
    oneway.test gives NaN, instead of F = 9.8, p = 4e-12 from the noise."""
    vals = np.array([0.1 + 0.2, 0.3, 0.3, 0.30000000000000004] * 6)
    ap = pd.DataFrame({"method": np.repeat(["A", "B"], 12), "query": np.tile(np.arange(12), 2),
                       "label": np.tile(np.repeat(["x", "y", "z"], 4), 2), "ap": vals})
    res = analyse(ap)
    assert res.one_way.tests["p_value"].isna().all()
    assert res.one_way.tests["note"].str.contains("every value is the same").all()
    assert res.mixed.table["p_value"].isna().all()
    assert any("one-way tests undefined" in w for w in res.warnings)


def test_levene_skips_groups_of_two_and_the_welch_advice_does_not_rest_on_it():
    rng = np.random.default_rng(3)
    ap = pd.DataFrame({"method": "m", "query": range(8), "label": np.repeat(list("abcd"), 2),
                       "ap": rng.uniform(0, 1, 8)})
    res = analyse(ap)
    lev = res.one_way.tests.set_index("test").loc["levene"]
    assert math.isnan(lev["p_value"]) and "at least 3" in lev["note"]
    assert not any("Levene's test rejects" in w for w in res.warnings)


def test_tukey_with_two_groups_equals_the_t_test():
    """k = 2: Tukey HSD is the pooled two-sample t test (q = sqrt(2) |t|); its per-group
    simultaneous intervals are each half the pair's half-width."""
    from scipy import stats

    rng = np.random.default_rng(5)
    a, b = rng.normal(0.4, 0.1, 9), rng.normal(0.55, 0.1, 13)
    ap = pd.DataFrame({"method": "m", "query": range(22), "label": ["a"] * 9 + ["b"] * 13, "ap": np.r_[a, b]})
    res = analyse(ap, posthoc=("tukey",))
    row = res.posthoc["tukey"].table.iloc[0]
    t = stats.ttest_ind(b, a)
    assert row["p_adj"] == pytest.approx(t.pvalue, rel=1e-8)
    ci = t.confidence_interval(0.95)
    assert (row["lower"], row["upper"]) == pytest.approx((ci.low, ci.high), rel=1e-8)
    iv = res.posthoc["tukey"].intervals.set_index("group")
    half = (iv["high"] - iv["low"]) / 2
    assert half["a"] + half["b"] == pytest.approx((ci.high - ci.low) / 2, rel=1e-8)


def test_games_howell_pairs_of_constant_groups_are_undefined_not_significant():
    ap = pd.DataFrame({"method": "m", "query": range(9), "label": np.repeat(list("abc"), 3),
                       "ap": [1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.2, 0.6, 0.4]})
    res = analyse(ap)
    gh = res.posthoc["games-howell"].table.set_index(["group1", "group2"])
    assert math.isnan(gh.loc[("a", "b"), "p_adj"]) and not gh.loc[("a", "b"), "reject"]
    assert "constant" in gh.loc[("a", "b"), "note"]
    assert np.isfinite(gh.loc[("a", "c"), "p_adj"])


def test_paired_sign_flip_test_is_exact_for_small_n():
    import itertools

    d = np.array([0.3, -0.1, 0.25, 0.05, 0.2, -0.02, 0.15, 0.1, 0.4, -0.3])
    exact = np.mean([abs(np.dot(s, d)) >= abs(d.sum()) - 1e-12 for s in itertools.product([-1, 1], repeat=10)])
    ap = pd.DataFrame({"method": ["a"] * 10 + ["b"] * 10, "query": list(range(10)) * 2, "label": "x",
                       "ap": np.r_[d + 0.5, np.full(10, 0.5)]})
    assert analyse(ap).paired.iloc[0]["p_permutation"] == pytest.approx(exact, abs=1e-12)


# ------------------------------------------------------------------ named degenerate data sets, end to end


def _clusters(rng, n_classes, per_class, spread=0.3, dim=6):
    y = np.repeat(np.arange(n_classes), per_class)
    centres = 3.0 * np.eye(n_classes, dim)
    return (centres[y] + spread * rng.standard_normal((y.size, dim))).astype(np.float32), y


def _named_cases(tmp_path):
    rng = np.random.default_rng(0)
    cases = {}

    def save(name, **arrays):
        p = tmp_path / f"{name}.npz"
        np.savez(p, **arrays)
        cases[name] = p

    X, y = _clusters(rng, 4, 6, spread=0.01)  # perfectly separated: every class AP = 1
    save("perfectly_separated", embeddings=X, labels=y)
    X, y = _clusters(rng, 5, 2, spread=0.01)  # 2-item classes retrieving each other first
    save("pairs_retrieve_each_other", embeddings=X, labels=y)
    X, y = _clusters(rng, 2, 8, spread=1.0)
    save("two_classes", embeddings=X, labels=y)
    X, y = _clusters(rng, 3, 5, spread=1.0)
    save("per_class_one_several_methods", embeddings_a=X, embeddings_b=X + 0.3 * rng.standard_normal(X.shape)
         .astype(np.float32), labels=y)
    save("every_vector_identical", embeddings_a=np.ones((12, 4), np.float32),
         embeddings_b=np.ones((12, 4), np.float32), labels=np.repeat(np.arange(3), 4))
    X, y = _clusters(rng, 4, 2, spread=1.0)
    save("two_queries_per_class", embeddings=X, labels=y)
    X, y = _clusters(rng, 3, 5, spread=1.0)
    save("constant_confidence", embeddings=X, labels=y, confidence=np.full(y.size, 0.7))
    X, y = _clusters(rng, 3, 6, spread=1.0)
    split = np.where(y == 2, "test", "train")
    save("one_class_split", embeddings=X, labels=y, split=split)
    X, y = _clusters(rng, 3, 6, spread=1.0)
    save("identical_methods", embeddings_a=X, embeddings_b=X.copy(), labels=y)
    return cases


EXPECTED_WARNINGS = {
    "perfectly_separated": ["undefined"],
    "pairs_retrieve_each_other": ["undefined"],
    "two_classes": [],
    "per_class_one_several_methods": ["residual df 0"],
    "every_vector_identical": ["every value is the same"],
    "two_queries_per_class": ["levene: undefined"],
    "constant_confidence": ["the confidence is constant"],
    "one_class_split": ["split 'test'"],
    "identical_methods": ["agree on every query"],
}


@pytest.mark.slow
def test_report_exits_0_on_every_named_degenerate_case_and_names_what_is_undefined(tmp_path):
    cases = _named_cases(tmp_path)
    assert set(cases) == set(EXPECTED_WARNINGS)
    for name, path in cases.items():
        extra = ["--per-class", "1"] if name == "per_class_one_several_methods" else []
        out = tmp_path / f"out_{name}"
        r = run_cli("report", path, "--out", out, "--format", "", "--quiet", *extra)
        assert r.returncode == 0, (name, r.stderr[-2000:])
        assert "Traceback" not in r.stderr
        summary = json.loads((out / "summary.json").read_text())
        text = " | ".join(summary["warnings"])
        for phrase in EXPECTED_WARNINGS[name]:
            assert phrase in text, (name, phrase, summary["warnings"])
        for csv in (out / "tables").glob("*.csv"):
            t = pd.read_csv(csv)
            for col in P_COLUMNS & set(t.columns):
                p = t[col].to_numpy(np.float64)
                assert ((p[np.isfinite(p)] >= 0) & (p[np.isfinite(p)] <= 1)).all(), (name, csv.name)
        if name in ("every_vector_identical", "identical_methods"):
            pt = pd.read_csv(out / "tables" / "paired_tests.csv")
            assert not pt["reject"].any()


@st.composite
def small_datasets(draw):
    n_classes = draw(st.integers(2, 4))
    sizes = [draw(st.integers(1, 3)) for _ in range(n_classes)]
    y = np.repeat(np.arange(n_classes), sizes)
    kind = draw(st.sampled_from(["random", "identical", "few_values"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if kind == "identical":
        X = np.ones((y.size, 3), np.float32)
    elif kind == "few_values":
        X = rng.integers(1, 3, (y.size, 3)).astype(np.float32)
    else:
        X = rng.standard_normal((y.size, 3)).astype(np.float32)
    embs = {"a": X}
    if draw(st.booleans()):
        embs["b"] = X.copy() if draw(st.booleans()) else rng.standard_normal(X.shape).astype(np.float32)
    conf = np.full(y.size, 0.5) if draw(st.booleans()) else None
    split = np.where(np.arange(y.size) % 2 == 0, "train", "test") if draw(st.booleans()) else None
    return Dataset(labels=y, embeddings=embs, confidence=conf, split=split)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_datasets())
def test_build_report_never_raises_on_small_embedding_sets(ds):
    """Total on any small set; where no query has a positive the report is refused with that
    reason (an InputError, exit 2 on the command line) instead of tables of NaN."""
    ev = evaluate(ds)
    if ev.n_queries() == ev.n_lone_queries():
        with pytest.raises(InputError, match="no query has a positive"):
            build_report(ev, group_size=2, sweep_repeats=1)
        return
    rep = build_report(ev, group_size=2, sweep_repeats=1)
    for name, t in rep.tables.items():
        for col in P_COLUMNS & set(t.columns):
            p = t[col].to_numpy(np.float64)
            assert ((p[np.isfinite(p)] >= 0) & (p[np.isfinite(p)] <= 1)).all(), name


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.2, 0.5, 0.9]), st.sampled_from([0.0, 1.0])), min_size=1, max_size=7))
def test_error_reject_curve_is_the_expectation_over_orders_of_equal_confidence(items):
    """Oracle: enumerate every order of the queries that is consistent with the confidences
    (ties in any order) and average the kept error — equal to the curve, for every cut."""
    import itertools

    from analysis_core.stats.error_reject import error_reject_curve
    conf = np.array([c for c, _ in items])
    p1 = np.array([p for _, p in items])
    n = conf.size
    erc = error_reject_curve(conf, p1, p1, n_points=n + 1)
    orders = [o for o in itertools.permutations(range(n)) if all(conf[o[i]] >= conf[o[i + 1]] for i in range(n - 1))]
    for row in erc.curve.itertuples():
        k = int(row.n_kept)
        expected = np.mean([np.mean(1 - p1[list(o[:k])]) for o in orders])
        assert row.error == pytest.approx(expected, abs=1e-12)
        assert row.random_error == pytest.approx(np.mean(1 - p1), abs=1e-12)
    shuffled = np.random.default_rng(0).permutation(n)
    again = error_reject_curve(conf[shuffled], p1[shuffled], p1[shuffled], n_points=n + 1)
    np.testing.assert_allclose(again.curve["error"], erc.curve["error"], atol=1e-12)  # row order is irrelevant
    if np.ptp(conf) == 0:
        assert math.isnan(erc.spearman) and "constant" in erc.note
        assert np.allclose(erc.curve["error"], np.mean(1 - p1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.floats(-2, 2, allow_nan=False), st.just(math.nan),
                          st.sampled_from([0.25, 0.25 + 1e-15, 0.5])), max_size=30))
def test_merging_rounding_noise_keeps_undefined_values_undefined(values):
    """NaN is not a value to merge: it stays NaN, and the defined values merge among themselves
    (before, a NaN sorted last and took the largest value's place)."""
    from analysis_core.stats.variability import merge_rounding_noise

    x = np.array(values, np.float64)
    out = merge_rounding_noise(x)
    nan = np.isnan(x)
    assert np.array_equal(np.isnan(out), nan)
    np.testing.assert_array_equal(out[~nan], merge_rounding_noise(x[~nan]))
    assert np.all(np.abs(out[~nan] - x[~nan]) <= 1e-12 * max(1, len(values)))
