"""Determinism (row order, block size, thread count) and the exact pair statistics."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_core import Dataset, evaluate
from analysis_core.engine.core import PRECISIONS, TILE, run_pass

from .oracle import score_matrix


def _tied_data(rng, n, d, n_classes, zero_share, dup_share):
    """Random vectors with exact duplicates, all-zero rows and coarse values (real ties)."""
    X = np.round(rng.standard_normal((n, d)) * 2) / 2 if dup_share else rng.standard_normal((n, d))
    n_dup = int(dup_share * n)
    src = rng.integers(0, n, n_dup)
    X[rng.integers(0, n, n_dup)] = X[src]
    X[rng.random(n) < zero_share] = 0.0
    return X.astype(np.float32), rng.integers(0, n_classes, n)


def _keyed(res):
    order = np.argsort(res.query_items)
    return res.values[order], res.pr_curves[order]


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), sim=st.sampled_from(["dot", "euclidean", "cosine"]),
       block=st.sampled_from([1, 700, 5000]), threads=st.sampled_from([1, 2, 3]),
       dup_share=st.sampled_from([0.0, 0.2]), memory_mb=st.sampled_from([1024, 0]))
def test_row_order_block_size_threads_and_memory_budget_change_nothing(precision, seed, sim, block, threads,
                                                                        dup_share, memory_mb):
    # dup_share = 0 runs the fast kernel for single-item tiles, 0.2 the general one
    rng = np.random.default_rng(seed)
    n = 2 * TILE + int(rng.integers(1, TILE))  # several tiles, a ragged last one
    X, y = _tied_data(rng, n, int(rng.integers(2, 12)), int(rng.integers(2, 40)),
                      0.0 if sim == "cosine" or dup_share == 0 else 0.1, dup_share)
    if sim == "cosine":
        X[~np.any(X != 0, axis=1)] = 1.0
    if precision == "float64":  # float64 data: half the rows moved by ~1e-9 (near-ties), the others kept
        X = X.astype(np.float64)
        X[::2] += 1e-9 * rng.standard_normal(X[::2].shape)
    base = run_pass(X, y, similarity=sim, n_threads=2, block_size=4096, precision=precision)
    perm = rng.permutation(n)
    # memory_mb = 0 evaluates the queries in chunks of one tile row each (tiles computed twice)
    other = run_pass(X[perm], y[perm], similarity=sim, n_threads=threads, block_size=block, memory_mb=memory_mb,
                     precision=precision)
    other_items = perm[other.query_items]  # map back to the original rows
    o = np.argsort(other_items)
    v0, c0 = _keyed(base)
    np.testing.assert_array_equal(other.values[o], v0)  # bit-identical, NaN included
    np.testing.assert_array_equal(other.pr_curves[o], c0)
    np.testing.assert_array_equal(other.hist_pos, base.hist_pos)
    np.testing.assert_array_equal(other.hist_neg, base.hist_neg)
    assert other.sum_pos == base.sum_pos and other.sum_neg == base.sum_neg


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 90), c=st.integers(1, 8))
def test_pair_counts_split_all_unordered_pairs_exactly(seed, n, c):
    rng = np.random.default_rng(seed)
    X, y = _tied_data(rng, n, 3, c, 0.1, 0.3)
    res = run_pass(X, y, similarity="dot")
    sizes = np.bincount(y)
    n_pos = int(np.sum(sizes * (sizes - 1) // 2))
    assert res.n_pos_pairs + res.n_neg_pairs == n * (n - 1) // 2
    assert res.n_pos_pairs == n_pos


@pytest.mark.parametrize("sim", ["cosine", "dot", "euclidean"])
def test_mean_similarities_and_histograms_equal_brute_force(sim):
    rng = np.random.default_rng(11)
    X = rng.standard_normal((700, 12)).astype(np.float32)
    y = rng.integers(0, 9, 700)
    res = run_pass(X, y, similarity=sim, n_bins=50)
    S = score_matrix(X, sim)
    iu = np.triu_indices(700, 1)
    same = (y[:, None] == y[None, :])[iu]
    s = S[iu]
    assert res.mean_pos_similarity == pytest.approx(s[same].mean(), abs=1e-6)
    assert res.mean_neg_similarity == pytest.approx(s[~same].mean(), abs=1e-6)
    edges = res.hist_edges
    ref_pos = np.histogram(np.clip(s[same], edges[0], edges[-1]), bins=edges)[0]
    ref_neg = np.histogram(np.clip(s[~same], edges[0], edges[-1]), bins=edges)[0]
    # float32 vs float64 scores may fall on either side of a bin edge; allow a handful
    assert np.abs(res.hist_pos - ref_pos).sum() <= 4
    assert np.abs(res.hist_neg - ref_neg).sum() <= 8
    assert res.hist_pos.sum() == ref_pos.sum() and res.hist_neg.sum() == ref_neg.sum()


def test_query_gallery_roles_match_brute_force():
    from .oracle import ranking_metrics

    rng = np.random.default_rng(2)
    n = 120
    X = rng.standard_normal((n, 5)).astype(np.float32)
    y = rng.integers(0, 4, n)
    role = rng.choice(["query", "gallery", "both"], n)
    ds = Dataset(labels=y, embeddings={"m": X}, role=role)
    pq = evaluate(ds).per_query().set_index("query")
    S = score_matrix(X, "cosine")
    isq = np.isin(role, ["query", "both"])
    isg = np.isin(role, ["gallery", "both"])
    assert set(pq.index) == set(np.nonzero(isq)[0])  # gallery-only items are not queries
    for i in np.nonzero(isq)[0]:
        gal = np.nonzero(isg & (np.arange(n) != i))[0]
        rel = y[gal] == y[i]
        if not rel.any():
            assert pq.loc[i, "n_positives"] == 0
            continue
        ref = ranking_metrics(rel[np.argsort(-S[i, gal])])
        assert pq.loc[i, "n_positives"] == rel.sum()
        assert pq.loc[i, "ap"] == pytest.approx(ref["ap"], abs=1e-9)
        assert pq.loc[i, "recall_at_4"] == pytest.approx(ref["recall_at_4"], abs=1e-9)


def test_chunked_evaluation_with_roles_is_bit_identical():
    rng = np.random.default_rng(9)
    n = 2 * TILE + 300
    X = rng.standard_normal((n, 6)).astype(np.float32)
    X[rng.integers(0, n, 80)] = X[rng.integers(0, n, 80)]
    y = rng.integers(0, 5, n)  # few, large classes: the case chunking exists for
    isq = rng.random(n) < 0.6
    isg = ~isq | (rng.random(n) < 0.5)
    whole = run_pass(X, y, is_query=isq, is_gallery=isg)
    chunked = run_pass(X, y, is_query=isq, is_gallery=isg, memory_mb=0)
    np.testing.assert_array_equal(chunked.query_items, whole.query_items)
    np.testing.assert_array_equal(chunked.values, whole.values)
    np.testing.assert_array_equal(chunked.hist_pos, whole.hist_pos)
    np.testing.assert_array_equal(chunked.hist_neg, whole.hist_neg)
    assert (chunked.sum_pos, chunked.sum_neg) == (whole.sum_pos, whole.sum_neg)


def test_passes_running_at_once_in_several_threads_give_the_bits_of_a_pass_alone():
    """A dashboard runs several passes at once (sessions, prefetches) and Grouped Recall runs its
    groups' passes in threads: BLAS must stay single-threaded until the last of them ends (a tile
    on two BLAS threads has other bits), whichever thread started or ends first."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(11)
    y = rng.integers(0, 30, 3000)
    X = (rng.standard_normal((30, 48))[y] + 1.5 * rng.standard_normal((3000, 48))).astype(np.float32)
    alone = run_pass(X, y)
    small_alone = run_pass(X[:300], y[:300])
    with ThreadPoolExecutor(3) as pool:
        big = pool.submit(run_pass, X, y)
        smalls = [pool.submit(run_pass, X[:300], y[:300]) for _ in range(12)]  # start and end meanwhile
        got = big.result()
        for f in smalls:
            assert f.result().values.tobytes() == small_alone.values.tobytes()
    assert got.values.tobytes() == alone.values.tobytes()
    assert (got.sum_pos, got.sum_neg) == (alone.sum_pos, alone.sum_neg)
    np.testing.assert_array_equal(got.hist_pos, alone.hist_pos)
