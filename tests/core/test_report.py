"""`report` writes every table (CSV + LaTeX that compiles) and every figure."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from ..helpers import run_cli

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["pr_band", "anova", "tukey_hsd", "games_howell", "two_way_anova", "mixed_model", "paired_tests"]
FIGURES = ["pr_bands", "ap_by_class", "tukey_hsd", "paired_differences"]


HAVE_CHROMIUM = Path("/usr/bin/chromium").exists()  # kaleido renders figures with it


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    fmts = "pdf,svg,png" if HAVE_CHROMIUM else ""
    r = run_cli("report", ROOT / "demo_data" / "digits.npz", "--out", out, "--format", fmts, "--quiet")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
@pytest.mark.browser
def test_report_writes_every_table_and_figure(report_dir):
    assert json.loads((report_dir / "summary.json").read_text())["methods"]
    assert (report_dir / "per_query.csv").exists()
    for t in TABLES:
        assert (report_dir / "tables" / f"{t}.csv").stat().st_size > 0
        assert (report_dir / "tables" / f"{t}.tex").stat().st_size > 0
    band = pd.read_csv(report_dir / "tables" / "pr_band.csv")
    assert list(band.columns[:3]) == ["method", "split", "class"]
    assert {"recall", "mean", "low", "high", "n"} <= set(band.columns)
    assert set(band["class"]) >= {"all", "0", "9"}
    tukey = pd.read_csv(report_dir / "tables" / "tukey_hsd.csv")
    # digits has splits: every table names the split it holds (issue 10); undefined rows say why (issue 12)
    assert list(tukey.columns) == ["split", "group1", "group2", "meandiff", "p_adj", "lower", "upper", "reject",
                                   "note", "unit", "n_units"]
    for f in FIGURES:
        pdf = (report_dir / "figures" / f"{f}.pdf").read_bytes()
        assert pdf.startswith(b"%PDF")
        assert b"/Font" in pdf  # real text, not a raster
        assert (report_dir / "figures" / f"{f}.svg").read_text().lstrip().startswith(("<svg", "<?xml"))
        assert (report_dir / "figures" / f"{f}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_latex_tables_are_booktabs_and_compile(report_dir, tmp_path):
    body = []
    for t in TABLES:
        tex = (report_dir / "tables" / f"{t}.tex").read_text()
        assert tex.count(r"\toprule") == tex.count(r"\midrule") == tex.count(r"\bottomrule") == 1
        assert tex.count(r"\begin{tabular}") == tex.count(r"\end{tabular}") == 1
        header = tex.split(r"\toprule")[1].split(r"\midrule")[0]
        spec = tex.split(r"\begin{tabular}{")[1].split("\n")[0][:-1]  # "lp{110pt}rr"
        n_cols = len(re.findall(r"p\{[^}]*\}|[lrc]", spec))
        assert header.count("&") == n_cols - 1
        for line in tex.split(r"\midrule")[1].split(r"\bottomrule")[0].strip().splitlines():
            assert line.count(" & ") == n_cols - 1 and line.endswith(r"\\")
        body.append(rf"\input{{{report_dir / 'tables' / t}}}")
    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed (make test installs texlive when root); structure checked above")
    doc = tmp_path / "doc.tex"
    doc.write_text("\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + "\n".join(body)
                   + "\n\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stdout[-3000:]
    assert (tmp_path / "doc.pdf").read_bytes().startswith(b"%PDF")


def test_report_rejects_bad_options(tmp_path):
    p = ROOT / "demo_data" / "digits.npz"
    for args in (["--format", "gif"], ["--alpha", "1.5"]):
        r = run_cli("report", p, "--out", tmp_path / "x", *args)
        assert r.returncode == 2 and "Traceback" not in r.stderr


def test_report_at_another_alpha_than_the_evaluation_gives_that_levels_query_sample_intervals(tmp_path):
    """The level belongs to the accessor: an evaluation made at 0.05 with a query sample, reported
    at 0.01, prints the 99 % intervals — the numbers an evaluation made at 0.01 gives directly."""
    from analysis_core import evaluate, load_files
    from analysis_core.report import build_report, write_report

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    at05 = evaluate(ds, query_sample=400, seed=2, alpha=0.05)
    direct = evaluate(ds, query_sample=400, seed=2, alpha=0.01).summary()["methods"]
    rep = build_report(at05, alpha=0.01, sweep_repeats=1)
    main = rep.tables["summary"].set_index(["split", "method"])
    for m, v in direct.items():
        iv = v["intervals"]["map"]
        assert main.loc[("all", m), "map_ci_low"] == pytest.approx(max(iv["low"], 0.0), rel=1e-12)
        assert main.loc[("all", m), "map_ci_high"] == pytest.approx(min(iv["high"], 1.0), rel=1e-12)
        assert main.loc[("all", m), "unit"] == "query"
    write_report(at05, rep, tmp_path / "rep", formats=())
    written = json.loads((tmp_path / "rep" / "summary.json").read_text())["methods"]
    for m, v in direct.items():
        numbers = {k: x for k, x in v["intervals"]["map"].items() if isinstance(x, float)}
        assert {k: written[m]["intervals"]["map"][k] for k in numbers} == pytest.approx(numbers, rel=1e-12)
        assert written[m]["intervals"]["map"]["confidence"] == pytest.approx(0.99)
    assert at05.summary()["methods"][m]["intervals"]["map"]["confidence"] == pytest.approx(0.95)  # unchanged
