"""The dashboard through Streamlit's AppTest: pages render on demo data with the core's numbers."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate, load_files

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")


def _map_column(at):
    df = at.dataframe[0].value
    return df["mAP"].to_dict()


@pytest.mark.parametrize("demo", ["digits", "many_classes"])
def test_overview_shows_the_cores_numbers_on_demo_data(demo):
    at = AppTest.from_file(APP, default_timeout=180).run()
    if demo != "digits":
        at.radio[0].set_value(demo).run()
    assert not at.exception
    ref = evaluate(load_files([ROOT / "demo_data" / f"{demo}.npz"])).summary()
    shown = _map_column(at)
    assert set(shown) == set(ref["methods"])
    for m, v in ref["methods"].items():
        assert shown[m] == pytest.approx(v["map"]["expected"], abs=1e-12)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Items"] == f"{ref['dataset']['n_items']:,}"
    assert metrics["Classes"] == f"{ref['dataset']['n_classes']:,}"


def test_upload_mode_without_files_asks_for_them():
    at = AppTest.from_file(APP, default_timeout=180).run()
    at.radio[0].set_value("upload").run()
    assert not at.exception
    assert any("Upload" in i.value for i in at.info)
