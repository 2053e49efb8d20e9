"""Everything for a paper in one folder: the ``report`` command's work (SPEC section 5).

``DIR/summary.json``, ``DIR/per_query.csv``, ``DIR/tables/<name>.csv`` + ``.tex`` twins, and
``DIR/figures/<name>.<fmt>``. Statistics compare classes (one method) or method x class groups
(several methods), as in Brughi et al.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .evaluation import Evaluation
from .export.figures import FigureStyle, write_figures
from .export.tables import write_per_query, write_table
from .figures.variability import ap_by_class_figure, paired_differences_figure, pr_bands_figure, tukey_figure
from .stats.bands import pr_bands
from .stats.variability import (
    TooManyGroups,
    ap_frame,
    balanced_subsample,
    games_howell,
    mixed_model,
    one_way,
    paired_tests,
    tukey_hsd,
    two_way_anova,
)


@dataclass
class Report:
    """Tables (DataFrames), figures (plotly) and warnings, before anything is written."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def build_report(ev: Evaluation, alpha: float = 0.05, band_kind: str = "t", per_class_n: int | None = None,
                 seed: int = 0) -> Report:
    """Compute every table and figure of the report from an evaluation."""
    rep = Report()
    bands = pr_bands(ev, alpha=alpha, kind=band_kind, seed=seed)
    rep.tables["pr_band"] = bands
    rep.captions["pr_band"] = (f"Precision at each recall level: mean over queries and "
                               f"{100 * (1 - alpha):g}% {'pointwise t' if band_kind == 't' else 'simultaneous'} band.")
    ap = ap_frame(ev)
    if per_class_n:
        ap = balanced_subsample(ap, per_class_n, seed)
        rep.warnings.append(f"statistics use a balanced subsample of {per_class_n} queries per class (seed {seed}).")
    ow = one_way(ap)
    rep.tables["anova"] = ow.tests
    rep.captions["anova"] = "One-way tests of per-query AP over " + (
        "method x class groups." if len(ev.methods) > 1 else "classes.")
    rep.warnings += ow.warnings
    rep.figures["pr_bands"] = pr_bands_figure(bands)
    rep.figures["ap_by_class"] = ap_by_class_figure(ap)
    try:
        tk = tukey_hsd(ap, alpha)
        gh = games_howell(ap, alpha)
    except TooManyGroups as exc:
        rep.warnings.append(f"pairwise comparisons skipped: {exc}")
    else:
        rep.tables["tukey_hsd"] = tk.table
        rep.captions["tukey_hsd"] = f"Tukey HSD pairwise comparisons of mean AP (alpha = {alpha:g})."
        rep.tables["games_howell"] = gh.table
        rep.captions["games_howell"] = f"Games-Howell pairwise comparisons of mean AP (alpha = {alpha:g})."
        rep.figures["tukey_hsd"] = tukey_figure(tk)
    if len(ev.methods) > 1:
        rep.tables["two_way_anova"] = two_way_anova(ap)
        rep.captions["two_way_anova"] = "Two-way ANOVA of per-query AP: method x class (type II)."
        mm = mixed_model(ap)
        rep.tables["mixed_model"] = mm.table
        rep.captions["mixed_model"] = ("Mixed model AP ~ method with a random query intercept (query variance "
                                       f"{mm.query_variance:.4g}, residual {mm.residual_variance:.4g}).")
        rep.warnings += mm.warnings
        pt = paired_tests(ap, alpha=alpha, seed=seed)
        rep.tables["paired_tests"] = pt
        rep.captions["paired_tests"] = "Paired per-query comparisons of methods (Holm-corrected p-values)."
        rep.figures["paired_differences"] = paired_differences_figure(pt)
    else:
        rep.warnings.append("one method: two-way ANOVA, mixed model and paired tests need at least two.")
    return rep


def write_report(ev: Evaluation, rep: Report, out: Path, formats: tuple[str, ...] = ("pdf",),
                 style: FigureStyle | None = None) -> list[Path]:
    """Write the report's files; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.json"]
    summary = ev.summary()
    summary["warnings"] = rep.warnings
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    write_per_query(ev.per_query_columns(), out)
    written += [out / "per_query.csv", out / "per_query.parquet"]
    for name, df in rep.tables.items():
        written += write_table(df, out / "tables", name, rep.captions.get(name))
    if formats:
        written += write_figures(rep.figures, out / "figures", formats, style)
    return written
