"""Every page on the smallest legal data (2 classes, 3 items per class, 1 method, one split),
and the sliders at their ends: no exception, no error box."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core_dashboard import cache, state
from tests.app.conftest import settle

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
COMMON = ["views/overview.py", "views/per_query.py", "views/pr_bands.py", "views/statistics.py",
          "views/histograms.py", "views/class_count.py", "views/ties.py", "views/embedding_map.py"]


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _tiny(rng: np.random.Generator, n_per_class: int = 3, n_classes: int = 2) -> dict:
    labels = np.repeat([f"class {c}" for c in range(n_classes)], n_per_class)
    return {"labels": labels, "embeddings": rng.standard_normal((labels.size, 4)).astype(np.float32)}


def _sets() -> dict[str, tuple[bytes, list[str]]]:
    """name -> (npz bytes, the pages it adds to the common ones)."""
    rng = np.random.default_rng(12)
    tiny = _tiny(rng)
    two = {"labels": tiny["labels"], "embeddings_a": tiny["embeddings"],
           "embeddings_b": rng.standard_normal((6, 3)).astype(np.float32)}
    return {
        "tiny": (_npz(**tiny), []),
        "one_split": (_npz(**tiny, split=np.array(["train"] * 6)), ["views/generalization.py"]),
        "confidence": (_npz(**tiny, confidence=rng.random(6)), ["views/confidence.py"]),
        "constant_confidence": (_npz(**tiny, confidence=np.full(6, 0.5)), ["views/confidence.py"]),
        "two_methods": (_npz(**two), ["views/training.py"]),
        # each split holds one class: within-split retrieval is impossible, every item together works
        "one_class_splits": (_npz(**tiny, split=np.array(["solo"] * 3 + ["rest"] * 3)), ["views/generalization.py"]),
        "perfect": (_npz(labels=tiny["labels"], embeddings=np.repeat(np.eye(2, 4, dtype=np.float32), 3, axis=0)), []),
        # no query has a positive: every class one item / queries whose classes the gallery lacks
        "singletons": (_npz(labels=np.array(list("abcde")), embeddings=rng.standard_normal((5, 4)).astype(np.float32)),
                       []),
        # the same with two methods and confidences: the Training and Confidence pages open too
        "singletons_full": (_npz(labels=np.array(list("abcde")), confidence=rng.random(5),
                                 embeddings_a_e1=rng.standard_normal((5, 4)).astype(np.float32),
                                 embeddings_a_e2=rng.standard_normal((5, 4)).astype(np.float32)),
                            ["views/confidence.py", "views/training.py"]),
        "lone_queries": (_npz(**tiny, role=np.array(["query"] * 3 + ["gallery"] * 3)), []),
        # 4 classes in each split (zero-shot): grouped recall needs S <= 4
        "zero_shot": (_npz(labels=np.repeat([f"c{i}" for i in range(8)], 6),
                           embeddings=(np.repeat(rng.standard_normal((8, 6)) * 2, 6, axis=0)
                                       + rng.standard_normal((48, 6))).astype(np.float32),
                           split=np.repeat(["train", "test"], 24)), ["views/generalization.py"]),
    }


SETS = _sets()
CASES = [pytest.param(name, page, id=f"{name}-{page[6:-3]}")
         for name, (_, extra) in SETS.items() for page in COMMON + extra]


@pytest.fixture()
def small_sets(monkeypatch):
    """The sets above offered as extra sidebar choices (AppTest cannot drive the file uploader)."""
    demo = cache.demo_files
    monkeypatch.setattr(state, "DEMO_SETS", {**state.DEMO_SETS, **{n: n for n in SETS}})
    monkeypatch.setattr(cache, "demo_files", lambda name: [(f"{name}.npz", SETS[name][0])] if name in SETS
                        else demo(name))


def _problems(at: AppTest) -> list[str]:
    return [e.value for e in at.exception] + [e.value for e in at.error]


def _open(name: str, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120).run()
    at.radio(key=state.SOURCE).set_value(name).run()
    if page:
        settle(at.switch_page(page).run())
    return at


@pytest.mark.parametrize(("name", "page"), CASES)
def test_every_page_opens_on_the_smallest_data(small_sets, name, page):
    at = _open(name, page)
    assert not _problems(at), _problems(at)
    assert len(at.title) == 1


@pytest.mark.parametrize("page", ["overview", "per_query", "statistics", "pr_bands", "class_count", "histograms",
                                  "ties", "confidence", "training"])
def test_every_page_without_any_positive_says_so_instead_of_blank_charts(small_sets, page):
    """Every class a singleton: no query has a positive. The pages showed blank charts, NaN
    tiles, 'every ranking is exact' and advice about picking methods; each now says why there is
    nothing to show and stops."""
    at = _open("singletons_full", f"views/{page}.py")
    assert not _problems(at), _problems(at)
    assert any("no query has a positive" in i.value for i in at.info), [i.value for i in at.info]
    assert not at.get("plotly_chart")


def test_generalization_page_defaults_the_group_size_to_the_smallest_splits_classes(small_sets):
    """Splits of 4 classes: S defaults to 4 (at most the smallest split's class count), so grouped
    Recall@1 is defined in both splits (S = 10 left it blank without a reason)."""
    at = _open("zero_shot", "views/generalization.py")
    assert not _problems(at), _problems(at)
    assert at.slider[0].value == 4 and at.slider[0].max == 4
    row = at.dataframe[0].value.set_index("metric").loc["grouped_recall_at_1"]
    assert np.isfinite(row["train"]) and np.isfinite(row["test"])


def test_confidence_page_says_why_spearman_is_undefined(small_sets):
    at = _open("constant_confidence", "views/confidence.py")
    assert not _problems(at), _problems(at)
    assert any("confidence is constant" in w.value for w in at.warning)


def test_class_count_slider_at_its_minimum_on_the_600_class_demo():
    """C = 2 leaves one possible group size: the S slider becomes a caption, the metrics stay."""
    at = _open("many_classes", "views/class_count.py")
    at.slider(key="cc-classes").set_value(2).run()
    assert not _problems(at), _problems(at)
    assert not [s for s in at.slider if s.key == "cc-group"]
    assert any("Group size S: 2 (the only possible value)" in c.value for c in at.caption)
    assert {m.label: m.value for m in at.metric}["Grouped R@1 (S = 2)"] != "–"
    at.slider(key="cc-classes").set_value(600).run()
    assert not _problems(at), _problems(at)
    assert at.slider(key="cc-group").value == 10


def test_an_unexpected_error_shows_an_id_not_a_traceback(monkeypatch, caplog):
    """A bug in a page: the page shows a short message with an id; the traceback (with the
    exception's text) goes to the server log only."""
    import analysis_core.figures.variability as figs

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals at /srv/app/x.py")

    monkeypatch.setattr(figs, "ap_by_class_figure", broken)
    at = AppTest.from_file(APP, default_timeout=120).run()
    with caplog.at_level("ERROR", logger="dashboard"):
        at.switch_page("views/per_query.py").run()
    assert not at.exception
    shown = " ".join(e.value for e in at.error)
    eid = shown.split("error id ")[1].split(".")[0]
    assert len(eid) == 8 and "secret" not in shown and "Traceback" not in shown
    logged = [r for r in caplog.records if eid in r.getMessage()]
    assert logged and "secret internals" in str(logged[0].exc_info[1])


def test_the_shipped_config_hides_error_details():
    import tomllib

    from streamlit.config import ShowErrorDetailsConfigOptions

    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert cfg["client"]["showErrorDetails"] == ShowErrorDetailsConfigOptions.NONE


def _huge_header_npz() -> bytes:
    """An npz whose one member declares a (10^7, 10^4) float32 array (373 GiB) over 4 KB of data."""
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (10**7, 10**4)})
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("embeddings.npy", header.getvalue() + bytes(4096))
        z.writestr("labels.npy", _npz_member(np.arange(10**7) % 2))
    return out.getvalue()


def _npz_member(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a[:4])
    return buf.getvalue()


def test_a_file_that_would_not_fit_in_memory_is_a_message_not_a_traceback(small_sets, monkeypatch):
    monkeypatch.setitem(SETS, "huge_header", (_huge_header_npz(), []))
    monkeypatch.setattr(state, "DEMO_SETS", {**state.DEMO_SETS, "huge_header": "huge_header"})
    at = _open("huge_header")
    assert not at.exception
    shown = [e.value for e in at.error]
    assert len(shown) == 1 and shown[0].startswith("**This input can't be used.**"), shown
    assert "Traceback" not in shown[0] and "site-packages" not in shown[0] and "error id" not in shown[0]
