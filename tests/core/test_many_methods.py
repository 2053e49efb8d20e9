"""36 methods (630 pairs): the main LaTeX table keeps every row (it continues in further floats
rather than stopping at "First 20 of 36 rows"), and a real difference — one method whose items
carry a sixth of the others' noise — reaches significance after Holm over all 630 pairs at both
units (the query unit's permutations are enough for Holm by default), while equally good methods
stay within Holm's family-wise error."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from analysis_core import evaluate
from analysis_core.report import build_report
from analysis_core.stats.permutation import default_permutations
from tests.helpers import compile_two_column


@pytest.fixture(scope="module")
def many():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(24), 6)
    split = np.where(y < 12, "a", "b")
    base = rng.normal(size=(144, 8)) * 0.6 + 1.5 * rng.normal(size=(24, 8))[y]
    X = {f"m{i:02d}": base + rng.normal(0, 1.0, base.shape) for i in range(35)}
    X["shifted"] = base + rng.normal(0, 0.15, base.shape)  # the stated shift: far less noise
    return evaluate(X, y, split=split)


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["class", "query"])
def test_a_real_difference_survives_holm_over_630_pairs_and_null_pairs_stay_within_it(many, unit):
    rep = build_report(many, sweep_repeats=1, unit=unit)
    pt = rep.tables["paired_tests"]
    ap = pt[pt["metric"] == "map"]
    assert len(ap) == 630 and {"split", "metric", "unit", "n_units"} <= set(pt.columns)
    p = "p_holm" if unit == "class" else "p_permutation_holm"
    shifted = ap[(ap["method_a"] == "shifted") | (ap["method_b"] == "shifted")]
    assert len(shifted) == 35 and (shifted[p] < 0.05).all()
    null = ap[(ap["method_a"] != "shifted") & (ap["method_b"] != "shifted")]
    if unit == "class":  # Holm holds the family-wise error of these 595 equal pairs at the class unit
        assert (null[p] < 0.05).mean() <= 0.05
    assert default_permutations(630, 0.05) > 630 / 0.05


@pytest.mark.slow
def test_the_main_table_keeps_all_108_rows_and_compiles(many, tmp_path):
    rep = build_report(many, sweep_repeats=1)
    tex = rep.latex["summary"]
    assert "First" not in tex and tex.count(r"\begin{table") >= 3 and tex.count(r"\label{tab:summary}") == 1
    rows = [line for line in tex.splitlines() if line.endswith(r"\\") and not line.startswith("split")]
    assert len(rows) == 108  # 36 methods x (all items, split a, split b)
    for m in [f"m{i:02d}" for i in range(35)] + ["shifted"]:
        assert sum(f" {m} " in f" {r.replace('&', ' ')} " for r in rows) == 3
    if shutil.which("pdflatex"):
        (tmp_path / "summary.tex").write_text(tex)
        log = compile_two_column([tmp_path / "summary.tex"], tmp_path)
        assert "Float too large" not in log and log.count("Overfull \\hbox") == 0
