"""Per-query metrics against outside oracles: scikit-learn's AP and brute-force rankings on
tie-free data; exhaustive enumeration of tie orders on tied data."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

from analysis_core import Dataset, evaluate
from analysis_core.engine.core import run_pass

from .oracle import enumerate_tie_orders, leave_one_out_rows, ranking_metrics, score_matrix

KS = (1, 2, 4, 8)
METRICS = ["ap", "map_at_r", "r_precision", "rr"] + [f"precision_at_{k}" for k in KS] + [f"recall_at_{k}" for k in KS]


def _by_query(res):
    cols = list(res.columns)
    return {int(q): dict(zip(cols, v, strict=False)) for q, v in zip(res.query_items, res.values, strict=False)}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 70), d=st.integers(2, 9), c=st.integers(2, 6),
       sim=st.sampled_from(["cosine", "dot", "euclidean"]))
def test_tie_free_metrics_equal_sklearn_and_brute_force(seed, n, d, c, sim):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    y = rng.integers(0, c, n)
    S = score_matrix(X, sim)
    # tie-free at float32 resolution: every row's scores are well separated
    gaps = np.diff(np.sort(S + np.diag(np.full(n, np.inf)), axis=1)[:, :-1], axis=1)
    assume(gaps.size == 0 or gaps.min() > 1e-4 * max(1.0, np.abs(S).max()))
    res = _by_query(run_pass(X, y, similarity=sim, ks=KS))
    for i, scores, rel in leave_one_out_rows(S, y):
        got = res[i]
        assert got["ap"] == pytest.approx(average_precision_score(rel, scores), abs=1e-9)
        ref = ranking_metrics(rel[np.argsort(-scores, kind="stable")], KS)
        for m in METRICS:
            assert got[m] == pytest.approx(ref[m], abs=1e-9), m
        assert got["ap_lower"] == pytest.approx(got["ap"], abs=1e-12)
        assert got["ap_upper"] == pytest.approx(got["ap"], abs=1e-12)
        assert got["n_mixed_tie_blocks"] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(4, 11), d=st.integers(1, 3), c=st.integers(2, 3),
       sim=st.sampled_from(["dot", "euclidean"]))
def test_tied_expectations_equal_exhaustive_enumeration(seed, n, d, c, sim):
    # small integer vectors: many exact ties, and scores exact in float32 and float64 alike
    rng = np.random.default_rng(seed)
    X = rng.integers(-1, 2, (n, d)).astype(np.float32)
    y = rng.integers(0, c, n)
    res = _by_query(run_pass(X, y, similarity=sim, ks=KS))
    S = score_matrix(X, sim)
    for i, scores, rel in leave_one_out_rows(S, y):
        ref = enumerate_tie_orders(scores, rel, KS)
        got = res[i]
        for m in METRICS + ["ap_lower", "ap_upper"]:
            assert got[m] == pytest.approx(ref[m], abs=1e-9), (m, i)
        assert got["ap_lower"] - 1e-12 <= got["ap"] <= got["ap_upper"] + 1e-12


def test_duplicate_vectors_tie_exactly_under_cosine():
    rng = np.random.default_rng(3)
    base = rng.standard_normal((6, 5)).astype(np.float32)
    X = base[rng.integers(0, 6, 11)]  # exact duplicates
    y = rng.integers(0, 3, 11)
    res = _by_query(run_pass(X, y, similarity="cosine", ks=KS))
    # reference scores: duplicates are equal by construction in float64 too
    S = score_matrix(X, "cosine")
    S = np.round(S, 9)  # equal vectors -> bit-equal rows after rounding away float64 noise
    for i, scores, rel in leave_one_out_rows(S, y):
        ref = enumerate_tie_orders(scores, rel, KS)
        for m in METRICS + ["ap_lower", "ap_upper"]:
            assert res[i][m] == pytest.approx(ref[m], abs=1e-9), (m, i)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_all_zero_exploit_reproduces_paper_002(seed):
    """Nicolaou et al.: 10 classes x 100 all-zero vectors -> mAP between 5.18 % and 100 %;
    the expected value is a random ranking's expected AP, whatever the row order."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.repeat(np.arange(10), 100))
    ds = Dataset(labels=labels, embeddings={"zero": np.zeros((1000, 16), np.float32)})
    s = evaluate(ds, similarity="dot").summary()["methods"]["zero"]["map"]
    assert round(100 * s["lower"], 2) == 5.18
    assert s["upper"] == 1.0
    # a uniformly random ranking of 999 gallery items with 99 positives, summed over ranks k:
    # P(positive at k) = R/N, and then E[positives in top k] = 1 + (k-1)(R-1)/(N-1)
    N, R = 999, 99
    exact = sum((R / N) * (1 + (k - 1) * (R - 1) / (N - 1)) / k for k in range(1, N + 1)) / R
    assert s["expected"] == pytest.approx(exact, abs=1e-12)
    # and a Monte-Carlo check of that formula
    mc = [ranking_metrics(rng.permutation(np.arange(N) < R))["ap"] for _ in range(3000)]
    assert abs(np.mean(mc) - exact) < 4 * np.std(mc) / math.sqrt(len(mc))


def test_recall_grid_pr_curve_equals_direct_computation():
    rng = np.random.default_rng(5)
    X = rng.standard_normal((80, 6)).astype(np.float32)
    y = rng.integers(0, 4, 80)
    n_p = 11
    res = run_pass(X, y, n_recall=n_p)
    S = score_matrix(X, "cosine")
    curves = {int(q): c for q, c in zip(res.query_items, res.pr_curves, strict=False)}
    grid = np.linspace(0, 1, n_p)
    for i, scores, rel in leave_one_out_rows(S, y):
        ranks = np.nonzero(rel[np.argsort(-scores)])[0] + 1
        R = ranks.size
        xs = np.arange(1, R + 1) / R
        ys = np.arange(1, R + 1) / ranks
        ref = np.interp(grid, xs, ys)  # constant below 1/R: np.interp holds the first value
        np.testing.assert_allclose(curves[i], ref, atol=1e-9)


def test_lone_queries_are_counted_not_scored():
    X = np.random.default_rng(0).standard_normal((7, 3)).astype(np.float32)
    y = np.array([0, 0, 1, 1, 1, 2, 3])  # classes 2 and 3 have one item each
    ds = Dataset(labels=y, embeddings={"m": X})
    ev = evaluate(ds)
    s = ev.summary()
    assert s["dataset"]["n_lone_queries"] == 2
    assert s["dataset"]["n_queries"] == 5
    pq = ev.per_query()
    lone = pq[pq["query"].isin([5, 6])]
    assert lone["ap"].isna().all() and (lone["excluded"] != "").all()
