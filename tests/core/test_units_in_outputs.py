"""Every test and interval table of a report names its unit of inference and how many units it
rests on (CSV columns, LaTeX captions or columns, summary.json's inference blocks), and a split
with too few classes to decide says so."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from ..helpers import ROOT, run_cli

# columns that make a table a test or an interval table
INFERENCE_COLUMNS = ("p_value", "p_adj", "p_holm", "ci_low", "ci_high", "low", "high", "lower", "upper", "spearman_p")


@pytest.fixture(scope="module")
def digits_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("units") / "rep"
    r = run_cli("report", ROOT / "demo_data" / "digits.npz", "--out", out, "--format", "", "--by-split",
                "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
def test_every_csv_table_with_a_test_or_interval_has_unit_and_n_units(digits_report):
    checked = 0
    for path in sorted((digits_report / "tables").glob("*.csv")):
        df = pd.read_csv(path)
        inference = [c for c in df.columns if c in INFERENCE_COLUMNS or c.endswith(("_ci_low", "_half_width"))]
        if not inference:
            continue
        checked += 1
        assert {"unit", "n_units"} <= set(df.columns), (path.name, list(df.columns))
        rows = df[df[inference].notna().any(axis=1)]  # rows that carry an interval or a test
        assert rows["unit"].notna().all() and (rows["unit"].astype(str) != "").all(), path.name
        assert (pd.to_numeric(rows["n_units"], errors="coerce") > 0).all(), path.name
    assert checked >= 8


@pytest.mark.slow
def test_every_latex_table_of_a_test_or_interval_names_its_unit(digits_report):
    for path in sorted((digits_report / "tables").glob("*.csv")):
        df = pd.read_csv(path)
        if "unit" not in df.columns:
            continue
        tex = (digits_report / "tables" / f"{path.stem}.tex").read_text()
        units = {str(u) for u in df["unit"].dropna() if str(u)}
        assert any(u in tex for u in units) or "classes" in tex, path.name


@pytest.mark.slow
def test_summary_json_has_the_unit_of_every_interval_for_the_data_and_each_split(digits_report):
    s = json.loads((digits_report / "summary.json").read_text())
    blocks = [s["inference"]] + [s["splits"][sp]["inference"] for sp in ("train", "test")]
    for b in blocks:
        assert b["unit"] == "class" and b["n_units"] == 10
        assert "new classes" in b["generalises_to"] or "new items" in b["generalises_to"]
        for intervals in b["intervals"].values():
            for iv in intervals.values():
                assert iv["low"] <= iv["high"]


@pytest.mark.slow
def test_a_report_on_a_three_class_split_says_class_level_tests_cannot_reach_alpha(tmp_path):
    out = tmp_path / "rep"
    r = run_cli("report", ROOT / "demo_data" / "training.npz", "--split", "test_unseen", "--out", out, "--format", "",
                "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["inference"]["n_units"] == 3
    assert any("class-level tests cannot reach α" in w for w in s["warnings"])
    paired = pd.read_csv(out / "tables" / "paired_tests.csv")
    assert (paired["p_value"].isna() | (paired["p_value"] == 1)).all() and not paired["reject"].any()
    assert paired["note"].str.contains("too few to decide").any()


@pytest.mark.slow
def test_asymmetric_intervals_are_printed_as_their_bounds_and_every_interval_in_range(digits_report):
    """The main table's intervals (summary.csv, summary.tex, summary.json): within [0, 1]; an
    asymmetric one (Korn-Graubard for the hit rates at the class unit, or one clipped at 0 or 1) is
    printed as its bounds (stacked) and never as ± a half-width; summary.json gives the CSV's bounds."""
    import re

    from analysis_core.export.latex_cells import symmetric

    df = pd.read_csv(digits_report / "tables" / "summary.csv")
    metrics = [c[: -len("_ci_low")] for c in df.columns if c.endswith("_ci_low")]
    asymmetric = 0
    for m in metrics:
        lo, hi, v = df[f"{m}_ci_low"], df[f"{m}_ci_high"], df[m]
        ok = lo.notna()
        assert ((0 <= lo[ok]) & (lo[ok] <= v[ok]) & (v[ok] <= hi[ok]) & (hi[ok] <= 1)).all(), m
        asymmetric += sum(not symmetric(a, b, c) for a, b, c in zip(v[ok], lo[ok], hi[ok], strict=True))
    assert asymmetric > 0  # the hit rates' Korn-Graubard intervals at the class unit
    tex = (digits_report / "tables" / "summary.tex").read_text()
    bounds = re.findall(r"\{\\scriptsize\$\^\{(-?[0-9.]+)\}_\{(-?[0-9.]+)\}\$\}", tex)  # upper, lower
    assert len(bounds) == asymmetric
    assert all(0 <= float(lo) <= float(hi) <= 1 for hi, lo in bounds)
    for v, h in re.findall(r"([0-9.]+)\}?(?:\$\^\\dagger\$)?\{\\scriptsize\$\\pm\$([0-9.]+)\}", tex):
        assert float(v) - float(h) >= -5e-4 and float(v) + float(h) <= 1 + 5e-4, (v, h)
    s = json.loads((digits_report / "summary.json").read_text())
    part = df[df["split"] == "all"].set_index("method")
    for method, intervals in s["inference"]["intervals"].items():
        for m, iv in intervals.items():
            assert (iv["low"], iv["high"]) == pytest.approx((part.loc[method, f"{m}_ci_low"],
                                                             part.loc[method, f"{m}_ci_high"]), rel=1e-9)
