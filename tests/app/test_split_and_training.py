"""The sidebar's split selector: every page's numbers become the command line's --split values;
the Training page shows the checkpoints in natural order with intervals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate, load_files
from analysis_core.stats.analysis import analyse
from analysis_core.stats.variability import ap_frame, metric_frame

from ..helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
SPLIT = "test_unseen"


@pytest.fixture(scope="module")
def cli_split():
    r = run_cli("evaluate", ROOT / "demo_data" / "training.npz", "--split", SPLIT, "--quiet")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _open(page: str | None = None, split: str = SPLIT) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=600).run()
    at.radio(key="data_source").set_value("training").run()
    at.selectbox(key="split").set_value(split).run()
    if page:
        at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_overview_follows_the_split(cli_split):
    at = _open()
    shown = at.dataframe[0].value["mAP"].to_dict()
    for m, v in cli_split["methods"].items():
        assert shown[m] == v["map"]["expected"]
    assert {x.label: x.value for x in at.metric}["Items"] == f"{cli_split['dataset']['n_items']:,}"
    everything = _open(split="")
    assert everything.dataframe[0].value["mAP"].to_dict() != shown  # all items in one gallery differ


def test_statistics_follow_the_split():
    at = _open("views/statistics.py")
    ev = evaluate(load_files([ROOT / "demo_data" / "training.npz"]), split=SPLIT)
    methods = ev.methods[:2]
    ref = analyse(ap_frame(ev, methods), metrics=metric_frame(ev, methods)).one_way.tests.set_index("test")
    shown = at.dataframe[0].value.set_index("test")
    assert shown.loc["anova", "statistic"] == pytest.approx(ref.loc["anova", "statistic"], rel=1e-12)


def test_confidence_follows_the_split_with_each_checkpoints_own_confidence():
    from scipy import stats

    at = _open("views/confidence.py")
    ds = load_files([ROOT / "demo_data" / "training.npz"])
    ev = evaluate(ds, split=SPLIT)
    table = at.main.dataframe[-1].value.set_index("method")  # the sidebar holds the design table
    rho_col = next(c for c in table.columns if "Spearman" in c)
    for m in ("mlp32_e0", "mlp64_e30"):
        pq = ev.per_query(m)
        pq = pq[pq["n_positives"] > 0]
        expected = stats.spearmanr(ds.confidence_for(m)[pq["query"].to_numpy()], pq["ap"]).statistic
        assert table.loc[m, rho_col] == pytest.approx(expected, abs=1e-12)
    assert table[rho_col].nunique() > 1  # each checkpoint its own confidence


def test_class_count_follows_the_split(cli_split):
    at = _open("views/class_count.py")
    metrics = {x.label: x.value for x in at.metric}
    method = next(s for s in at.selectbox if s.label == "Method").value
    assert metrics["Items"] == f"{cli_split['dataset']['n_items']:,}"
    m = cli_split["methods"][method]
    assert metrics["Recall@1"] == f"{m['recall_at_k']['1']:.4f}"


def test_training_page_shows_checkpoints_in_natural_order_with_intervals():
    at = _open("views/training.py")
    assert [t.value for t in at.title] == ["Checkpoints over training"]
    values = at.dataframe[0].value
    mlp64 = values[values["family"] == "mlp64"]
    assert mlp64["step"].tolist() == [0, 1, 3, 10, 30]
    tests = at.dataframe[1].value
    row = tests[(tests["family"] == "mlp64") & (tests["metric"] == "map")].iloc[0]
    assert row["best"] == "mlp64_e0" and row["last"] == "mlp64_e30"
    assert np.isfinite(row["ci_low"]) and row["ci_low"] > 0
    # every figure names the split once in its title (not "(test_unseen) ... [split: test_unseen]")
    charts = at.get("plotly_chart")
    assert len(charts) >= 3
    for chart in charts:
        title = json.loads(chart.proto.spec)["layout"]["title"]["text"]
        assert title.count(SPLIT) == 1 and "[split:" not in title, title
