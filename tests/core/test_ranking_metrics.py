"""The public one-ranking metric functions: scikit-learn on tie-free input, exhaustive enumeration
of tie orders on tied input, the engine's per-query values, input validation, and their doctests."""

from __future__ import annotations

import doctest
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score

import analysis_core.metrics.ranking as ranking
from analysis_core import (
    Dataset,
    InputError,
    average_precision,
    evaluate,
    hit_at_k,
    map_at_r,
    pr_curve,
    precision_at_k,
    r_precision,
    reciprocal_rank,
)

from .oracle import enumerate_tie_orders, ranking_metrics, score_matrix, tie_blocks

KS = (1, 2, 3, 5, 8)


def test_docstring_examples_run():
    res = doctest.testmod(ranking, optionflags=doctest.ELLIPSIS)
    assert res.failed == 0 and res.attempted >= 9


@st.composite
def rankings(draw, tied: bool):
    n = draw(st.integers(1, 9 if tied else 40))
    rel = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if not rel.any():
        rel[draw(st.integers(0, n - 1))] = True
    if tied:  # few distinct values: many ties, blocks mixing relevant and not
        scores = np.array(draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)), float)
    else:
        scores = np.random.default_rng(draw(st.integers(0, 2**32 - 1))).permutation(n) * 0.37 - 3.0
    return rel, scores


def _curve(rel_sorted: np.ndarray, n_points: int) -> np.ndarray:
    ranks = np.nonzero(rel_sorted)[0] + 1
    R = ranks.size
    return np.interp(np.arange(n_points) / (n_points - 1), np.arange(1, R + 1) / R, np.arange(1, R + 1) / ranks)


@settings(max_examples=150, deadline=None)
@given(rankings(tied=False))
def test_tie_free_equals_sklearn_and_brute_force(case):
    rel, scores = case
    ap = average_precision(rel.tolist(), scores.tolist())
    assert ap.expected == pytest.approx(average_precision_score(rel, scores), abs=1e-12)
    assert ap.lower == pytest.approx(ap.expected, abs=1e-12) and ap.upper == pytest.approx(ap.expected, abs=1e-12)
    sorted_rel = rel[np.argsort(-scores)]
    ref = ranking_metrics(sorted_rel, KS)
    assert map_at_r(rel, scores) == pytest.approx(ref["map_at_r"], abs=1e-12)
    assert r_precision(rel, scores) == pytest.approx(ref["r_precision"], abs=1e-12)
    assert reciprocal_rank(rel, scores) == pytest.approx(ref["rr"], abs=1e-12)
    for k in KS:
        assert precision_at_k(rel, scores, k) == pytest.approx(ref[f"precision_at_{k}"], abs=1e-12)
        assert hit_at_k(rel, scores, k) == pytest.approx(ref[f"recall_at_{k}"], abs=1e-12)
    grid, prec = pr_curve(rel, scores, n_points=11)
    np.testing.assert_allclose(grid, np.linspace(0, 1, 11), atol=1e-15)
    np.testing.assert_allclose(prec, _curve(sorted_rel, 11), atol=1e-12)


def _enumerated_pr_points(rel: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """E[i / rank_i], i = 1..R, over every arrangement of relevant items inside the tie blocks."""
    blocks = tie_blocks(scores, rel)
    choices = [list(itertools.combinations(range(t), r)) for t, r in blocks]
    pts = []
    for combo in itertools.product(*choices):
        seq = np.concatenate([np.isin(np.arange(t), pos) for (t, _), pos in zip(blocks, combo, strict=True)])
        ranks = np.nonzero(seq)[0] + 1
        pts.append(np.arange(1, ranks.size + 1) / ranks)
    return np.mean(pts, axis=0)


@settings(max_examples=200, deadline=None)
@given(rankings(tied=True), st.integers(2, 9))
def test_tied_equals_enumeration_of_tie_orders(case, n_points):
    rel, scores = case
    ref = enumerate_tie_orders(scores, rel, KS)
    ap = average_precision(rel, scores)
    assert (ap.expected, ap.lower, ap.upper) == pytest.approx((ref["ap"], ref["ap_lower"], ref["ap_upper"]), abs=1e-12)
    assert ap.lower <= ap.expected + 1e-15 and ap.expected <= ap.upper + 1e-15
    assert map_at_r(rel, scores) == pytest.approx(ref["map_at_r"], abs=1e-12)
    assert r_precision(rel, scores) == pytest.approx(ref["r_precision"], abs=1e-12)
    assert reciprocal_rank(rel, scores) == pytest.approx(ref["rr"], abs=1e-12)
    for k in KS:
        assert precision_at_k(rel, scores, k) == pytest.approx(ref[f"precision_at_{k}"], abs=1e-12)
        assert hit_at_k(rel, scores, k) == pytest.approx(ref[f"recall_at_{k}"], abs=1e-12)
    # the curve: linear interpolation of the expected points (= the expected curve); interpolated
    # precision: the best expected point at recall >= r
    pts = _enumerated_pr_points(rel, scores)
    R = pts.size
    grid = np.arange(n_points) / (n_points - 1)
    np.testing.assert_allclose(pr_curve(rel, scores, n_points)[1],
                               np.interp(grid, np.arange(1, R + 1) / R, pts), atol=1e-12)
    best = [pts[np.arange(1, R + 1) / R >= g - 1e-12].max() for g in grid]
    np.testing.assert_allclose(pr_curve(rel, scores, n_points, interpolated=True)[1], best, atol=1e-12)


def test_engine_per_query_values_are_these_functions():
    rng = np.random.default_rng(7)
    X = rng.integers(-1, 2, (24, 2)).astype(np.float32)  # integer vectors: exact ties under dot
    y = rng.integers(0, 3, 24)
    pq = evaluate(Dataset(labels=y, embeddings={"m": X}), similarity="dot", ks=(1, 3)).per_query("m")
    S = score_matrix(X, "dot")
    for row in pq.itertuples():
        i = row.query
        others = np.arange(24) != i
        rel = y[others] == y[i]
        if not rel.any():
            continue
        ap = average_precision(rel, S[i, others])
        assert (row.ap, row.ap_lower, row.ap_upper) == pytest.approx(tuple(ap), abs=1e-12)
        assert row.map_at_r == pytest.approx(map_at_r(rel, S[i, others]), abs=1e-12)
        assert row.recall_at_3 == pytest.approx(hit_at_k(rel, S[i, others], 3), abs=1e-12)
        assert row.rr == pytest.approx(reciprocal_rank(rel, S[i, others]), abs=1e-12)


@pytest.mark.parametrize(("args", "phrase"), [
    (([1, 0], [0.1, 0.2, 0.3]), "length mismatch"),
    (([1, 2, 0], [0.1, 0.2, 0.3]), "binary"),
    (([0, 0, 0], [0.1, 0.2, 0.3]), "no relevant"),
    (([1, 0, 0], [0.1, np.nan, 0.3]), "NaN"),
    (([1, 0, 0], [0.1, np.inf, 0.3]), "infinite"),
    (([[1, 0]], [[0.1, 0.2]]), "1-D"),
    (([1, 0], ["a", "b"]), "non-numeric"),
    (([], []), "no relevant"),
])
def test_inputs_are_validated_up_front(args, phrase):
    for f in (average_precision, map_at_r, r_precision, reciprocal_rank, pr_curve):
        with pytest.raises(InputError, match=phrase):
            f(*args)
    for f in (precision_at_k, hit_at_k):
        with pytest.raises(InputError, match=phrase):
            f(*args, k=1)


@pytest.mark.parametrize("k", [0, -1, 1.5, True])
def test_cutoffs_are_validated(k):
    with pytest.raises(InputError, match="positive integer"):
        precision_at_k([1, 0], [0.2, 0.1], k)
    with pytest.raises(InputError, match="positive integer"):
        hit_at_k([1, 0], [0.2, 0.1], k)
    with pytest.raises(InputError, match="recall grid"):
        pr_curve([1, 0], [0.2, 0.1], n_points=1)


def test_edges_one_item_all_relevant_all_tied():
    assert average_precision([1], [0.0]) == (1.0, 1.0, 1.0)
    assert average_precision([True, True, True], [1, 1, 1]) == (1.0, 1.0, 1.0)
    # all tied, one relevant of four: E[AP] = E[1/rank] = (1 + 1/2 + 1/3 + 1/4) / 4
    assert average_precision([0, 0, 1, 0], [5, 5, 5, 5]).expected == pytest.approx(25 / 48, abs=1e-15)
    assert precision_at_k([1, 0], [0.2, 0.1], k=5) == pytest.approx(1 / 5)  # divisor k, trec_eval's P_k
