"""Collapsed embeddings (many items on one point, or on a few): the engine ranks one query per
item group and weighs pairs by group counts; its metrics must equal those of every item ranked
on its own, here from outside oracles: exhaustive enumeration of tie orders (small cases), the
expectation summed over the positions of each positive (:func:`.oracle.expected_by_positions`,
blocks of thousands of items), and the closed form of one tie block holding the whole gallery."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis_core as ac
from analysis_core.engine.core import run_pass
from analysis_core.metrics.tie_blocks import _affine_over_ranks

from .oracle import enumerate_tie_orders, expected_by_positions, score_matrix, tie_blocks

KS = (1, 2, 4, 8)
METRICS = (["ap", "ap_lower", "ap_upper", "map_at_r", "r_precision", "rr", "ndcg"]
           + [f"precision_at_{k}" for k in KS] + [f"recall_at_{k}" for k in KS])


def _oracle_rows(S: np.ndarray, labels: np.ndarray, isq: np.ndarray, isg: np.ndarray):
    """(query, tie blocks of its gallery) for every query with a positive: its gallery is every
    gallery item but itself, ranked by the float64 score matrix."""
    n = S.shape[0]
    for i in np.nonzero(isq)[0]:
        mask = isg & (np.arange(n) != i)
        rel = labels[mask] == labels[i]
        if rel.any():
            yield int(i), tuple(tie_blocks(S[i, mask], rel))


def _check_against_positions(X, y, sim, isq=None, isg=None, n_points=11):
    n = len(y)
    res = run_pass(X, y, is_query=isq, is_gallery=isg, similarity=sim, ks=KS, n_recall=n_points)
    got = {int(q): (dict(zip(res.columns, v, strict=True)), c)
           for q, v, c in zip(res.query_items, res.values, res.pr_curves, strict=True)}
    isq = np.ones(n, bool) if isq is None else isq
    isg = np.ones(n, bool) if isg is None else isg
    assert sorted(got) == np.nonzero(isq)[0].tolist()  # every query has its row, grouped or not
    cache: dict = {}  # queries with the same tie blocks have the same expectations
    scored = 0
    for i, blocks in _oracle_rows(score_matrix(X, sim), y, isq, isg):
        ref = cache.get(blocks) or cache.setdefault(blocks, expected_by_positions(list(blocks), KS, n_points))
        values, curve = got[i]
        assert values["n_positives"] == sum(r for _, r in blocks)
        for m in METRICS:
            assert values[m] == pytest.approx(ref[m], abs=1e-9), (m, i)
        np.testing.assert_allclose(curve, ref["pr_curve"], atol=1e-9)
        scored += 1
    lone = [q for q, (v, _) in got.items() if v["n_positives"] == 0]
    assert scored + len(lone) == len(got)


def _points(n: int, k: int, d: int, seed: int) -> np.ndarray:
    """n items on k random points (k = 1: identical rows)."""
    rng = np.random.default_rng(seed)
    P = rng.standard_normal((k, d)).astype(np.float32)
    return P[np.sort(rng.integers(0, k, n)) if k > 1 else np.zeros(n, int)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), blocks=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 6)), min_size=1,
                                                      max_size=4))
def test_the_position_oracle_equals_exhaustive_enumeration(seed, blocks):
    """The oracle for large blocks against every tie order of small ones (itself an oracle of the
    existing tests), PR curve included (linear interpolation commutes with the expectation, so
    the expected curve is the mean of every order's curve)."""
    blocks = [(t, min(r, t)) for t, r in blocks]
    if not sum(r for _, r in blocks):
        blocks[0] = (blocks[0][0], 1)
    scores = np.concatenate([np.full(t, -c, float) for c, (t, _) in enumerate(blocks)])
    rel = np.concatenate([np.arange(t) < r for t, r in blocks])
    np.random.default_rng(seed).shuffle(perm := np.arange(scores.size))
    scores, rel = scores[perm], rel[perm]  # the blocks as the oracles find them
    ref = enumerate_tie_orders(scores, rel, KS)
    got = expected_by_positions(tie_blocks(scores, rel), KS)
    for m in METRICS:
        if m != "ndcg":
            assert got[m] == pytest.approx(ref[m], abs=1e-12), m
    # nDCG and the PR curve by enumeration here: every arrangement of positives inside blocks
    R = int(rel.sum())
    grid = np.linspace(0, 1, 11)
    choices = [list(itertools.combinations(range(t), r)) for t, r in blocks]
    curves, dcgs = [], []
    for combo in itertools.product(*choices):
        seq = np.concatenate([np.isin(np.arange(t), pos) for (t, _), pos in zip(blocks, combo, strict=True)])
        ranks = np.nonzero(seq)[0] + 1
        curves.append(np.interp(grid, np.arange(1, R + 1) / R, np.arange(1, R + 1) / ranks))
        dcgs.append((1 / np.log2(ranks + 1.0)).sum() / (1 / np.log2(np.arange(1, R + 1) + 1.0)).sum())
    np.testing.assert_allclose(got["pr_curve"], np.mean(curves, axis=0), atol=1e-12)
    assert got["ndcg"] == pytest.approx(np.mean(dcgs), abs=1e-12)


@pytest.mark.parametrize("sim", ["cosine", "euclidean"])
@pytest.mark.parametrize(("n", "k", "n_classes", "roles"), [
    (2, 1, 1, False), (3, 1, 2, False), (50, 1, 2, False), (2000, 1, 2, False), (1500, 1, 3, True),
    (2000, 2, 2, False), (2000, 5, 3, False), (1200, 5, 2, True), (600, 3, 4, True),
])
def test_collapsed_embeddings_equal_the_position_oracle(n, k, n_classes, roles, sim):
    """Identical rows and few-point embeddings up to 2 000 items, leave-one-out and query/gallery
    roles: every per-query metric and PR curve of every query equals the oracle's expectation over
    tie orders for that query's own gallery (the query itself left out)."""
    rng = np.random.default_rng(n + 7 * k)
    X = _points(n, k, 6, seed=n + k)
    y = rng.integers(0, n_classes, n)
    isq = isg = None
    if roles:
        role = rng.choice(["query", "gallery", "both"], n)
        isq, isg = role != "gallery", role != "query"
    _check_against_positions(X, y, sim, isq, isg)


@pytest.mark.parametrize("sim", ["cosine", "dot", "euclidean"])
@pytest.mark.parametrize(("n", "k", "seed"), [(1500, 1, 1501), (1500, 5, 1505), (1200, 5, 1205), (2000, 2, 2002)])
def test_the_oracle_scores_copies_of_a_row_alike_wherever_they_sit_in_the_product(n, k, seed, sim):
    """The oracle's scores of duplicate rows do not depend on where the copies fall in the GEMM:
    every copy of a row gets bit-identical scores (rows and columns), and shuffling the items (copies
    moved among the product's blocks) or reversing every run of 16 (moved within them) gives the
    permuted matrix bit for bit, hence every query the same tie blocks. A plain ``X @ X.T`` fails
    this with OpenBLAS's AVX-512 kernels on (1500, 1, 1501): its 1 500 identical rows get two
    different cosines (1.0 and the float below), one tie block split in two."""
    X = _points(n, k, 6, seed)
    y = np.random.default_rng(seed).integers(0, 3, n)
    S = score_matrix(X, sim)
    _, first, inverse = np.unique(X, axis=0, return_index=True, return_inverse=True)
    copy_of = first[inverse.reshape(-1)]  # each item's first copy
    assert np.array_equal(S, S[np.ix_(copy_of, copy_of)])
    everyone = np.ones(n, bool)
    want = dict(_oracle_rows(S, y, everyone, everyone))
    rng = np.random.default_rng(seed + 1)
    among = rng.permutation(n)
    within = np.concatenate([np.arange(i, min(i + 16, n))[::-1] for i in range(0, n, 16)])
    for p in (among, within, among[within]):
        Sp = score_matrix(X[p], sim)
        assert np.array_equal(Sp, S[np.ix_(p, p)])
        got = dict(_oracle_rows(Sp, y[p], everyone, everyone))
        assert {int(p[i]): blocks for i, blocks in got.items()} == want


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 60), k=st.integers(1, 4), c=st.integers(1, 3),
       roles=st.booleans(), sim=st.sampled_from(["cosine", "euclidean"]))
def test_small_few_point_embeddings_equal_the_position_oracle(seed, n, k, c, roles, sim):
    rng = np.random.default_rng(seed)
    X = _points(n, k, 3, seed)
    y = rng.integers(0, c, n)
    isq = isg = None
    if roles:
        isq = rng.random(n) < 0.6
        isg = ~isq | (rng.random(n) < 0.5)
    _check_against_positions(X, y, sim, isq, isg, n_points=6)


def closed_form_ap(M: int, R: int) -> float:
    """E[AP] of a query whose M gallery items, R of them positive, are one tie block:
    ``E[AP] = (1/R) sum_{j=1..M} (R/M) (1 + (j-1) s) / j = s + (1 - s) H_M / M`` with
    ``s = (R-1)/(M-1)`` (0 when M = 1) and H_M the M-th harmonic number; from the expected AP of
    F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures Efficiently
    in the Presence of Tied Scores", ECIR 2008, LNCS 4956, pp. 414-421."""
    s = (R - 1) / (M - 1) if M > 1 else 0.0
    H = math.fsum(1.0 / j for j in range(1, M + 1))
    return s + (1 - s) * H / M


@pytest.mark.parametrize("M", [1, 2, 3, 7, 12])
def test_the_closed_form_equals_enumeration(M):
    for R in range(1, M + 1):
        rel = np.arange(M) < R
        assert closed_form_ap(M, R) == pytest.approx(enumerate_tie_orders(np.zeros(M), rel)["ap"], abs=1e-12)


@pytest.mark.parametrize("sizes", [[1, 1], [2, 1], [700, 1300], [3, 5, 1], [1000, 1000]])
def test_identical_rows_map_equals_the_closed_form(sizes):
    """mAP of identical rows, leave-one-out: every query's N - 1 gallery items are one tie block;
    queries of a class of one item have no positive and are left out."""
    y = np.repeat(np.arange(len(sizes)), sizes)
    n = y.size
    ev = ac.evaluate(np.ones((n, 4)), y)
    M = n - 1
    want = [closed_form_ap(M, s - 1) for s in sizes for _ in range(s) if s > 1]
    if not want:
        return
    assert ev.to_dict()["methods"]["embeddings"]["map"]["expected"] == pytest.approx(np.mean(want), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(a=st.integers(1, 10**6), slope=st.floats(0, 1), T=st.integers(0, 10**6), J=st.integers(1, 5000))
def test_the_closed_form_over_a_blocks_ranks_equals_its_terms(a, slope, T, J):
    """The engine's sum over a tie block's ranks (closed form beyond 64 ranks) against the terms
    summed exactly (math.fsum); a <= T + 1 as in every AP formula (positives ahead <= items ahead)."""
    a = min(a, T + 1)
    want = math.fsum((a + (j - 1) * slope) / (T + j) for j in range(1, J + 1))
    assert _affine_over_ranks(float(a), slope, T, J) == pytest.approx(want, rel=1e-9)


def test_the_evaluation_says_what_collapsed():
    """A warning names the method and the number of distinct vectors when there is one, or at
    most one per hundred items; none for distinct data or when every item has its own vector."""
    rng = np.random.default_rng(0)
    y = np.arange(400) % 4
    X = {"collapsed": np.ones((400, 5)), "few": _points(400, 3, 5, 1), "fine": rng.standard_normal((400, 5)),
         "two_of_400": _points(400, 2, 5, 2) * 1.0}
    notes = [w for w in ac.evaluate(X, y).warnings() if "distinct vector" in w]
    assert any(w.startswith("collapsed: all 400 items map to 1 distinct vector") for w in notes)
    assert any(w.startswith("few: all 400 items map to 3 distinct vectors") for w in notes)
    assert any(w.startswith("two_of_400: all 400 items map to 2 distinct vectors") for w in notes)
    assert not any(w.startswith("fine") for w in notes)
    # 150 items on 2 points: more than one per hundred items, no warning; distinct items: none
    assert not any("distinct vector" in w for w in ac.evaluate(_points(150, 2, 5, 3), np.arange(150) % 2).warnings())
    assert not any("distinct vector" in w for w in ac.evaluate(np.eye(4), [0, 0, 1, 1]).warnings())
    # a scaled copy is the same direction under cosine (so one vector), two points under euclidean
    Z = np.ones((300, 3)) * np.arange(1, 301)[:, None]
    assert any("1 distinct vector (after cosine" in w for w in ac.evaluate(Z, np.arange(300) % 2).warnings())
    assert not any("distinct vector" in w for w in ac.evaluate(Z, np.arange(300) % 2,
                                                               similarity="euclidean").warnings())
