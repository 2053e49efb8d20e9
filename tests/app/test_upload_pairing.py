"""The dashboard reads ``X.npy`` + ``X_labels.npy`` given together as one method with those labels,
says in the sidebar which labels file it paired, and shows an ambiguous set as a message."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from analysis_core import evaluate
from analysis_core_dashboard import state
from tests.core.test_label_pairing import EMB_X, EMB_Z, LAB_NPY, LAB_TXT, X, Y

APP = str(Path(__file__).resolve().parents[2] / "analysis_core_dashboard" / "app.py")


def _open(name: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300).run()
    at.radio(key=state.SOURCE).set_value(name).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_npy_and_its_labels_file_evaluate_and_the_pairing_is_shown(offered_files):
    offered_files("pair", [("X_labels.npy", LAB_NPY), ("X.npy", EMB_X)])
    at = _open("pair")
    assert not at.error, [e.value for e in at.error]
    assert any("labels of X.npy: X_labels.npy (paired by name)" in c.value for c in at.sidebar.caption)
    assert any(c.value.startswith("Source: ` X.npy ` ·") for c in at.caption)  # the labels file is no method
    summary = at.dataframe[0].value
    assert list(summary.index) == ["X"]
    ref = next(iter(evaluate(X, Y).summary()["methods"].values()))["map"]["expected"]
    assert summary.loc["X", "mAP"] == pytest.approx(ref, abs=1e-12)


def test_two_npy_files_and_one_unnamed_labels_file_are_a_message(offered_files):
    offered_files("ambiguous", [("a.npy", EMB_X), ("b.npy", EMB_Z), ("y.txt", LAB_TXT)])
    at = _open("ambiguous")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "could be the labels of a.npy or b.npy" in errors[0], errors
    assert "This input can't be used." in errors[0]


def test_two_pairs_by_name_load_as_two_methods(offered_files):
    offered_files("pairs", [("b_labels.npy", LAB_NPY), ("a.npy", EMB_X), ("b.npy", EMB_Z), ("labels_a.txt", LAB_TXT)])
    at = _open("pairs")
    assert not at.error, [e.value for e in at.error]
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "labels of a.npy: labels_a.txt" in captions and "labels of b.npy: b_labels.npy" in captions
    assert list(at.dataframe[0].value.index) == ["a", "b"]
