"""The dashboard through Streamlit's AppTest: every page renders on demo data with the core's
numbers."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate, load_files
from analysis_core.export.figures import INSTALL_COMMAND, FigureStyle
from tests.app.conftest import settle

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
PAGES = ["views/overview.py", "views/per_query.py", "views/pr_bands.py", "views/statistics.py",
         "views/histograms.py", "views/class_count.py", "views/ties.py", "views/confidence.py",
         "views/generalization.py", "views/embedding_map.py"]


def _open(demo: str, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    if demo != "digits":
        at.radio(key="data_source").set_value(demo).run()
    if page:
        settle(at.switch_page(page).run())
    return at


@pytest.mark.parametrize("demo", ["digits", "many_classes"])
def test_overview_shows_the_cores_numbers_on_demo_data(demo):
    at = _open(demo)
    assert not at.exception
    ref = evaluate(load_files([ROOT / "demo_data" / f"{demo}.npz"])).summary()
    shown = at.dataframe[0].value["mAP"].to_dict()
    assert set(shown) == set(ref["methods"])
    for m, v in ref["methods"].items():
        assert shown[m] == pytest.approx(v["map"]["expected"], abs=1e-12)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Items"] == f"{ref['dataset']['n_items']:,}"
    assert metrics["Classes"] == f"{ref['dataset']['n_classes']:,}"


def test_precision_setting_gives_the_cores_float64_numbers():
    at = _open("digits")
    at.radio(key="precision").set_value("float64").run()
    assert not at.exception
    ref = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]), precision="float64").summary()
    shown = at.dataframe[0].value["mAP"].to_dict()
    for m, v in ref["methods"].items():
        assert shown[m] == pytest.approx(v["map"]["expected"], abs=1e-12)
    assert any("in float64" in c.value for c in at.caption)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_on_the_many_class_demo(page):
    at = _open("many_classes", page)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]  # unexpected errors are shown with an id, not raised
    assert len(at.title) == 1


@pytest.mark.parametrize("page", [p for p in PAGES if "confidence" not in p])
def test_every_page_renders_on_the_digits_demo(page):
    at = _open("digits", page)
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_class_count_sliders_change_the_sampled_metrics_to_the_cores_values():
    at = _open("many_classes", "views/class_count.py")
    before = {m.label: m.value for m in at.metric}
    at.slider(key="cc-classes").set_value(100).run()
    at.slider(key="cc-group").set_value(5).run()
    assert not at.exception
    after = {m.label: m.value for m in at.metric}
    assert after["Items"] != before["Items"]
    ds = load_files([ROOT / "demo_data" / "many_classes.npz"])
    ref = evaluate(ds, methods=["epoch_3"], ks=(1,), max_classes=100, group_size=5, seed=0).summary()
    m = ref["methods"]["epoch_3"]
    assert after["Recall@1"] == f"{m['recall_at_k']['1']:.4f}"
    assert after["Grouped R@1 (S = 5)"] == f"{m['grouped_recall_at_k']['k']['1']['mean']:.4f}"
    assert after["Items"] == f"{ref['dataset']['n_items']:,}"


def test_upload_mode_without_files_asks_for_them_and_pages_stay_calm():
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.radio(key="data_source").set_value("upload").run()
    assert not at.exception
    assert any("Upload" in i.value for i in at.info)
    at.switch_page("views/statistics.py").run()
    assert not at.exception and any("Upload" in i.value for i in at.info)


def test_statistics_page_numbers_equal_the_core():
    from analysis_core.stats.variability import ap_frame, one_way

    at = _open("digits", "views/statistics.py")
    shown = at.dataframe[0].value.set_index("test")
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    ev = evaluate(ds)
    ap = ap_frame(ev, ev.methods[:2])  # the page's default: the first two methods (natural order)
    ref = one_way(ap).tests.set_index("test")
    np.testing.assert_allclose(shown.loc["anova", "statistic"], ref.loc["anova", "statistic"], rtol=1e-12)


@pytest.mark.dask
def test_compute_setting_and_query_sample_give_the_cores_numbers():
    """A local Dask cluster gives the in-process numbers; a query sample shows the core's estimates
    and intervals, and the per-class table says how many queries each class contributed."""
    pytest.importorskip("distributed")
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    at = _open("digits")
    exact = at.dataframe[0].value["mAP"].to_dict()
    at.radio(key="compute_mode").set_value("local").run()
    at.number_input(key="compute_workers").set_value(1).run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.dataframe[0].value["mAP"].to_dict() == exact  # served from the cache: same key, same numbers
    at.number_input(key="query_sample").set_value(300).run()
    at.number_input(key="query_seed").set_value(3).run()
    assert not at.exception, [e.value for e in at.exception]
    ref = evaluate(ds, query_sample=300, seed=3).summary()
    shown = at.dataframe[0].value["mAP"].to_dict()
    for m, v in ref["methods"].items():
        assert shown[m] == v["map"]["expected"] == v["intervals"]["map"]["estimate"]
    iv = at.dataframe[1].value
    row = iv[(iv["method"] == ds.methods[0]) & (iv["metric"] == "map")].iloc[0]
    assert (row["low"], row["high"]) == (ref["methods"][ds.methods[0]]["intervals"]["map"]["low"],
                                         ref["methods"][ds.methods[0]]["intervals"]["map"]["high"])
    at.switch_page("views/per_query.py").run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    assert {"n_queries", "of_queries"} <= set(table.columns)
    assert table.groupby("method")["n_queries"].sum().eq(300).all()


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="poppler-utils missing (make test installs them)")
def test_export_all_archive_is_rebuilt_at_the_new_presets_size():
    at = _open("digits")
    sizes = {}
    for preset in ("single", "double"):
        at.radio(key="export_preset").set_value(preset).run()
        next(b for b in at.button if b.label == "Prepare the archive").click().run()
        assert not at.exception, [e.value for e in at.exception]
        settings, data = at.session_state["_report_archive"]
        with zipfile.ZipFile(io.BytesIO(data)) as z, tempfile.TemporaryDirectory() as tmp:
            z.extractall(tmp)
            pdfs = sorted(Path(tmp, "figures").glob("*.pdf"))
            assert len(pdfs) >= 8 and len(list(Path(tmp, "figures").glob("*.png"))) == len(pdfs)
            for p in pdfs:
                out = subprocess.run(["pdfinfo", str(p)], capture_output=True, text=True, check=True).stdout
                w = float(re.search(r"Page size:\s+([\d.]+) x", out).group(1)) / 72
                assert abs(w - FigureStyle.preset(preset).width_in) <= 0.01, (preset, p.name, w)
            sizes[preset] = data
    assert sizes["single"] != sizes["double"]


def test_without_chromium_the_download_buttons_give_way_to_the_install_command(monkeypatch, tmp_path):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))
    for page in (None, "views/pr_bands.py"):
        at = _open("digits", page)
        assert not at.exception, [e.value for e in at.exception]
        assert any(INSTALL_COMMAND in i.value for i in at.info)


def test_moving_the_recall_points_slider_recomputes_bands_not_the_evaluation():
    """The PR page evaluates once on its fine grid; every N_P is a subset of it. The band it shows
    equals the core's band of an evaluation on that grid."""
    import pandas as pd

    from analysis_core.stats.bands import pr_bands
    from analysis_core_dashboard import cache

    at = _open("digits", "views/pr_bands.py")

    def evaluations() -> set[str]:
        # background work still running (an earlier test's or page's guesses) may store an
        # evaluation of other data at any moment: compare once it has finished
        deadline = time.monotonic() + 300
        while cache.STORE._running and time.monotonic() < deadline:
            time.sleep(0.05)
        return {k for k in cache.STORE._items if re.fullmatch(r"ev/[0-9a-f]+", k)}

    before = evaluations()
    for n in (21, 5, 61, 5):
        next(s for s in at.select_slider if s.label == "Recall points N_P").set_value(n).run()
        assert not at.exception and not at.error
        # no evaluation added (an earlier test's may be evicted from the bounded store meanwhile)
        assert not evaluations() - before, n
    shown = [e.value for k, e in cache.STORE._items.items() if k.endswith("/bands/('t', 5, 'all', None)")]
    ref = pr_bands(evaluate(load_files([ROOT / "demo_data" / "digits.npz"]), n_recall=5), classes=["all"])
    assert len(shown) == 1
    pd.testing.assert_frame_equal(shown[0].reset_index(drop=True), ref)


def test_class_count_on_a_large_upload_samples_queries_says_so_and_gives_the_exact_values_when_asked(tmp_path):
    """Over cache.EXACT_ITEMS items the C-class pass ranks a stratified sample of
    cache.SAMPLE_QUERIES queries: the page's numbers are the core's evaluate with that query
    sample, the caption gives the sample and the intervals, the sweep's sampled points are named;
    "Every query" gives the exact evaluation."""
    from analysis_core_dashboard import cache

    rng = np.random.default_rng(5)
    n, n_classes = cache.EXACT_ITEMS + 1500, 60
    y = rng.integers(0, n_classes, n)
    X = (rng.standard_normal((n_classes, 8))[y] + 1.2 * rng.standard_normal((n, 8))).astype(np.float32)
    buf = io.BytesIO()
    np.savez(buf, embeddings_m=X, labels=np.array([f"c{c}" for c in y]))
    (tmp_path / "big.npz").write_bytes(buf.getvalue())
    ds = load_files([tmp_path / "big.npz"])
    at = AppTest.from_file(APP, default_timeout=600).run()
    at.radio(key="data_source").set_value("upload").run()
    at.file_uploader(key="uploaded_files").set_value(("big.npz", buf.getvalue(), "application/octet-stream")).run()
    settle(at.switch_page("views/class_count.py").run())
    assert not at.exception and not at.error
    # every class drawn: the page's own pass over every query (exact), no sample
    shown = {m.label: m.value for m in at.metric}
    m = evaluate(ds, ks=(1,)).summary()["methods"]["m"]
    assert shown["Recall@1"] == f"{m['recall_at_k']['1']:.4f}" and shown["MAP@R"] == f"{m['map_at_r']:.4f}"
    assert "queries (seed" not in " ".join(c.value for c in at.caption)
    # ... but Grouped Recall@1 samples each group (10 classes, ~1 080 queries) and says so
    g = evaluate(ds, ks=(1,), group_size=10, query_sample=cache.SAMPLE_QUERIES).summary()["methods"]["m"][
        "grouped_recall_at_k"]
    assert g["n_observed"] < g["n_queries"]
    assert shown["Grouped R@1 (S = 10)"] == f"{g['k']['1']['mean']:.4f}"
    assert f"each group ranks a stratified sample of at most {cache.SAMPLE_QUERIES:,}" in " ".join(
        c.value for c in at.caption)
    at.select_slider(key="alpha").set_value(0.1).run()  # a view at another α, then the exact values
    at.toggle(key="cc-exact").set_value(True).run()
    exact = evaluate(ds, ks=(1,), group_size=10).summary()["methods"]["m"]["grouped_recall_at_k"]["k"]["1"]
    assert {m.label: m.value for m in at.metric}["Grouped R@1 (S = 10)"] == f"{exact['mean']:.4f}"
    at.toggle(key="cc-exact").set_value(False).run()
    at.select_slider(key="alpha").set_value(0.05).run()
    c = 50  # of 60 classes: ~5 400 items, over EXACT_ITEMS
    at.slider(key="cc-classes").set_value(c).run()
    assert not at.exception and not at.error
    shown = {m.label: m.value for m in at.metric}
    ref = evaluate(ds, ks=(1,), max_classes=c, seed=0, query_sample=cache.SAMPLE_QUERIES, group_size=10)
    m = ref.summary()["methods"]["m"]
    assert ref.rows.size > cache.EXACT_ITEMS
    assert shown["Recall@1"] == f"{m['recall_at_k']['1']:.4f}" and shown["MAP@R"] == f"{m['map_at_r']:.4f}"
    # Grouped Recall: each group of 10 classes (~1 080 queries) ranks a sample of SAMPLE_QUERIES, as
    # evaluate's does (the page's sure hits only save passes)
    g = m["grouped_recall_at_k"]
    assert g["query_sample"] == cache.SAMPLE_QUERIES and g["n_observed"] < ref.rows.size
    assert shown["Grouped R@1 (S = 10)"] == f"{g['k']['1']['mean']:.4f}"
    text = " ".join(c.value for c in at.caption)
    assert f"sample of {cache.SAMPLE_QUERIES:,} of the {ref.query_sample.frame.size:,} queries" in text
    assert f"[{m['intervals']['recall_at_1']['low']:.4f}, {m['intervals']['recall_at_1']['high']:.4f}]" in text
    assert "each repeat ranks a stratified sample" in text  # the sweep's points over EXACT_ITEMS items
    assert f"each group ranks a stratified sample of at most {cache.SAMPLE_QUERIES:,}" in text
    at.select_slider(key="alpha").set_value(0.1).run()  # a view at another α, then the exact values
    at.toggle(key="cc-exact").set_value(True).run()
    assert not at.exception and not at.error
    shown = {m.label: m.value for m in at.metric}
    m = evaluate(ds, ks=(1,), max_classes=c, seed=0, group_size=10).summary()["methods"]["m"]
    assert shown["Recall@1"] == f"{m['recall_at_k']['1']:.4f}" and shown["MAP@R"] == f"{m['map_at_r']:.4f}"
    assert shown["Grouped R@1 (S = 10)"] == f"{m['grouped_recall_at_k']['k']['1']['mean']:.4f}"
    text = " ".join(c.value for c in at.caption)
    assert "queries (seed" not in text and "each group ranks a stratified sample" not in text


def test_the_simultaneous_band_at_alpha_0_001_uses_the_resamples_that_level_needs():
    """At the smallest α of the sidebar the bootstrap band needs 9 979 resamples, not the default
    2 000 (with those its quantile's level would fall short by ~α/2): the page renders it, and its
    band is the core's pr_bands at that α (the same resamples, the same seed), wider than at α = 0.05."""
    from analysis_core.stats.bands import bootstrap_resamples, pr_bands
    from analysis_core_dashboard import cache

    assert bootstrap_resamples(None, 0.001) == 9979
    at = _open("digits", "views/pr_bands.py")
    at.select_slider(key="alpha").set_value(0.001).run()
    next(r for r in at.radio if r.label == "Band").set_value("bootstrap").run()
    assert not at.exception and not at.error
    # stored bootstrap bands of every query (α is part of the key's hash; a prefetch at α = 0.05 may be there too)
    shown = [e.value.reset_index(drop=True) for k, e in cache.STORE._items.items()
             if "/bands/('bootstrap'" in k and k.endswith("'all', None)") and hasattr(e, "value")]
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    n_recall = next(s for s in at.select_slider if s.label == "Recall points N_P").value
    ref = pr_bands(ev, alpha=0.001, kind="bootstrap", n_recall=n_recall, classes=["all"])
    assert any(b.shape == ref.shape and b.equals(ref) for b in shown)
    wide = pr_bands(ev, alpha=0.05, kind="bootstrap", n_recall=n_recall, classes=["all"])
    assert ((ref["high"] - ref["low"]) > (wide["high"] - wide["low"])).all()


def test_statistics_and_overview_name_the_unit_and_follow_the_sidebar():
    """The default unit is the class: the Statistics page's method comparisons are the core's
    jackknife over classes, headed with the unit and its count; switching the sidebar to the query
    unit gives the per-query tests, and the Overview's intervals follow."""
    from analysis_core.stats.analysis import analyse
    from analysis_core.stats.variability import ap_frame, metric_frame

    at = _open("digits", "views/statistics.py")
    assert not at.exception
    heads = [h.value for h in at.subheader]
    assert any("unit: class (10 units)" in h for h in heads), heads
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    methods = ev.methods[:2]
    ap = ap_frame(ev, methods)
    want = analyse(ap, 0.05, metrics=metric_frame(ev, methods), jackknife=ev.class_jackknife()).paired
    shown = next(d.value for d in at.dataframe if "p_holm" in d.value.columns and "unit" in d.value.columns)
    np.testing.assert_allclose(shown["mean_diff"].to_numpy(), want["mean_diff"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(shown["ci_low"].to_numpy(), want["ci_low"].to_numpy(), rtol=1e-12)
    assert (shown["unit"] == "class").all()
    at.radio(key="unit").set_value("query").run()
    assert not at.exception
    assert any("unit: query (1,797 units)" in h.value for h in at.subheader)
    ov = _open("digits")
    assert any("unit: class (10 classes)" in h.value for h in ov.subheader)


def test_moving_alpha_with_a_query_sample_runs_no_pass_and_shows_that_levels_intervals(monkeypatch):
    """α enters no pass: with a query sample, moving the α slider recomputes no evaluation, and the
    Overview's sample intervals are those of an evaluation made at that level."""
    import analysis_core.engine.core as engine_core
    import analysis_core.evaluation as evaluation_module

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    at = _open("digits")
    at.number_input(key="query_sample").set_value(300).run()
    assert not at.exception, [e.value for e in at.exception]
    passes: list[int] = []
    original = engine_core.run_pass

    def counted(*args, **kwargs):
        passes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(engine_core, "run_pass", counted)
    monkeypatch.setattr(evaluation_module, "run_pass", counted)
    at.select_slider(key="alpha").set_value(0.01).run()
    assert not at.exception, [e.value for e in at.exception]
    assert passes == []
    ref = evaluate(ds, query_sample=300, seed=0, alpha=0.01).summary()["methods"]
    iv = at.dataframe[1].value
    row = iv[(iv["method"] == ds.methods[0]) & (iv["metric"] == "map")].iloc[0]
    want = ref[ds.methods[0]]["intervals"]["map"]
    assert (row["low"], row["high"]) == pytest.approx((want["low"], want["high"]), rel=1e-12)


def test_the_pr_bands_page_follows_the_sidebars_unit():
    """Classes by default (the core's default band), queries when the sidebar says so: the page's
    caption names the unit, and its band equals the core's at that unit."""
    from analysis_core.stats.bands import pr_bands

    at = _open("digits", "views/pr_bands.py")
    assert not at.exception
    assert any("10 classes" in c.value for c in at.caption), [c.value for c in at.caption]
    at.radio(key="unit").set_value("query").run()
    assert not at.exception
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]), n_recall=61)
    want = pr_bands(ev, alpha=0.05, kind="t", n_recall=11, classes=["all"], unit="query")
    n = int(want["n_units"].max())
    assert any(f"t interval over {n:,} queries" in c.value for c in at.caption), [c.value for c in at.caption]


def test_statistics_on_600_classes_opens_on_the_hardest_and_easiest_in_natural_order_with_one_warning_each():
    """Many classes: the class picker lists the classes in natural order and opens on the 20 hardest
    and 20 easiest by mean AP (the core's choice, computed here from the per-query APs); the page's
    warnings are one per concern (pairwise tables skipped once for both procedures, the small groups
    and Welch in one)."""
    from analysis_core.methods import natural_key
    from analysis_core.stats.variability import ap_frame

    at = _open("many_classes", "views/statistics.py")
    assert not at.exception, [e.value for e in at.exception]
    picker = at.multiselect[1]
    assert picker.label == "Classes"
    assert len(picker.options) == 600
    assert list(picker.options) == sorted(picker.options, key=lambda c: natural_key(str(c)))
    ev = evaluate(load_files([ROOT / "demo_data" / "many_classes.npz"]))
    ap = ap_frame(ev, at.multiselect[0].value)
    means = ap.groupby("label")["ap"].mean().sort_values(kind="stable")
    ranked = sorted(means.index, key=lambda c: (means[c], natural_key(str(c))))
    assert set(picker.value) == set(ranked[:20] + ranked[-20:]) and len(picker.value) == 40
    warnings = [w.value for w in at.warning]
    assert len(warnings) == len(set(warnings)) and sum("pairwise comparisons" in w for w in warnings) <= 1
    assert sum("fewer than 5 queries" in w for w in warnings) <= 1 and not any(w.startswith("welch:") for w in warnings)
