"""Paper exports: every figure of `report` at the preset's physical size (pdfinfo, pdffonts, the
SVG's root size, the PNG's pixels), on a small 3-method, 10-class data set with splits and
confidences."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from analysis_core import evaluate, load_files
from analysis_core.export.figures import INSTALL_COMMAND, FigureStyle, chromium_path
from analysis_core.report import build_report, write_report

from .test_cli import ROOT, run_cli

METHODS = ["baseline", "contrastive", "triplet_margin"]
FIGURES = {"pr_bands", "ap_by_class", "tukey_hsd", "paired_differences", "grouped_recall_by_size", "class_sweep",
           "generalization", "erc"} | {f"histograms_{m}" for m in METHODS}
HAVE_TOOLS = chromium_path() is not None and shutil.which("pdfinfo") and shutil.which("pdffonts")
needs_tools = pytest.mark.skipif(not HAVE_TOOLS, reason="Chromium or poppler-utils missing (make test installs them)")


def small_dataset(path: Path) -> Path:
    """3 methods of increasing quality, 10 classes of 12 items, a train/test split by class, and
    confidences."""
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(10), 12)
    centres = rng.standard_normal((10, 8))
    emb = {f"embeddings_{m}": (centres[labels] * (0.6 + 0.4 * i) + rng.standard_normal((labels.size, 8)))
           .astype(np.float32) for i, m in enumerate(METHODS)}
    np.savez(path, labels=labels, split=np.where(labels < 6, "train", "test"), confidence=rng.random(labels.size),
             **emb)
    return path


@pytest.fixture(scope="module")
def small_npz(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("data") / "small.npz")


@pytest.fixture(scope="module")
def built(small_npz):
    ev = evaluate(load_files([small_npz]))
    return ev, build_report(ev, sweep_repeats=1)


def _pdf_size_in(path: Path) -> tuple[float, float]:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    w, h = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", out).groups()
    return float(w) / 72, float(h) / 72


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def check_figures(folder: Path, style: FigureStyle, names: set[str] = FIGURES) -> None:
    """Every figure in ``folder`` at ``style``'s size in all three formats, fonts embedded."""
    assert {p.stem for p in folder.glob("*.pdf")} == names
    for name in names:
        w, h = _pdf_size_in(folder / f"{name}.pdf")
        assert abs(w - style.width_in) <= 0.01, (name, w)
        assert 0.2 * style.width_in < h < 4 * style.width_in, (name, h)
        fonts = subprocess.run(["pdffonts", str(folder / f"{name}.pdf")], capture_output=True, text=True,
                               check=True).stdout.splitlines()[2:]
        assert fonts and all(re.search(r"\byes\s+(yes|no)\s+(yes|no)\s+\d+\s+\d+\s*$", f) for f in fonts), fonts
        svg = (folder / f"{name}.svg").read_text()
        root = svg[svg.index("<svg"):svg.index(">", svg.index("<svg"))]
        assert abs(float(re.search(r'\bwidth="([\d.]+)in"', root).group(1)) - style.width_in) <= 0.01
        assert abs(float(re.search(r'\bheight="([\d.]+)in"', root).group(1)) - h) <= 0.01
        # every text at the set size or larger (titles): CSS px = pt * 96 / 72
        sizes = [float(s) for s in re.findall(r"font-size: ?([\d.]+)px", svg)]
        assert sizes and min(sizes) == pytest.approx(style.font_size * 96 / 72, abs=0.01), (name, min(sizes))
        pw, ph = _png_size(folder / f"{name}.png")
        assert pw == round(style.width_in * style.dpi), (name, pw)
        assert abs(ph - h * style.dpi) <= 3, (name, ph, h)  # pdfinfo rounds to 0.01 pt


@needs_tools
def test_report_cli_figures_have_the_custom_width_and_dpi(small_npz, tmp_path):
    out = tmp_path / "rep"
    r = run_cli("report", small_npz, "--out", out, "--format", "pdf,svg,png", "--style", "custom", "--width", "5",
                "--dpi", "200", "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    check_figures(out / "figures", FigureStyle.preset("custom", width_in=5.0, dpi=200))


@needs_tools
@pytest.mark.parametrize("preset", ["single", "double"])
def test_report_figures_have_the_presets_physical_size(built, preset, tmp_path):
    ev, rep = built
    style = FigureStyle.preset(preset)
    assert style.width_in == {"single": 3.5, "double": 7.2}[preset]
    write_report(ev, rep, tmp_path, ("pdf", "svg", "png"), style)
    check_figures(tmp_path / "figures", style)


def test_custom_style_needs_its_width_and_bad_sizes_are_refused(small_npz, tmp_path):
    r = run_cli("report", small_npz, "--out", tmp_path / "x", "--style", "custom")
    assert r.returncode == 2 and "--width" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("report", small_npz, "--out", tmp_path / "x", "--style", "custom", "--width", "0.2")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_report_without_chromium_exits_2_with_the_install_command_before_computing(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))  # kaleido's own override
    assert chromium_path() is None
    out = tmp_path / "rep"
    t = time.perf_counter()
    # the 600-class demo takes minutes to report on: an exit within 10 s means nothing was computed
    r = run_cli("report", ROOT / "demo_data" / "many_classes.npz", "--out", out, "--format", "pdf", "--quiet")
    assert time.perf_counter() - t < 10
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert INSTALL_COMMAND in r.stderr and "Chromium" in r.stderr
    assert not out.exists()
    # without figures, no Chromium is needed
    r = run_cli("report", small_dataset(tmp_path / "s.npz"), "--out", out, "--format", "", "--quiet",
                "--sweep-repeats", "1")
    assert r.returncode == 0, r.stderr
