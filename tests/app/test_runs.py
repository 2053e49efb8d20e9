"""The dashboard follows the design of the methods (family, run, step) on the digits_runs demo (3
losses x seeds 0-2 x epochs 0, 1, 3, 10; splits train / test_seen / test_unseen): the sidebar's
design table, Overview's mean ± sd over runs with the run dots, Statistics' family tests with the
run as unit, Training's mean over runs with a band. The oracle is the core's
``Evaluation.families()`` computed here directly (and numpy for a design edited in the page)."""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate, load_files
from analysis_core_dashboard import cache

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
DEMO = ROOT / "demo_data" / "digits_runs.npz"
SPLITS = ("test_seen", "test_unseen", "train")
FAMILIES = ["multisim", "proxyanchor", "triplet"]
EDITOR = "design_editor"


@pytest.fixture(scope="module")
def core():
    """The core's evaluations: every item in one gallery ("all") and each split on its own."""
    ev = evaluate(load_files([DEMO]))
    return {"all": ev, **{sp: ev.within_split(sp) for sp in SPLITS}}


def _open(page: str | None = None, edits: dict | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=900).run()
    at.radio(key="data_source").set_value("digits_runs").run()
    if edits is not None:
        _edit(at, edits).run()
    if page:
        _edit(at, edits).switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _edit(at: AppTest, edits: dict | None) -> AppTest:
    """The design editor's edits for the next run. A browser sends every widget's state with each
    rerun; AppTest sends none for a data editor, so the edits are given again before each run."""
    if edits is not None:
        at.session_state[EDITOR] = {"edited_rows": edits, "added_rows": [], "deleted_rows": []}
    return at


def _table(at: AppTest, *columns: str) -> pd.DataFrame:
    """The page's first table with these columns."""
    return next(d.value for d in at.main.dataframe if set(columns) <= set(d.value.columns))


def _charts(at: AppTest, title_start: str) -> dict[str, dict]:
    """The page's plotly figures whose title starts so, by the split their title names."""
    out = {}
    for c in at.get("plotly_chart"):
        spec = json.loads(c.proto.spec)
        title = spec["layout"]["title"]["text"]
        if title.startswith(title_start):
            out[re.search(r"\(([^)]*)\)", title).group(1)] = spec
    return out


def _arr(v) -> np.ndarray:
    """A figure's data array (plotly sends numpy arrays as base64 typed arrays)."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
    return np.asarray(v)


def _mean_sd(cell: str) -> tuple[float, float]:
    mean, sd = cell.split(" ± ")
    return float(mean), float(sd)


def test_the_demo_loads_with_its_design_from_the_names():
    at = _open()
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Items"] == "1,797" and metrics["Methods"] == "36"
    shown = at.sidebar.dataframe[0].value  # the design table, from the names
    shipped = pd.read_csv(ROOT / "demo_data" / "digits_runs_design.csv", dtype=str)
    pd.testing.assert_frame_equal(shown.astype(str).sort_values("method").reset_index(drop=True),
                                  shipped[list(shown.columns)].sort_values("method").reset_index(drop=True))
    assert at.sidebar.dataframe[0].editing_mode == "fixed"


def test_overview_shows_each_familys_mean_and_sd_over_runs_and_the_run_dots(core):
    at = _open()
    assert "Runs — unit: run (3 families, 3 runs each)" in [s.value for s in at.subheader]
    table = _table(at, "family", "n_runs", "runs", "mAP")
    assert list(table["split"].unique()) == ["all", *SPLITS]
    numbers = _table(at, "family", "mean", "sd", "ci_low", "ci_high")
    for sp, ev in core.items():
        ref = ev.families().summary.set_index(["family", "metric"])
        for fam in FAMILIES:
            row = table[(table["split"] == sp) & (table["family"] == fam)].iloc[0]
            r = ref.loc[(fam, "map")]
            assert row["n_runs"] == r["n_runs"] == 3 and row["runs"] == "seed0, seed1, seed2"
            mean, sd = _mean_sd(row["mAP"])
            assert mean == pytest.approx(r["mean"], abs=5e-5) and sd == pytest.approx(r["sd"], abs=5e-5)
        got = numbers[numbers["split"] == sp].set_index(["family", "metric"]).loc[ref.index]
        np.testing.assert_allclose(got[["mean", "sd", "ci_low", "ci_high"]].to_numpy(float),
                                   ref[["mean", "sd", "ci_low", "ci_high"]].to_numpy(float), rtol=0, atol=1e-12)
    # the run dots of the figure's split: every run's mAP in the first panel
    for sp in ("all", "test_unseen"):
        if sp != "all":
            at.radio(key="overview_runs_split").set_value(sp).run()
        spec = _charts(at, "Runs per family")[sp]
        dots = [t for t in spec["data"] if t.get("customdata") and t.get("xaxis", "x") == "x"]
        values = core[sp].families().values
        for fam, trace in zip(FAMILIES, dots, strict=True):
            ref = values[(values["family"] == fam) & (values["metric"] == "map")]
            assert _arr(trace["customdata"]).tolist() == ref["run"].tolist()
            np.testing.assert_allclose(_arr(trace["y"]), ref["value"].to_numpy(), rtol=0, atol=1e-12)


def test_statistics_shows_the_family_tests_of_the_core_for_the_run_as_unit(core):
    at = _open("views/statistics.py")
    assert "Families (unit: run) — 3 families, 3 runs each" in [s.value for s in at.subheader]
    assert any("for these trained models" in c.value for c in at.caption)
    # the method comparisons open on two families, not two seeds of one loss
    assert next(m for m in at.multiselect if m.label == "Methods").value == ["multisim_seed0_e10",
                                                                           "proxyanchor_seed0_e10"]
    shown = _table(at, "family_a", "family_b", "p_holm", "prob_improvement")
    ref = pd.concat([ev.families().tests for ev in core.values()], ignore_index=True)
    _same_tests(shown, ref)
    assert set(shown["family_a"]) | set(shown["family_b"]) == set(FAMILIES)


def _same_tests(shown: pd.DataFrame, ref: pd.DataFrame) -> None:
    key = ["split", "metric", "family_a", "family_b"]
    got = shown.set_index(key).sort_index()
    want = ref.rename(columns={"metric": "name", "label": "metric"}).set_index(key).sort_index()
    assert got.index.equals(want.index) and len(got) > 0
    cols = ["mean_diff", "ci_low", "ci_high", "p_value", "p_holm", "prob_improvement", "pi_low", "pi_high"]
    np.testing.assert_allclose(got[cols].to_numpy(float), want[cols].to_numpy(float), rtol=0, atol=1e-12)
    assert (got["note"] == want["note"]).all()


def test_statistics_chooses_each_runs_checkpoint_on_one_split_and_reports_another(core):
    at = _open("views/statistics.py")
    choose = next(s for s in at.selectbox if s.label == "Choose each run's checkpoint on")
    report = next(s for s in at.selectbox if s.label == "Report it on")
    assert choose.value is None and report.value is None
    choose.set_value("test_seen")
    report.set_value("test_unseen").run()
    assert not at.exception, [e.value for e in at.exception]
    ref = core["all"].families(select_on="test_seen", report_on="test_unseen")
    _same_tests(_table(at, "family_a", "family_b", "p_holm"), ref.tests)
    chosen = _table(at, "select_on", "report_on", "step")
    assert chosen["step"].tolist() == ref.selection["step"].tolist()
    assert not [w for w in at.warning if "same split" in w.value]
    next(s for s in at.selectbox if s.label == "Report it on").set_value("test_seen").run()
    assert any("same split 'test_seen'" in w.value for w in at.warning)
    next(s for s in at.selectbox if s.label == "Report it on").set_value(None).run()
    assert any("Choose both splits" in i.value for i in at.info)
    assert not at.exception


def test_training_shows_the_mean_over_runs_with_a_band_over_runs_per_split(core):
    at = _open("views/training.py")
    heads = [s.value for s in at.subheader]
    assert heads.index("Mean over runs — unit: run (3 families, 3 runs each)") < heads.index("Every run's curve")
    charts = _charts(at, "Metrics over training, mean over runs")
    assert set(charts) == {"all", *SPLITS}
    for sp in ("all", "test_unseen"):
        curves = core[sp].families().curves
        traces = [t for t in charts[sp]["data"] if t.get("xaxis", "x") == "x"]  # the mAP panel
        for fam in FAMILIES:
            ref = curves[(curves["family"] == fam) & (curves["metric"] == "map")].sort_values("step")
            band = next(t for t in traces if t.get("fill") == "toself" and t["legendgroup"] == fam)
            line = next(t for t in traces if t.get("fill") != "toself" and t["legendgroup"] == fam)
            assert _arr(line["x"]).tolist() == [0, 1, 3, 10]
            np.testing.assert_allclose(_arr(line["y"]), ref["mean"].to_numpy(), rtol=0, atol=1e-12)
            np.testing.assert_allclose(_arr(band["y"]), np.concatenate([ref["ci_high"], ref["ci_low"][::-1]]),
                                       rtol=0, atol=1e-12)


def _pooled_edits(at: AppTest) -> dict:
    """Every method in one family 'pooled', its run named by loss and seed (9 runs)."""
    table = at.sidebar.dataframe[0].value
    return {i: {"family": "pooled", "run": f"{f}_{r}"} for i, (f, r) in enumerate(zip(table["family"], table["run"],
                                                                                       strict=True))}


def test_editing_the_design_into_one_family_updates_the_pages(core):
    at = _open()
    edits = _pooled_edits(at)
    _edit(at, edits).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "Runs — unit: run (1 family, 9 runs each)" in [s.value for s in at.subheader]
    row = _table(at, "family", "n_runs", "mAP").set_index(["split", "family"]).loc[("all", "pooled")]
    last = [m for m in core["all"].methods if m.endswith("_e10")]
    v = np.array([core["all"].method_summary(m)["map"]["expected"] for m in last])
    assert row["n_runs"] == 9 == len(last)
    mean, sd = _mean_sd(row["mAP"])
    assert mean == pytest.approx(v.mean(), abs=5e-5) and sd == pytest.approx(v.std(ddof=1), abs=5e-5)
    _edit(at, edits).switch_page("views/statistics.py").run()
    assert any("Fewer than two families" in i.value for i in at.info)
    _edit(at, {}).switch_page("views/overview.py").run()  # back to the names
    assert "Runs — unit: run (3 families, 3 runs each)" in [s.value for s in at.subheader]


def test_a_bad_step_in_the_design_table_is_a_message_not_a_traceback():
    edits = {0: {"step": "ten"}}
    at = _open(edits=edits)
    assert not at.exception
    assert any("step 'ten' of method" in e.value for e in at.sidebar.error)
    assert any("The design table can't be used" in e.value for e in at.main.error)
    assert not [s for s in at.subheader if s.value.startswith("Runs")]
    _edit(at, edits).switch_page("views/training.py").run()
    assert not at.exception and any("The design table can't be used" in e.value for e in at.main.error)


def test_an_uploaded_design_csv_is_used_and_a_bad_one_is_named(core):
    at = _open()
    shipped = pd.read_csv(ROOT / "demo_data" / "digits_runs_design.csv", dtype=str, keep_default_na=False)
    renamed = shipped.assign(family=shipped["family"].replace({"proxyanchor": "proxy"}))
    at.file_uploader(key="design_upload").set_value(("mine.csv", renamed.to_csv(index=False).encode(), "text/csv"))
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert set(at.sidebar.dataframe[0].value["family"]) == {"multisim", "proxy", "triplet"}
    table = _table(at, "family", "n_runs", "mAP")
    assert set(table["family"]) == {"multisim", "proxy", "triplet"}
    ref = core["all"].families().summary.set_index(["family", "metric"]).loc[("proxyanchor", "map")]
    mean, _ = _mean_sd(table.set_index(["split", "family"]).loc[("all", "proxy"), "mAP"])
    assert mean == pytest.approx(ref["mean"], abs=5e-5)
    short = io.BytesIO()
    shipped.iloc[1:].to_csv(short, index=False)
    at.file_uploader(key="design_upload").set_value(("short.csv", short.getvalue(), "text/csv"))
    at.run()
    assert not at.exception
    assert any("missing ['triplet_seed0_e0']" in e.value for e in at.sidebar.error)
    assert any("The design table can't be used" in e.value for e in at.main.error)


def test_a_design_shares_the_pass_and_keys_the_run_analysis():
    """Outside the pages: the design enters the cache key of every result derived from the
    evaluation, not the pass (which it does not change)."""
    rng = np.random.default_rng(5)
    labels = np.repeat(np.arange(4), 6)
    files = []
    emb = {f"{f}_seed{s}": rng.standard_normal((labels.size, 3)).astype(np.float32) for f in "ab" for s in (0, 1)}
    buf = io.BytesIO()
    np.savez(buf, labels=labels, **{f"embeddings_{m}": x for m, x in emb.items()})
    files = [("tiny_runs.npz", buf.getvalue())]
    digest = cache.files_digest(files)
    ds = cache.dataset(digest, lambda: files, "cosine")
    tok = cache.Token(digest, "cosine", (1,), 11, None, 0, 0.05)
    rows = tuple((m, "one", m, None) for m in ds.methods)  # every method a run of one family
    other = dataclasses.replace(tok, design=rows)
    plain, designed = cache.evaluation(tok, ds), cache.evaluation(other, ds)
    assert designed.results is plain.results and designed.design.content == rows
    assert tok.key != other.key
    a, b = cache.runs(tok, {"all": plain}), cache.runs(other, {"all": designed})
    assert set(a.summary["family"]) == {"a", "b"} and set(b.summary["family"]) == {"one"}
    assert set(cache.runs(tok, {"all": plain}).summary["family"]) == {"a", "b"}  # no stale result


def test_an_unedited_table_is_the_names_design_even_without_family_names():
    """Methods named by their step alone ("epoch_3") have no family in their names' design; the
    unedited table is that design, and an edit that leaves a family empty is a message."""
    from analysis_core import InputError
    from analysis_core.design import Design
    from analysis_core_dashboard.design import resolve, text_table

    methods = ["epoch_3", "epoch_10"]
    table = text_table(Design.from_names(methods))
    assert table["family"].tolist() == ["", ""]
    design, rows = resolve(table, methods)
    assert rows == () and design.content == Design.from_names(methods).content and design.has_steps
    edited = table.assign(family=["model", ""])
    with pytest.raises(InputError, match="no family for method"):
        resolve(edited, methods)
    design, rows = resolve(table.assign(family="model"), methods)
    assert rows == (("epoch_3", "model", "", 3), ("epoch_10", "model", "", 10))
