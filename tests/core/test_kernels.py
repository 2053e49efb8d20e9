"""Every ranking path of the pass gives the general kernel's results, bit for bit.

Paths (chosen per tile and per query row, see ``analysis_core.engine.kernels``): the general
kernel (tiles with exact duplicate vectors, and ``kernel="general"``); the leave-one-out and roles
kernels with in-loop binary search (the leave-one-out kernel also serves tiles of query-only
against gallery-only items) (``kernel="search"``); ``rank_tile`` counting per threshold
(``kernel="count"``) and, by default (``"auto"``), counting or search per query row by cost.
The data mix easy classes (few negatives reach a positive: search) with near-chance ones (nearly
all do: counting), small and large R, coarse values (exact ties) and optional duplicates.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analysis_core.engine.core import KERNELS, PRECISIONS, TILE, run_pass
from analysis_core.engine.phases import one_direction_tile, query_prefix_rows
from analysis_core.engine.setup import prepare


def _mixed_data(rng, n, d, n_classes, dup_share):
    y = rng.integers(0, n_classes, n)
    centers = rng.standard_normal((n_classes, d)) * 3
    spread = np.where(y % 2 == 0, 0.2, 4.0)[:, None]  # even classes easy, odd ones near chance
    X = np.round((centers[y] + spread * rng.standard_normal((n, d))) * 2) / 2  # coarse: exact ties
    n_dup = int(dup_share * n)
    X[rng.integers(0, n, n_dup)] = X[rng.integers(0, n, n_dup)]
    return X.astype(np.float32), y


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_classes=st.sampled_from([3, 40, 300]),
       roles=st.sampled_from(["loo", "sample", "query_gallery", "split"]), dup_share=st.sampled_from([0.0, 0.05]),
       sim=st.sampled_from(["cosine", "dot"]))
def test_every_kernel_path_equals_the_general_kernel(precision, seed, n_classes, roles, dup_share, sim):
    rng = np.random.default_rng(seed)
    n = 2 * TILE + int(rng.integers(1, TILE))
    X, y = _mixed_data(rng, n, 6, n_classes, dup_share)  # 3 classes: R ~ 400 (large), 300: R ~ 3
    kw = {"loo": {}, "sample": {"is_query": rng.random(n) < 0.2},
          "query_gallery": {"is_query": np.arange(n) % 3 == 0, "is_gallery": np.arange(n) % 3 != 1},
          "split": {"is_query": (q := rng.random(n) < 0.6), "is_gallery": ~q}}[roles]  # > 1 tile of queries
    per_query = roles in ("sample", "query_gallery")
    runs = {k: run_pass(X, y, similarity=sim, n_bins=32, per_query_pairs=per_query, kernel=k, n_threads=2,
                        precision=precision, **kw)
            for k in KERNELS}
    general = runs["general"]
    for k, r in runs.items():
        assert r.values.tobytes() == general.values.tobytes(), k
        assert r.pr_curves.tobytes() == general.pr_curves.tobytes(), k
        np.testing.assert_array_equal(r.hist_pos, general.hist_pos)
        np.testing.assert_array_equal(r.hist_neg, general.hist_neg)
        if per_query:
            np.testing.assert_array_equal(r.query_hist, general.query_hist)
            np.testing.assert_array_equal(r.query_pair_sums, general.query_pair_sums)


@pytest.mark.parametrize("sim", ["cosine", "dot"])
def test_a_query_gallery_split_takes_the_role_free_path_and_equals_the_general_kernel(sim):
    """Query-only against gallery-only tiles go through the role-free binning and ranking
    (:func:`one_direction_tile`); coarse values keep exact score ties, few duplicate vectors."""
    rng = np.random.default_rng(7)
    n = 3 * TILE + 77
    y = rng.integers(0, 60, n)
    X = (np.round(rng.standard_normal((60, 12))[y] + 1.5 * rng.standard_normal((n, 12)), 1)).astype(np.float32)
    q = rng.random(n) < 0.6
    setup = prepare(X, y, similarity=sim, is_query=q, is_gallery=~q)
    taken = [(i, j) for i in range(setup.n_tiles) for j in range(i, setup.n_tiles) if one_direction_tile(setup, i, j)]
    assert taken  # no item is both query and gallery (is_query=q, is_gallery=~q)
    runs = {k: run_pass(X, y, similarity=sim, is_query=q, is_gallery=~q, kernel=k, n_threads=2) for k in KERNELS}
    for k, r in runs.items():
        assert r.values.tobytes() == runs["general"].values.tobytes(), k
        np.testing.assert_array_equal(r.hist_pos, runs["general"].hist_pos)
        np.testing.assert_array_equal(r.hist_neg, runs["general"].hist_neg)
        assert np.isclose(r.sum_pos, runs["general"].sum_pos, rtol=1e-12) and \
            np.isclose(r.sum_neg, runs["general"].sum_neg, rtol=1e-12)


@pytest.mark.parametrize("sim", ["cosine", "dot"])
def test_a_query_sample_takes_the_query_rows_path_and_equals_the_general_kernel(sim):
    """A query sample against every item: the tile of the last queries and the first other items
    is binned on its query rows (:func:`query_prefix_rows`); coarse values keep exact ties."""
    rng = np.random.default_rng(11)
    n = 3 * TILE + 101
    y = rng.integers(0, 40, n)
    X = (np.round(rng.standard_normal((40, 12))[y] + 1.5 * rng.standard_normal((n, 12)), 1)).astype(np.float32)
    q = rng.random(n) < 0.45  # 2 tiles of queries, the second one mixed
    setup = prepare(X, y, similarity=sim, is_query=q)
    taken = [(i, j, query_prefix_rows(setup, i, j)) for i in range(setup.n_tiles) for j in range(i, setup.n_tiles)]
    taken = [t for t in taken if t[2]]
    shared = setup.tile_has_shared_vector  # such tiles go to the general kernel
    assert any(0 < nq < TILE and not shared[i] and not shared[j] for i, j, nq in taken)
    assert any(i == j for i, j, _ in taken) and any(i != j for i, j, _ in taken)
    runs = {k: run_pass(X, y, similarity=sim, is_query=q, kernel=k, n_threads=2, n_bins=64) for k in KERNELS}
    for k, r in runs.items():
        assert r.values.tobytes() == runs["general"].values.tobytes(), k
        assert r.pr_curves.tobytes() == runs["general"].pr_curves.tobytes(), k
        np.testing.assert_array_equal(r.hist_pos, runs["general"].hist_pos)
        np.testing.assert_array_equal(r.hist_neg, runs["general"].hist_neg)
        assert np.isclose(r.sum_pos, runs["general"].sum_pos, rtol=1e-12) and \
            np.isclose(r.sum_neg, runs["general"].sum_neg, rtol=1e-12)


def test_an_unknown_kernel_is_refused():
    X = np.eye(3, dtype=np.float32)
    try:
        run_pass(X, np.array([0, 0, 1]), kernel="fastest")
    except ValueError as exc:
        assert "kernel" in str(exc) and "auto" in str(exc)
    else:
        raise AssertionError("an unknown kernel name was accepted")


@pytest.mark.parametrize("precision", PRECISIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_classes=st.sampled_from([2, 40, 300]),
       roles=st.sampled_from(["loo", "query_gallery"]), dup_share=st.sampled_from([0.0, 0.05]),
       sim=st.sampled_from(["cosine", "dot", "euclidean"]), kernel=st.sampled_from(KERNELS))
def test_a_hit_rates_only_pass_gives_the_full_pass_recall_at_k(precision, seed, n_classes, roles, dup_share, sim,
                                                               kernel):
    """Grouped Recall's passes build only each query's top positive tie block: Recall@K (and R)
    bit for bit as the full pass, the rest undefined."""
    rng = np.random.default_rng(seed)
    n = TILE + int(rng.integers(1, TILE))
    X, y = _mixed_data(rng, n, 6, n_classes, dup_share)
    kw = {"loo": {}, "query_gallery": {"is_query": np.arange(n) % 3 == 0, "is_gallery": np.arange(n) % 3 != 1}}[roles]
    ks = (1, 3, 17)
    full = run_pass(X, y, similarity=sim, ks=ks, kernel=kernel, precision=precision, n_threads=2, **kw)
    hits = run_pass(X, y, similarity=sim, ks=ks, kernel=kernel, precision=precision, n_threads=2,
                    hit_rates_only=True, **kw)
    assert hits.columns == ("n_positives", "recall_at_1", "recall_at_3", "recall_at_17", "n_mixed_tie_blocks",
                            "n_tied_negatives")
    assert hits.query_items.tobytes() == full.query_items.tobytes()
    for c in hits.columns[:4]:
        assert hits.values[:, hits.columns.index(c)].tobytes() == full.values[:, full.columns.index(c)].tobytes(), c
    assert np.isnan(hits.values[:, 4:]).all() and np.isnan(hits.pr_curves).all()
    np.testing.assert_array_equal(hits.hist_pos, full.hist_pos)
    np.testing.assert_array_equal(hits.hist_neg, full.hist_neg)


@settings(max_examples=40, deadline=None)
@given(na=st.integers(1, 40), nb=st.integers(1, 40), dtype=st.sampled_from([np.float32, np.float64]))
def test_the_tile_transposition_equals_numpys_on_ragged_shapes(na, nb, dtype):
    """The blocked transposition (4 x 8 blocks, ragged edges apart) against numpy's ``.T``."""
    from analysis_core.engine.ranking import transpose

    S = np.random.default_rng(na * 100 + nb).standard_normal((na, nb)).astype(dtype)
    buf = np.full(na * nb + 7, np.nan, dtype)
    assert np.array_equal(transpose(S, buf), S.T)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), R=st.integers(2, 300), nb=st.integers(1, 600),
       clustered=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]))
def test_ranking_by_cells_equals_counting_by_brute_force(seed, R, nb, clustered, dtype):
    """Cells against the definition, counted by brute force: C_k = #{x > t_k}, gt[k] = C_k -
    C_{k+1}, eq[k] = #{x == t_k}; thresholds spread or packed into a few cells (one far outlier
    stretches the table), scores that tie thresholds exactly, masked (-inf) scores."""

    rng = np.random.default_rng(seed)
    t = rng.standard_normal(R)
    if clustered:
        t[:-1] = np.round(t[:-1] * 1e-3, 6)
        t[-1] = 50.0
    t = np.unique(t.astype(dtype))
    if t.size < 2:
        return
    x = rng.standard_normal(nb).astype(dtype)
    pick = rng.random(nb)
    x[pick < 0.3] = rng.choice(t, int((pick < 0.3).sum()))
    x[pick > 0.9] = -np.inf
    _check_cells_by_brute_force(t, x, dtype, rng)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), na=st.integers(1, 60), nb=st.integers(1, 60),
       side=st.sampled_from([0, 1, -1]), all_gallery=st.booleans(), n_labels=st.sampled_from([1, 3, 20]),
       r_max=st.sampled_from([3, 40, 200]), dtype=st.sampled_from([np.float32, np.float64]))
def test_every_way_of_ranking_a_tiles_rows_equals_the_definition(seed, na, nb, side, all_gallery, n_labels, r_max,
                                                                  dtype):
    """``rank_rows`` by counting, cells, search and its own choice (``how`` 1, 2, 3, 0) against
    the definition, counted by brute force: for each query row, the ranked columns (a diagonal
    tile's b > a or b < a, gallery items, not of the row's class) are placed among the query's
    distinct positive scores t: ``gt[k]`` counts t_k < x < t_{k+1}, ``eq[k]`` x == t_k. Coarse
    scores tie thresholds; thresholds partly from the row itself (as positive scores are); rows
    whose query has no positives, rows of non-queries; every column a gallery item (the row is
    ranked in place, its positives taken off) or not (a masked copy)."""
    from analysis_core.engine.ranking import rank_rows

    rng = np.random.default_rng(seed)
    if side:
        nb = na  # a diagonal tile: rows and columns are the same items
    a0, b0 = (0, 0) if side else (0, na)
    n = na if side else na + nb
    S = (np.round(rng.standard_normal((na, nb)) * 4) / 4).astype(dtype)
    ulab = rng.integers(0, n_labels, n).astype(np.int64)
    uq = (rng.random(n) < 0.8).astype(np.uint8)
    ug = np.ones(n, np.uint8) if all_gallery else (rng.random(n) < 0.7).astype(np.uint8)
    uslot = np.where(uq[:n] == 1, np.arange(n), -1).astype(np.int64)
    thresholds = []
    for a in range(n):
        pool = np.concatenate([S[a - a0] if a0 <= a < a0 + na else [], np.round(rng.standard_normal(r_max) * 4) / 4])
        thresholds.append(np.unique(rng.choice(pool, int(rng.integers(0, r_max + 1)))).astype(dtype))
    uoff = np.concatenate([[0], np.cumsum([t.size for t in thresholds])]).astype(np.int64)
    uvals = np.concatenate(thresholds).astype(dtype)
    gt_ref, eq_ref = np.zeros(uvals.size, np.int64), np.zeros(uvals.size, np.int64)
    for a in range(na):
        ua = a0 + a
        if uq[ua] == 0 or uslot[ua] < 0:
            continue
        o0, o1 = uoff[uslot[ua]], uoff[uslot[ua] + 1]
        cols = [b for b in range(nb) if (side != 1 or b > a) and (side != -1 or b < a)
                and ug[b0 + b] == 1 and ulab[b0 + b] != ulab[ua]]
        for x in S[a, cols]:
            k = int(np.searchsorted(uvals[o0:o1], x))  # #{t < x}
            if k > 0:
                gt_ref[o0 + k - 1] += 1
            if k < o1 - o0 and uvals[o0 + k] == x:
                eq_ref[o0 + k] += 1
    for how in (0, 1, 2, 3):
        gt, eq = np.zeros(uvals.size, np.int64), np.zeros(uvals.size, np.int64)
        xm = np.full(nb + 5, np.nan, dtype)  # a used buffer
        rank_rows(S, a0, b0, side, ulab, uq, ug, uslot, uoff, uvals, gt, eq, xm, how)
        np.testing.assert_array_equal(gt, gt_ref, err_msg=f"how={how}")
        np.testing.assert_array_equal(eq, eq_ref, err_msg=f"how={how}")


def _check_cells_by_brute_force(t, x, dtype, rng):
    from analysis_core.engine.ranking import CELL_SLOTS, SUB_HISTOGRAMS, _rank_by_cells

    gt, eq = np.zeros(t.size + 3, np.int64), np.zeros(t.size + 3, np.int64)
    R, nb = t.size, x.size
    # used buffers (garbage in them), larger than needed, as rank_rows hands them on
    base = rng.integers(-9, 9, 2 * R + 5).astype(np.int32)
    tpad = rng.standard_normal(R + CELL_SLOTS + 3).astype(dtype)
    cb = rng.integers(-9, 9, nb).astype(np.int32)
    jh = rng.integers(-9, 9, SUB_HISTOGRAMS * (R + 1) + 3).astype(np.int32)
    _rank_by_cells(x, np.concatenate([[0.0], t]).astype(dtype), 1, t.size + 1, gt, eq, base, tpad, cb, jh)
    C = np.append((x[None, :] > t[:, None]).sum(axis=1), 0)
    np.testing.assert_array_equal(gt[1:t.size + 1], C[:-1] - C[1:])
    np.testing.assert_array_equal(eq[1:t.size + 1], (x[None, :] == t[:, None]).sum(axis=1))
    assert gt[0] == eq[0] == 0 and not gt[t.size + 1:].any() and not eq[t.size + 1:].any()


def test_ranking_by_cells_ties_a_threshold_whose_cell_coordinate_is_just_below_a_power_of_two():
    """Thresholds k / 100 in float32 (found by the brute-force comparison): t = -0.07 sits at
    cell coordinate v = 31.999999999999996, where v + 1 rounds to 33. Scores tying it must land in
    its cell (the engine before 2026-11-23 computed a score's cell as floor(v + 1) and counted
    these ties as scores above it)."""
    ks = [-25, *range(-20, 41), 45, 47]
    t = (np.array(ks) / 100).astype(np.float32)
    v = (np.float64(t[14]) - np.float64(t[0])) * ((2 * t.size) / (np.float64(t[-1]) - np.float64(t[0])))
    assert t[14] == np.float32(-0.07) and v < 32 and v + 1.0 == 33.0
    rng = np.random.default_rng(3)
    x = np.concatenate([t, rng.choice(t, 400), np.round(rng.normal(0.1, 0.1, 100), 2)]).astype(np.float32)
    _check_cells_by_brute_force(t, x, np.float32, rng)


@pytest.mark.parametrize("t", [[0.0, 5e-324, 1e-323], [-1e-323, 0.0], [0.0, 5e-324, 0.5, 1.0]])
def test_ranking_by_cells_of_thresholds_a_few_subnormal_steps_apart(t):
    """float64 thresholds so close that the table's scale overflows: each score is then placed by
    a search, with the same counts as the definition."""
    t = np.array(t)
    rng = np.random.default_rng(0)
    x = np.concatenate([t, rng.choice(t, 40), [-np.inf, -1.0, 2.0, 1e-320]])
    _check_cells_by_brute_force(t, x, np.float64, rng)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), na=st.integers(1, 70), nb=st.integers(1, 70), diag=st.booleans(),
       shared=st.booleans(), n_classes=st.sampled_from([1, 3, 20]))
def test_phase_one_collects_every_positive_score_once(seed, na, nb, diag, shared, n_classes):
    """Every (query, positive) score of a tile, by brute force over its item pairs: query items with
    a slot in the chunk, gallery partners of the same class, the item itself never, a diagonal tile's
    pairs once. Tiles of one item per vector take the same-class-columns path, tiles with a vector
    shared by several items the one per pair of item groups, whose entries carry the other group's
    item count as a weight: expanded, they are the brute force's scores. Only a group's first item
    is a ranked query (the others rank the same gallery)."""
    from analysis_core.engine.positives import collect_positive_scores
    from analysis_core.engine.setup import item_groups

    rng = np.random.default_rng(seed)
    nb = na if diag else nb
    n_vec = na if diag else na + nb
    per_vec = rng.integers(1, 4, n_vec) if shared else np.ones(n_vec, np.int64)
    uptr = np.concatenate([[0], np.cumsum(per_vec)]).astype(np.int64)
    n_items = int(uptr[-1])
    item_u = np.repeat(np.arange(n_vec), per_vec)
    lab = rng.integers(0, n_classes, n_items).astype(np.int64)
    isq, isg = rng.random(n_items) < 0.7, rng.random(n_items) < 0.8
    groups = item_groups(item_u, uptr, lab, isq, isg)
    ranked = np.zeros(n_items, bool)
    ranked[groups.item] = True
    slot = np.where(isq & ranked & (rng.random(n_items) < 0.8), 0, -1)
    slot[slot == 0] = np.arange(int((slot == 0).sum()))
    a0, b0 = 0, 0 if diag else na
    S = rng.standard_normal((na, nb)).astype(np.float32)
    want: dict[int, list[float]] = {}
    for a in range(na):
        for b in range(a if diag else 0, nb):
            for p in range(uptr[a0 + a], uptr[a0 + a + 1]):
                for q in range(uptr[b0 + b], uptr[b0 + b + 1]):
                    if (diag and b == a and q <= p) or lab[p] != lab[q]:
                        continue
                    for x_, y_ in ((p, q), (q, p)):
                        if isq[x_] and isg[y_] and slot[x_] >= 0:
                            want.setdefault(int(slot[x_]), []).append(float(S[a, b]))
    n_slots = int(slot.max()) + 1 if (slot >= 0).any() else 0
    cap = np.full(n_slots, n_items, np.int64)
    toff = np.concatenate([[0], np.cumsum(cap)]).astype(np.int64)
    fill, thr = np.zeros(n_slots, np.int64), np.full(int(toff[-1]), np.nan, np.float32)
    thw = np.zeros(thr.size if shared else 0, np.int64)
    collect_positive_scores(S, a0, b0, diag, groups.offsets, groups.label, groups.is_query, groups.is_gallery,
                            groups.count, groups.item, slot, toff, fill, thr, thw)
    for s in range(n_slots):
        got = thr[toff[s]:toff[s] + fill[s]]
        weights = thw[toff[s]:toff[s] + fill[s]] if shared else np.ones(got.size, np.int64)
        assert (weights > 0).all()
        assert sorted(np.repeat(got, weights).tolist()) == sorted(want.get(s, [])), s


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 3000), n_classes=st.sampled_from([1, 2, 7, 60, 2000]),
       contiguous=st.booleans())
def test_the_same_class_tile_pairs_are_those_of_some_same_class_item_pair(seed, n, n_classes, contiguous):
    """Phase 1's plan against enumeration: tile pair (I <= J) is listed iff items of one class lie
    in tiles I and J (including I = J), over layouts where a class spans one, a few or every tile."""
    from analysis_core.engine.plan import positive_tile_pairs

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_classes, n)
    if contiguous:
        codes = np.sort(codes)  # the canonical layout's usual shape: classes in runs
    item_u = np.sort(rng.integers(0, max(n, 1), n))  # vectors in order; shared vectors allowed
    got = positive_tile_pairs(item_u, codes)
    tiles = item_u // TILE
    want = set()
    for c in np.unique(codes):
        ts = np.unique(tiles[codes == c]).tolist()
        want.update((a, b) for a in ts for b in ts if a <= b)
    assert got.dtype == np.int64 and got.shape == (len(want), 2)
    assert [tuple(p) for p in got.tolist()] == sorted(want)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), d=st.sampled_from([3, 8, 257, 1000]), extra=st.sampled_from([0, 1, 2, 130]),
       precision=st.sampled_from(PRECISIONS), sim=st.sampled_from(["cosine", "dot"]))
def test_prepared_vectors_do_not_depend_on_the_inputs_memory_layout(seed, d, extra, precision, sim):
    """The vectors as scored are computed in blocks of rows; a row's norm must be the same sum
    whatever the input's layout and whichever block (of any height, one row included) it falls
    in: a C-ordered, a Fortran-ordered and a strided copy give the same bytes, equal to the
    whole-matrix computation on C order, and a duplicated row stays a duplicate (merged)."""
    from analysis_core.engine.layout import _PREPARE_BLOCK_BYTES, prepare_vectors

    rng = np.random.default_rng(seed)
    step = max(1, _PREPARE_BLOCK_BYTES // (8 * d))
    n = step + extra  # extra = 1: a last block of one row
    X = rng.standard_normal((n, d)) * 10
    X[-1] = X[0]
    X64 = X / np.sqrt(np.add.reduce(X * X, axis=1))[:, None] if sim == "cosine" else X
    want = (X64.astype(precision) + np.dtype(precision).type(0.0)).tobytes()
    wide = np.zeros((n, 2 * d))
    wide[:, ::2] = X
    for A in (X, np.asfortranarray(X), wide[:, ::2]):
        assert prepare_vectors(A, sim, precision).tobytes() == want
        st_ = prepare(A, np.arange(n) % 4, similarity=sim, precision=precision)
        assert st_.vectors.shape[0] == n - 1  # the duplicated row merged


class _LoadingFor:
    """Stands in for numba's start thread (``compiled.start``): alive for the first ``n`` looks,
    so :func:`~analysis_core.engine.phases.compute_ahead` computes that many tiles first."""

    def __init__(self, n: int) -> None:
        self.n = n

    def is_alive(self) -> bool:
        self.n -= 1
        return self.n >= 0

    def join(self) -> None:
        pass


@pytest.mark.slow
@pytest.mark.parametrize("precision", PRECISIONS)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), ahead=st.integers(1, 40), n_classes=st.sampled_from([3, 40, 300]),
       roles=st.sampled_from(["loo", "query_gallery", "sample"]), dup_share=st.sampled_from([0.0, 0.05]))
def test_tiles_computed_while_numba_loads_give_the_same_pass(precision, seed, ahead, n_classes, roles, dup_share):
    """A process's first pass computes tiles while numba's code loads (the command line) and the
    phases use them: the same bits as a pass that computes every tile itself, whether the loading
    ends after a few positive tiles, among the pair tiles or after every tile of the block."""
    from analysis_core.engine import compiled, phases

    rng = np.random.default_rng(seed)
    n = 2 * TILE + int(rng.integers(1, TILE))
    X, y = _mixed_data(rng, n, 6, n_classes, dup_share)
    kw = {"loo": {}, "sample": {"is_query": rng.random(n) < 0.2},
          "query_gallery": {"is_query": np.arange(n) % 3 == 0, "is_gallery": np.arange(n) % 3 != 1}}[roles]
    args = dict(n_bins=32, n_threads=2, precision=precision, per_query_pairs=roles != "loo", **kw)
    plain = run_pass(X, y, **args)
    computed = []
    real = phases.compute_ahead  # the pass imports it from .phases when it runs

    def spy(setup, plan, busy):
        kept = real(setup, plan, busy)
        computed.append((len(kept), len({*plan[0], *plan[1]})))
        return kept

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(compiled, "start", lambda **_: _LoadingFor(ahead))
        mp.setattr(phases, "compute_ahead", spy)
        early = run_pass(X, y, **args)
    (kept, of), = computed
    assert kept == min(ahead, of) > 0
    assert early.values.tobytes() == plain.values.tobytes()
    assert early.pr_curves.tobytes() == plain.pr_curves.tobytes()
    np.testing.assert_array_equal(early.hist_pos, plain.hist_pos)
    np.testing.assert_array_equal(early.hist_neg, plain.hist_neg)
    assert (early.sum_pos, early.sum_neg) == (plain.sum_pos, plain.sum_neg)
    if roles != "loo":
        np.testing.assert_array_equal(early.query_hist, plain.query_hist)
        np.testing.assert_array_equal(early.query_pair_sums, plain.query_pair_sums)
