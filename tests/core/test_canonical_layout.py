"""The canonical layout's distinct rows (:func:`analysis_core.engine.layout.unique_rows`): the
same partition of the rows as ``np.unique`` of their bytes, whatever the row order, the dtype, the
duplicates, signed zeros or NaN payloads, and on a hash collision."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_core.engine import layout
from analysis_core.engine.core import run_pass
from analysis_core.engine.layout import row_hashes, unique_rows


def _bytes_partition(X: np.ndarray):
    """The oracle: np.unique of the rows as bytes (independent of the hash)."""
    rows = np.ascontiguousarray(X).view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first, inv = np.unique(rows, return_index=True, return_inverse=True)
    return first, inv.ravel()


def _same_partition(first, inv, first_ref, inv_ref):
    assert first.size == first_ref.size
    assert sorted(first.tolist()) == sorted(first_ref.tolist())  # each class's smallest row
    assert np.array_equal(first[inv], first_ref[inv_ref])  # each row's class, named by its first row


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 60), st.integers(1, 9), st.sampled_from([np.float32, np.float64, np.int32, np.uint8]),
       st.integers(0, 2**32 - 1), st.integers(1, 4))
def test_unique_rows_is_the_partition_by_bytes(n, d, dtype, seed, levels):
    rng = np.random.default_rng(seed)
    X = rng.integers(-levels, levels + 1, (n, d)).astype(dtype)  # few levels: many duplicate rows
    if X.dtype.kind == "f" and n:
        X[rng.random(n) < 0.2, 0] = -0.0  # bytes differ from 0.0: not a duplicate
    first, inv = unique_rows(X)
    _same_partition(first, inv, *_bytes_partition(X))
    assert first.dtype == inv.dtype == np.int64


def test_unique_rows_on_a_hash_collision_falls_back_to_the_bytes(monkeypatch):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, (200, 4)).astype(np.float32)
    monkeypatch.setattr(layout, "row_hashes", lambda X: np.zeros(X.shape[0], np.uint64))  # everything collides
    first, inv = unique_rows(X)
    _same_partition(first, inv, *_bytes_partition(X))


def test_row_hashes_do_not_depend_on_the_rows_position_or_block():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((5000, 33)).astype(np.float32)
    h = row_hashes(X)
    perm = rng.permutation(X.shape[0])
    assert np.array_equal(row_hashes(X[perm]), h[perm])
    assert np.array_equal(row_hashes(np.asfortranarray(X)), h)
    assert np.unique(h).size == X.shape[0]  # 5 000 distinct rows, 5 000 hashes
    # rows that differ only in sign bits (binary codes) hash apart
    codes = np.where(rng.random((4000, 64)) < 0.5, -1.0, 1.0).astype(np.float32)
    assert np.unique(row_hashes(codes)).size == np.unique(codes, axis=0).shape[0]


@pytest.mark.parametrize("similarity", ["cosine", "euclidean"])
def test_the_pass_does_not_depend_on_the_input_order_with_duplicates(similarity):
    """The canonical order is content only: permuted input rows, the same per-query values."""
    rng = np.random.default_rng(5)
    y = rng.integers(0, 6, 400)
    X = np.round(rng.standard_normal((6, 8))[y] + rng.standard_normal((400, 8)), 1).astype(np.float32)
    X[rng.integers(0, 400, 80)] = X[rng.integers(0, 400, 80)]
    a = run_pass(X, y, similarity=similarity, ks=(1, 4))
    perm = rng.permutation(400)
    b = run_pass(X[perm], y[perm], similarity=similarity, ks=(1, 4))
    order_a, order_b = np.argsort(a.query_items), np.argsort(perm[b.query_items])
    assert np.array_equal(a.values[order_a], b.values[order_b], equal_nan=True)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 300), st.integers(1, 5), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1),
       st.booleans())
def test_rows_in_order_is_the_gather_in_place_for_a_permutation(n, d, dtype, seed, merged):
    """Every permutation (random cycles, fixed points, the identity) gives NumPy's gather, in the
    same array; an order naming fewer rows (merged duplicates) gives the gather in a new one."""
    from analysis_core.engine.row_order import rows_in_order

    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype)
    order = rng.permutation(n)
    if merged and n > 1:
        order = order[: n // 2]
    elif n and rng.random() < 0.3:
        order = np.arange(n)
    want = X[order].copy()
    got = rows_in_order(X, order)
    assert np.array_equal(got, want) and got.flags.c_contiguous
    assert (got is X) == (order.size == n)


def test_the_pass_holds_one_copy_of_the_vectors_when_no_rows_merge(monkeypatch):
    """The prepared vectors are put in canonical order where they are: the pass's vectors are the
    array prepare_vectors returned (no second copy), and its values equal those of a pass whose
    vectors were gathered into a new array."""
    from analysis_core.engine import row_order, setup

    rng = np.random.default_rng(8)
    y = rng.integers(0, 5, 700)
    X = (rng.standard_normal((5, 12))[y] + rng.standard_normal((700, 12))).astype(np.float32)
    made = []
    original = setup.prepare_vectors
    monkeypatch.setattr(setup, "prepare_vectors", lambda *a, **k: made.append(original(*a, **k)) or made[-1])
    s = setup.prepare(X, y)
    assert s.vectors is made[0]
    in_place = run_pass(X, y, ks=(1, 3))
    monkeypatch.setattr(row_order, "rows_in_order", lambda Xf, order: np.ascontiguousarray(Xf[order]))
    gathered = run_pass(X, y, ks=(1, 3))
    assert np.array_equal(in_place.values, gathered.values, equal_nan=True)
