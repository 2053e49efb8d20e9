"""The Embedding map page through AppTest: the drawn points are scikit-learn's PCA of the
normalised vectors, the colourings follow the data, a picked class lists that class's per-query
metrics from the core."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.decomposition import PCA
from sklearn.preprocessing import normalize
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate, load_files

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
PAGE = "views/embedding_map.py"



def _page_tables(at):
    """The page's tables (the sidebar's design editor is a data frame too)."""
    return [d for d in at.dataframe if d.key != "design_editor"]

def _open(demo: str = "digits", split: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600).run()
    if demo != "digits":
        at.radio(key="data_source").set_value(demo).run()
    if split:
        at.selectbox(key="split").set_value(split).run()
    at.switch_page(PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _spec(at: AppTest) -> dict:
    (chart,) = at.get("plotly_chart")
    return json.loads(chart.proto.spec)


def _arr(v) -> np.ndarray:
    """A plotly JSON array: a list, or numpy's bytes as plotly 6 writes them (``bdata``)."""
    if isinstance(v, dict):
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return a.reshape([int(k) for k in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v)


def _points(spec: dict) -> dict[int, tuple[float, float, str]]:
    """input row -> (x, y, trace name) of every drawn point."""
    out = {}
    for t in spec["data"]:
        for row, x, y in zip(_arr(t["customdata"])[:, 0], _arr(t["x"]), _arr(t["y"]), strict=True):
            assert int(row) not in out
            out[int(row)] = (x, y, t["name"])
    return out


def test_the_map_draws_scikit_learns_pca_of_every_item_coloured_by_class():
    at = _open()
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    method = at.selectbox(key="map-method").value
    ref = PCA(2, svd_solver="full").fit(normalize(ds.embeddings[method].astype(np.float64)))
    xy = ref.transform(normalize(ds.embeddings[method].astype(np.float64)))
    spec = _spec(at)
    pts = _points(spec)
    assert sorted(pts) == list(range(ds.n_items))
    got = np.array([pts[r][:2] for r in range(ds.n_items)])
    signs = np.sign(np.sum(got * xy, axis=0))
    np.testing.assert_allclose(got, xy * signs, atol=1e-4)  # float32 vectors
    for j, axis in enumerate(("xaxis", "yaxis")):
        assert f"{100 * ref.explained_variance_ratio_[j]:.1f} % of variance" in spec["layout"][axis]["title"]["text"]
    assert all(name == str(ds.labels[r]) for r, (_, _, name) in pts.items())  # one trace per class
    assert all(t["type"] == "scattergl" for t in spec["data"])
    assert any("PCA of all 1,797 items." in c.value for c in at.caption)


def test_ap_colouring_shows_each_querys_ap_from_the_core_and_a_picked_class_fills_the_table():
    at = _open()
    method = at.selectbox(key="map-method").value
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    pq = ev.per_query(method).set_index("query")
    at.radio(key="map-colour").set_value("ap").run()
    assert not at.exception
    scored = _spec(at)["data"][-1]
    rows = _arr(scored["customdata"])[:, 0].astype(int).tolist()
    np.testing.assert_allclose(_arr(scored["marker"]["color"]), pq.loc[rows, "ap"], atol=1e-12)
    assert scored["marker"]["colorscale"] and len(rows) == int((pq["n_positives"] > 0).sum())
    assert not _page_tables(at)  # nothing selected: no table yet

    at.selectbox(key="map-class").set_value(3).run()
    assert not at.exception
    table = _page_tables(at)[0].value
    want = pq[pq["label"] == 3]
    assert table["row"].tolist() == sorted(want.index)
    np.testing.assert_allclose(table["ap"], want.loc[table["row"], "ap"], atol=1e-12)
    np.testing.assert_allclose(table["precision_at_1"], want.loc[table["row"], "precision_at_1"], atol=1e-12)
    # the neighbours of the first item of the class: a brute-force ranking by cosine
    nn = _page_tables(at)[1].value
    ds = ev.dataset
    X = normalize(ds.embeddings[method].astype(np.float64))
    q = int(table["row"].iloc[0])
    s = X @ X[q]
    s[q] = -np.inf
    assert nn["item"].tolist() == np.argsort(-s, kind="stable")[:10].tolist()
    # the class in colour, every other grey
    names = [t["name"] for t in _spec(at)["data"]]
    assert names == ["other classes", "AP of 3"]
    at.radio(key="map-colour").set_value("class").run()
    assert [t["name"] for t in _spec(at)["data"]] == ["other (9 classes)", "3"]


def test_on_a_split_the_map_holds_that_splits_items_and_split_colouring_needs_every_item():
    at = _open("training")
    assert at.radio(key="map-colour").options == ["class", "per-query AP", "split"]
    at.radio(key="map-colour").set_value("split").run()
    assert sorted(t["name"] for t in _spec(at)["data"]) == ["test_seen", "test_unseen", "train"]
    at.selectbox(key="split").set_value("test_unseen").run()
    assert not at.exception
    ds = load_files([ROOT / "demo_data" / "training.npz"])
    assert sorted(_points(_spec(at))) == np.flatnonzero(ds.split == "test_unseen").tolist()
    assert at.radio(key="map-colour").options == ["class", "per-query AP"]


def test_many_classes_colour_the_twenty_largest_and_say_so():
    at = _open("many_classes")
    names = [t["name"] for t in _spec(at)["data"]]
    assert names[0] == "other (580 classes)" and len(names) == 21
    assert any("the 20 largest in colour" in c.value for c in at.caption)


@pytest.mark.parametrize("installed", [True, False])
def test_the_umap_choice_follows_the_install(monkeypatch, installed):
    import analysis_core.stats.projection as projection

    monkeypatch.setattr(projection, "umap_installed", lambda: installed)
    at = _open()
    assert at.radio(key="map-kind").options == (["PCA", "UMAP"] if installed else ["PCA"])
    hint = [c.value for c in at.caption if "umap-learn" in c.value]
    assert bool(hint) != installed
    if hint:
        assert "pip install 'embedding-retrieval-eval[map]'" in hint[0]
