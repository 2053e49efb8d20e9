"""The dashboard's CSV downloads are safe to open in a spreadsheet: on data whose labels and
method names look like formulas, no cell of any CSV the Overview and Per query pages offer begins
with ``= + - @``, a tab or a carriage return (OWASP, "CSV Injection")."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core_dashboard import state
from tests.app.conftest import spy_downloads
from tests.core.test_spreadsheet_safe import LABELS, METHODS, _formula_cells

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")


def _formulas_npz() -> bytes:
    rng = np.random.default_rng(8)
    codes = np.repeat(np.arange(len(LABELS)), 6)
    centres = rng.standard_normal((len(LABELS), 4))
    arrays = {f"embeddings_{m}": (centres[codes] * s + rng.standard_normal((codes.size, 4))).astype(np.float32)
              for m, s in zip(METHODS, (1.0, 0.5, 2.0), strict=True)}
    buf = io.BytesIO()
    np.savez(buf, labels=np.array(LABELS)[codes], **arrays)
    return buf.getvalue()


@pytest.fixture()
def csv_downloads(monkeypatch, offered_files):
    """Every CSV the Overview and Per query pages offer on the formula data (name -> text)."""
    files, deferred = spy_downloads(monkeypatch)
    offered_files("formulas", [("formulas.npz", _formulas_npz())])
    at = AppTest.from_file(APP, default_timeout=300).run()
    files.clear()  # the default demo's
    deferred.clear()
    at.radio(key=state.SOURCE).set_value("formulas").run()
    for page in ("views/overview.py", "views/per_query.py"):
        at.switch_page(page).run()
        assert not at.exception, [e.value for e in at.exception]
    files.update({n: fn() for n, fn in deferred.items() if n.endswith(".csv")})
    return {n: (d if isinstance(d, bytes) else d.encode()).decode("utf-8") for n, d in files.items()
            if n.endswith(".csv")}


def test_no_csv_download_has_a_formula_cell(csv_downloads):
    # the per-query table of the first method in natural order
    assert {"summary.csv", "per_query_-m.csv", "classes_by_mean_ap.csv"} <= set(csv_downloads), sorted(csv_downloads)
    for name, text in csv_downloads.items():
        rows = list(csv.reader(io.StringIO(text, newline="")))
        assert not _formula_cells(rows), (name, _formula_cells(rows)[:5])
    per_query = list(csv.reader(io.StringIO(csv_downloads["per_query_-m.csv"], newline="")))
    labels = {r[per_query[0].index("label")] for r in per_query[1:]}
    assert labels == {"'" + v for v in LABELS}
    summary = list(csv.reader(io.StringIO(csv_downloads["summary.csv"], newline="")))
    assert sorted(r[0] for r in summary[1:]) == sorted("'" + m for m in METHODS)


def test_the_dashboard_writes_csv_only_through_csv_text():
    """No page formats a CSV by itself (pandas' ``to_csv`` would skip the neutralisation)."""
    sources = {p: p.read_text() for p in (ROOT / "analysis_core_dashboard").rglob("*.py")}
    assert not [p for p, s in sources.items() if re.search(r"\.to_csv\(|csv\.writer", s)]
    assert any("csv_text(" in s for s in sources.values())
