"""What the pages offer for a paper, walked through AppTest on the demo with splits and
confidences: every LaTeX download compiles in a two-column article with booktabs and fits, no
p-value is shown or downloaded as 0 or with many digits, and figure downloads have the preset's
physical size."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from analysis_core.number_format import is_p_column
from tests.app.conftest import settle, spy_downloads

from ..helpers import P_CELL, compile_two_column, p_cells

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")
PAGES = ["views/overview.py", "views/per_query.py", "views/pr_bands.py", "views/statistics.py",
         "views/histograms.py", "views/class_count.py", "views/ties.py", "views/confidence.py",
         "views/generalization.py"]


@pytest.fixture(scope="module")
def offered():
    """Every download the pages register (name -> bytes, or a callable for figures) and every
    table's displayed text, on the 600-class demo (splits and confidences) at single column."""
    shown = []
    mp = pytest.MonkeyPatch()
    files, deferred = spy_downloads(mp)
    try:
        at = AppTest.from_file(APP, default_timeout=600).run()
        at.radio(key="data_source").set_value("many_classes").run()
        at.radio(key="export_preset").set_value("single").run()
        for page in PAGES:
            settle(at.switch_page(page).run())
            assert not at.exception, (page, [e.value for e in at.exception])
            for d in at.dataframe:
                sty = d.proto.arrow_data.styler
                if sty.display_values:
                    shown.append((page, pa.ipc.open_stream(sty.display_values).read_all().to_pandas()))
    finally:
        mp.undo()
    # table downloads are built on click: build them here
    files.update({n: fn() for n, fn in deferred.items() if n.endswith((".tex", ".csv"))})
    return files, deferred, shown


@pytest.mark.latex
def test_every_latex_download_compiles_in_two_columns_and_fits(offered, tmp_path):
    files, _, _ = offered
    texs = []
    for name, data in files.items():
        if name.endswith(".tex"):
            (tmp_path / name).write_bytes(data)
            texs.append(tmp_path / name)
    assert len(texs) >= 8, sorted(files)
    log = compile_two_column(texs, tmp_path)
    if log.count("Overfull \\hbox"):  # name the file that does not fit
        bad = []
        for t in texs:
            one = tmp_path / f"alone_{t.stem}"
            one.mkdir()
            if compile_two_column([t], one).count("Overfull \\hbox"):
                bad.append(t.name)
        raise AssertionError((bad, re.findall(r"Overfull \\hbox.*", log)))
    for t in texs:
        for c in p_cells(t.read_text()):
            assert P_CELL.match(c), (t.name, c)


def test_no_p_value_is_shown_or_downloaded_as_zero_or_long(offered):
    files, _, shown = offered
    seen = 0
    for page, df in shown:
        for c in df.columns:
            if is_p_column(c):
                for v in df[c]:
                    seen += 1
                    assert v == "< 1e-12" or re.fullmatch(r"[1-9]\.\d\de-\d\d|0\.\d{1,}|1|--", v), (page, c, v)
                    if v.startswith("0."):  # never 0, at most 3 significant digits
                        assert 1 <= len(v[2:].lstrip("0")) <= 3, (page, c, v)
    assert seen >= 5
    for name, data in files.items():
        if name.endswith(".csv"):
            df = pd.read_csv(io.BytesIO(data))
            for c in df.columns:
                if is_p_column(c):
                    assert (df[c].dropna() > 0).all(), (name, c)


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("pdfinfo") is None, reason="poppler-utils missing (make test installs them)")
def test_page_figure_downloads_have_the_single_column_size(offered, tmp_path):
    _, deferred, _ = offered
    pdfs = {n: fn for n, fn in deferred.items() if n.endswith(".pdf")}
    assert len(pdfs) >= 6, sorted(deferred)
    for name, fn in pdfs.items():
        (tmp_path / name).write_bytes(fn())
        out = subprocess.run(["pdfinfo", str(tmp_path / name)], capture_output=True, text=True, check=True).stdout
        w = float(re.search(r"Page size:\s+([\d.]+) x", out).group(1)) / 72
        assert abs(w - 3.5) <= 0.01, (name, w)
