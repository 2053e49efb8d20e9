"""The embedding map's projection, sample and figure: PCA against scikit-learn, the sample's
stratification by brute counting, the figure's points against the input."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize

from analysis_core import InputError, evaluate
from analysis_core.figures.embedding_map import MAX_CLASS_COLOURS, embedding_map_figure
from analysis_core.stats.projection import (
    PCA_BUDGET,
    map_frame,
    map_sample,
    map_vectors,
    pca_2d,
    project,
    selection_table,
)


def _sklearn_pca(X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    k = min(2, X.shape[0], X.shape[1])
    p = PCA(n_components=k, svd_solver="full").fit(X)
    return p.transform(X), p.explained_variance_ratio_, p.components_.T


def _same_up_to_sign(a: np.ndarray, b: np.ndarray, atol: float) -> None:
    for j in range(b.shape[1]):
        s = 1.0 if np.abs(a[:, j] - b[:, j]).max() <= np.abs(a[:, j] + b[:, j]).max() else -1.0
        np.testing.assert_allclose(a[:, j], s * b[:, j], atol=atol)


@pytest.mark.parametrize("n,d", [(300, 12), (7, 50), (40, 2), (40, 1), (2, 5), (3, 3)])
def test_pca_equals_scikit_learns_up_to_sign_with_its_explained_variance(n, d):
    rng = np.random.default_rng(n * 100 + d)
    X = rng.standard_normal((n, d)) * np.linspace(3, 1, d) + rng.standard_normal(d)
    coords, ratio, comps = pca_2d(X)
    ref, ref_ratio, ref_comps = _sklearn_pca(X)
    k = ref.shape[1]
    scale = np.abs(ref).max()
    # the axes with variance: scikit-learn's; an axis beyond the data's rank is 0 here
    rank = int(np.sum(ref_ratio > 1e-10))
    _same_up_to_sign(coords[:, :rank], ref[:, :rank], atol=1e-9 * scale)
    _same_up_to_sign(comps[:, :rank], ref_comps[:, :rank], atol=1e-9)
    np.testing.assert_allclose(ratio[:k], ref_ratio, atol=1e-12)
    assert np.all(ratio[k:] == 0) and np.all(coords[:, rank:] == 0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_randomized_pca_of_large_data_equals_the_exact_one_where_the_axes_stand_out(dtype):
    rng = np.random.default_rng(11)
    n, d = 3000, 60
    # leading variances 25 and 9 against at most 1.2 for the rest: the spectrum of data with structure
    X = (rng.standard_normal((n, d)) * np.r_[5.0, 3.0, np.linspace(1.2, 0.1, d - 2)]) @ np.linalg.qr(
        rng.standard_normal((d, d)))[0] + 4.0
    X = X.astype(dtype)
    coords, ratio, comps = pca_2d(X, exact_up_to=0, seed=3)
    ref, ref_ratio, ref_comps = _sklearn_pca(X.astype(np.float64))
    tol = 1e-6 if dtype == np.float64 else 1e-4  # (lambda_13 / lambda_2)^7.5 = (1 / 9)^7.5 ~ 1e-7
    _same_up_to_sign(comps, ref_comps, atol=tol)
    _same_up_to_sign(coords, ref, atol=tol * np.abs(ref).max())
    np.testing.assert_allclose(ratio, ref_ratio, rtol=tol)
    again = pca_2d(X, exact_up_to=0, seed=3)[0]
    np.testing.assert_array_equal(coords, again)  # seeded: the same picture on every call


def test_each_axis_has_its_largest_loading_positive_whatever_the_row_order():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((500, 20)) @ rng.standard_normal((20, 20))
    coords, _, comps = pca_2d(X)
    for j in range(2):
        assert comps[np.argmax(np.abs(comps[:, j])), j] > 0
    perm = rng.permutation(500)
    coords_p, _, comps_p = pca_2d(X[perm])
    np.testing.assert_allclose(comps_p, comps, atol=1e-10)  # no mirror: the same picture
    np.testing.assert_allclose(coords_p, coords[perm], atol=1e-9)


def test_cosine_maps_the_l2_normalised_vectors_and_float32_agrees():
    rng = np.random.default_rng(5)
    X = (rng.standard_normal((400, 16)) * rng.uniform(0.1, 10, (400, 1))).astype(np.float32)
    codes = rng.integers(0, 4, 400)
    p = project(X, codes, similarity="cosine")
    ref, ref_ratio, _ = _sklearn_pca(normalize(X.astype(np.float64)))
    _same_up_to_sign(p.coords, ref, atol=1e-5)  # float32 input normalised in float32
    np.testing.assert_allclose(p.explained, ref_ratio, atol=1e-5)
    raw = project(X, codes, similarity="euclidean")
    _same_up_to_sign(raw.coords, _sklearn_pca(X.astype(np.float64))[0], atol=1e-3)


def test_constant_and_two_item_data():
    p = project(np.ones((6, 4)), np.array([0, 0, 0, 1, 1, 1]), similarity="dot")
    assert np.all(p.coords == 0) and np.isnan(p.explained).all()
    assert "every item maps to one point" in p.note()
    X = np.array([[1.0, 2.0, 0.0], [4.0, -2.0, 1.0]])
    p = project(X, np.array([0, 1]), similarity="euclidean")
    assert p.explained == pytest.approx([1.0, 0.0], abs=1e-12)
    assert np.linalg.norm(p.coords[0] - p.coords[1]) == pytest.approx(np.linalg.norm(X[0] - X[1]), rel=1e-12)
    assert np.all(p.coords[:, 1] == 0)


def test_bad_inputs_get_typed_errors():
    with pytest.raises(InputError, match="zero vectors"):
        project(np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([0, 1]), similarity="cosine")
    with pytest.raises(InputError, match="unknown projection"):
        project(np.eye(3), np.arange(3), "tsne")
    with pytest.raises(InputError, match="do not make a map"):
        project(np.eye(3), np.arange(4))
    with pytest.raises(InputError, match="budget"):
        map_sample(np.arange(10), 0)


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(1, 300), min_size=1, max_size=40), budget=st.integers(1, 2000),
       seed=st.integers(0, 3))
def test_the_sample_keeps_every_class_follows_class_sizes_and_is_deterministic(sizes, budget, seed):
    codes = np.repeat(np.arange(len(sizes)), sizes)
    codes = codes[np.random.default_rng(seed).permutation(codes.size)]  # classes interleaved
    rows = map_sample(codes, budget, seed)
    n = codes.size
    assert np.array_equal(rows, map_sample(codes, budget, seed))
    assert np.array_equal(rows, np.unique(rows)) and rows.min() >= 0 and rows.max() < n
    if n <= budget:
        assert rows.size == n
        return
    assert set(codes[rows]) == set(codes)  # every class kept
    assert rows.size == max(budget, len(sizes))
    taken = np.bincount(codes[rows], minlength=len(sizes))
    share = budget * np.asarray(sizes) / n
    if len(sizes) <= budget:
        # proportional, up to the one-item minimum (and the item the minimums take from the largest
        # shares) and the rounding to whole items
        low = np.minimum(np.maximum(np.floor(share) - 1, 1), sizes)
        assert np.all((taken >= low) & (taken <= np.maximum(np.ceil(share), 1))), (taken, share)


def test_large_data_is_sampled_with_a_note_and_another_seed_draws_other_items():
    codes = np.repeat(np.arange(7), [30_000, 20_000, 5_000, 3, 1, 1, 1])
    X = np.random.default_rng(0).standard_normal((codes.size, 3)).astype(np.float32)
    p = project(X, codes)
    assert p.sampled and p.rows.size == PCA_BUDGET and set(codes[p.rows]) == set(range(7))
    assert f"{PCA_BUDGET:,} of {codes.size:,} items" in p.note()
    assert not np.array_equal(map_sample(codes, PCA_BUDGET, 1), p.rows)


def test_without_umap_learn_the_umap_map_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "umap", None)  # import umap raises ImportError
    with pytest.raises(InputError, match=r"embedding-retrieval-eval\[map\]"):
        project(np.random.default_rng(0).standard_normal((30, 4)), np.repeat([0, 1], 15), "umap")


def test_umap_separates_two_clusters_and_is_reproducible():
    pytest.importorskip("umap")
    rng = np.random.default_rng(2)
    codes = np.repeat([0, 1], 60)
    X = rng.standard_normal((120, 10)) * 0.1 + np.where(codes[:, None] == 0, 1.0, -1.0) * np.eye(10)[0]
    a = project(X, codes, "umap", similarity="euclidean", seed=4)
    b = project(X, codes, "umap", similarity="euclidean", seed=4)
    np.testing.assert_allclose(a.coords, b.coords, atol=1e-6)
    assert a.explained is None and a.axis_titles() == ("UMAP 1", "UMAP 2")
    # every point's nearest other point on the map is of its own class (brute force)
    dist = np.linalg.norm(a.coords[:, None] - a.coords[None], axis=2)
    np.fill_diagonal(dist, np.inf)
    assert np.mean(codes[dist.argmin(1)] == codes) > 0.98


def _demo_frames():
    rng = np.random.default_rng(1)
    labels = np.repeat(np.array(["a", "b", "c", "lone"]), [20, 15, 10, 1])
    onehot = labels[:, None] == np.array(["a", "b", "c", "lone", "-", "-"])
    X = rng.standard_normal((labels.size, 6)) + onehot * 3.0
    ev = evaluate(X, labels)
    return X, labels, ev.per_query(ev.methods[0])


def test_map_frame_and_selection_table_carry_each_rows_own_metrics():
    X, labels, pq = _demo_frames()
    codes = np.unique(labels, return_inverse=True)[1]
    rows = np.arange(100, 100 + labels.size)  # as if the map were of a split whose items start at row 100
    pq_shifted = pq.assign(query=pq["query"] + 100)
    p = project(X, codes)
    df = map_frame(p, labels, rows=rows, ap=pq_shifted.set_index("query")["ap"])
    for _, r in df.iterrows():
        own = pq[pq["query"] == r["row"] - 100].iloc[0]
        assert r["label"] == labels[r["row"] - 100]
        assert (np.isnan(r["ap"]) and own["n_positives"] == 0) or r["ap"] == own["ap"]
    chosen = np.array([45, 3, 3, 30])  # 45: the lone query
    t = selection_table(pq, chosen, labels)
    assert t["row"].tolist() == [3, 30, 45]
    for _, r in t.iterrows():
        own = pq[pq["query"] == r["row"]].iloc[0]
        if own["n_positives"] == 0:
            assert np.isnan(r["ap"]) and np.isnan(r["precision_at_1"])
        else:
            assert (r["ap"], r["r_precision"], r["precision_at_1"]) == (own["ap"], own["r_precision"],
                                                                          own["precision_at_1"])


def _points(n_classes: int, per: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(n_classes)
    n = n_classes * per
    ap = rng.uniform(0, 1, n)
    ap[::7] = np.nan
    return pd.DataFrame({"x": rng.standard_normal(n), "y": rng.standard_normal(n), "row": np.arange(n),
                         "id": [f"item<{i}>" for i in range(n)], "label": np.repeat(np.arange(n_classes), per),
                         "ap": ap, "split": np.where(np.arange(n) % 3, "train", "test")})


def _drawn(fig) -> pd.DataFrame:
    """(row, x, y, trace) of every point the figure draws, from its traces' customdata."""
    parts = [pd.DataFrame({"row": np.asarray(t.customdata)[:, 0].astype(int), "x": t.x, "y": t.y, "trace": t.name})
             for t in fig.data]
    return pd.concat(parts, ignore_index=True)


@pytest.mark.parametrize("colour", ["class", "ap", "split"])
@pytest.mark.parametrize("n_classes", [2, 10, 45])
def test_the_figure_draws_every_point_once_where_it_was_projected(colour, n_classes):
    pts = _points(n_classes)
    fig = embedding_map_figure(pts, colour)
    drawn = _drawn(fig).sort_values("row").reset_index(drop=True)
    assert drawn["row"].tolist() == pts["row"].tolist()
    np.testing.assert_allclose(drawn["x"], pts["x"], rtol=1e-7)  # drawn in float32
    np.testing.assert_allclose(drawn["y"], pts["y"], rtol=1e-7)
    assert all(t.type == "scattergl" for t in fig.data)
    if colour == "class":
        coloured = min(n_classes, MAX_CLASS_COLOURS)
        assert len(fig.data) == coloured + (n_classes > MAX_CLASS_COLOURS)
        if n_classes > MAX_CLASS_COLOURS:
            assert fig.data[0].name == f"other ({n_classes - MAX_CLASS_COLOURS} classes)"
    elif colour == "ap":
        scored = fig.data[-1]
        want = pts.set_index("row")["ap"]
        np.testing.assert_array_equal(scored.marker.color, want[np.asarray(scored.customdata)[:, 0].astype(int)])
        np.testing.assert_allclose(np.asarray(scored.customdata)[:, 1], scored.marker.color, rtol=1e-7)
        assert scored.marker.colorscale is not None and scored.marker.cmin == 0 and scored.marker.cmax == 1
        assert np.all(np.diff(scored.marker.color) <= 0)  # the lowest AP drawn last, on top
        assert fig.data[0].name.startswith("no AP") and len(fig.data[0].x) == pts["ap"].isna().sum()
    else:
        assert sorted(t.name for t in fig.data) == ["test", "train"]


def test_every_class_has_a_visible_marker():
    """Past the palette's 8 colours the classes get open markers, which are only an outline."""
    fig = embedding_map_figure(_points(12), "class")
    for t in fig.data:
        if t.marker.symbol.endswith("-open"):
            assert t.marker.line.width >= 1 and t.marker.line.color == t.marker.color, t.name
    assert sum(t.marker.symbol.endswith("-open") for t in fig.data) == 4


def test_a_picked_class_is_the_only_one_in_colour_and_names_are_escaped():
    pts = _points(30).assign(label=lambda d: d["label"].map(lambda c: f"<b>{c}</b>"))
    fig = embedding_map_figure(pts, "class", classes=["<b>4</b>"])
    assert [t.name for t in fig.data] == ["other (29 classes)", "&lt;b&gt;4&lt;/b&gt;"]
    other = fig.data[0]
    i = int(np.flatnonzero(np.asarray(other.customdata)[:, 0] == 0)[0])
    assert other.text[i] == "id item&lt;0&gt;<br>class &lt;b&gt;0&lt;/b&gt;"
    assert all("AP" not in t.hovertemplate for t in fig.data)  # no AP shown unless coloured by it
    by_ap = embedding_map_figure(pts, "ap")
    scored = by_ap.data[-1]
    assert "AP %{customdata[1]:.4f}" in scored.hovertemplate
    np.testing.assert_allclose(np.asarray(scored.customdata)[:, 1], scored.marker.color, rtol=1e-7)
    # numbers only: plotly sends them as a typed array, not a JSON list
    assert all(np.asarray(t.customdata).dtype.kind == "f" for t in by_ap.data)


@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="needs pdfinfo")
def test_the_map_exports_at_the_single_column_width(tmp_path):
    from analysis_core.export.figures import FigureStyle, chromium_path, figure_bytes

    if chromium_path() is None:
        pytest.skip("needs Chromium")
    style = FigureStyle.preset("single")
    path = tmp_path / "map.pdf"
    path.write_bytes(figure_bytes(embedding_map_figure(_points(12, 50), "ap"), "pdf", style))
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    width = float(next(line for line in out.splitlines() if line.startswith("Page size:")).split()[2])
    assert width == pytest.approx(72 * style.width_in, abs=0.01)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 30), st.integers(1, 6), st.sampled_from([np.float32, np.float64]), st.integers(0, 2**32 - 1))
def test_map_vectors_of_a_sample_are_the_sampled_rows_unit_normalised(n, d, dtype, seed):
    """Cosine map vectors of rows ``rows`` = scikit-learn's ``normalize`` of ``X[rows]`` (to the
    dtype's rounding: each row divided by its float64 norm rounded to the dtype), in the input's
    float dtype; dot and euclidean give the raw rows."""
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, d)) * rng.uniform(0.01, 100, (n, 1))).astype(dtype)
    rows = np.sort(rng.choice(n, rng.integers(1, n + 1), replace=False))
    V = map_vectors(X, "cosine", rows)
    assert V.dtype == dtype and V.shape == (rows.size, d)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(V, normalize(X[rows].astype(np.float64)), rtol=4 * eps, atol=4 * eps)
    np.testing.assert_array_equal(map_vectors(X, "dot", rows), X[rows])


def test_a_zero_row_of_a_sample_is_named_by_its_input_row():
    X = np.ones((6, 3))
    X[4] = 0
    with pytest.raises(InputError, match=r"rows \[4\] are zero vectors"):
        map_vectors(X, "cosine", np.array([1, 4, 5]))
