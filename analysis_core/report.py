"""Everything for a paper in one folder: the ``report`` command's work (SPEC section 5).

``DIR/summary.json``, ``DIR/per_query.csv``, ``DIR/tables/<name>.csv`` + ``.tex`` twins, and
``DIR/figures/<name>.<fmt>``. Statistics compare classes (one method) or method x class groups
(several methods), as in Brughi et al.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .evaluation import Evaluation
from .export.figures import FigureStyle, write_figures
from .export.paper_tables import paper_latex
from .export.tables import json_text, write_per_query, write_table
from .figures.class_count import (
    erc_figure,
    generalization_figure,
    grouped_recall_by_size_figure,
    histogram_figure,
    sweep_figure,
)
from .figures.variability import ap_by_class_figure, paired_differences_figure, pr_bands_figure, tukey_figure
from .stats.bands import pr_bands
from .stats.class_count import class_count_sweep, error_reject_curve, grouped_recall, split_generalization
from .stats.histograms import histogram_table
from .stats.variability import (
    TooManyGroups,
    ap_frame,
    balanced_subsample,
    class_summary,
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
    latex: dict[str, str] = field(default_factory=dict)  # LaTeX-only tables: <name>.tex


def build_report(ev: Evaluation, alpha: float = 0.05, band_kind: str = "t", per_class_n: int | None = None,
                 seed: int = 0, group_size: int = 10, sweep_repeats: int = 3) -> Report:
    """Compute every table and figure of the report from an evaluation."""
    rep = Report()
    _variability(rep, ev, alpha, band_kind, per_class_n, seed)
    _class_count(rep, ev, alpha, seed, group_size, sweep_repeats)
    _paper_tables(rep, ev, alpha)
    return rep


def _paper_tables(rep: Report, ev: Evaluation, alpha: float) -> None:
    """The main results table (methods x headline metrics, per split when the data have splits)
    in a double-column and a single-column variant; mAP marked by the paired AP tests."""
    from .export.paper_tables import ap_paired_hook, summary_frame, summary_latex

    evals = {"all": ev}
    if ev.dataset.split is not None and ev.split is None:
        from .evaluation import evaluate

        for sp in sorted(set(ev.dataset.split[ev.rows].tolist())):
            evals[sp] = evaluate(ev.dataset, similarity=ev.similarity, ks=ev.ks, split=sp, alpha=alpha)
    frame = summary_frame(evals, alpha)
    rep.tables["summary"] = frame
    rep.captions["summary"] = "Main results: headline metrics per method (and split) with interval half-widths."
    hook = ap_paired_hook(rep.tables.get("paired_tests"), alpha)
    rep.latex["summary"] = summary_latex(frame, alpha, hook)
    rep.latex["summary_column"] = summary_latex(frame, alpha, hook, single_column=True)


def _variability(rep: Report, ev: Evaluation, alpha: float, band_kind: str, per_class_n: int | None,
                 seed: int) -> None:
    bands = pr_bands(ev, alpha=alpha, kind=band_kind, seed=seed)
    rep.tables["pr_band"] = bands
    rep.captions["pr_band"] = (f"Precision at each recall level: mean over queries and "
                               f"{100 * (1 - alpha):g}% {'pointwise t' if band_kind == 't' else 'simultaneous'} band.")
    ap = ap_frame(ev)
    if per_class_n:
        ap = balanced_subsample(ap, per_class_n, seed)
        rep.warnings.append(f"statistics use a balanced subsample of {per_class_n} queries per class (seed {seed}).")
    rep.tables["classes"] = class_summary(ap, ev.class_query_counts() if ev.query_sample is not None else None)
    rep.captions["classes"] = "Per-class AP: queries that contributed, mean, sd and minimum, lowest mean first." + (
        " Query sample: of_queries = the class's queries sampled from." if ev.query_sample is not None else "")
    if ev.query_sample is not None:
        qs = ev.query_sample
        rep.warnings.append(f"query sample: {qs.n} of {qs.N} queries (seed {qs.seed}); statistics are over the "
                            "sampled queries and summary.json gives every mean with an interval.")
    ow = one_way(ap)
    rep.tables["anova"] = ow.tests
    rep.captions["anova"] = "One-way tests of per-query AP over " + (
        "method x class groups." if len(ev.methods) > 1 else "classes.")
    rep.warnings += ow.warnings
    rep.figures["pr_bands"] = pr_bands_figure(bands, kind=band_kind)
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


def _class_count(rep: Report, ev: Evaluation, alpha: float, seed: int, group_size: int, sweep_repeats: int) -> None:
    ds = ev.dataset
    sub = ds.subset(ev.rows) if ev.rows.size != ds.n_items else ds
    codes = sub.label_codes
    n_classes = int(np.unique(codes).size)
    candidates = (2, 5, 10, 20, 50, 100, group_size)
    sizes = sorted({s for s in candidates if s <= n_classes // 2} | {min(group_size, n_classes)})
    rows, by_size = [], []
    for m in ev.methods:
        for S in sizes:
            gr = grouped_recall(sub.embeddings[m], codes, group_size=S, ks=ev.ks, similarity=ev.similarity,
                                seed=seed, alpha=alpha)
            t = gr.table.assign(method=m, group_size=S, n_dropped_classes=gr.n_dropped_classes)
            rows.append(t)
            by_size.append(t[t["k"] == 1])
    grouped = pd.concat(rows, ignore_index=True)
    cols = ["method", "group_size", "k", "mean", "sd", "ci_low", "ci_high", "n_groups", "n_dropped_classes"]
    rep.tables["grouped_recall"] = grouped[cols]
    rep.captions["grouped_recall"] = (f"Grouped Recall@K: classes split at random (seed {seed}) into groups of S; "
                                      f"mean over groups with {100 * (1 - alpha):g}% CLT interval.")
    rep.figures["grouped_recall_by_size"] = grouped_recall_by_size_figure(pd.concat(by_size, ignore_index=True))
    if grouped["n_groups"].min() < 2:
        rep.warnings.append("some group sizes leave fewer than two groups: their intervals are undefined.")

    sweeps = [class_count_sweep(sub.embeddings[m], codes, repeats=sweep_repeats, seed=seed, group_size=min(
        group_size, max(2, n_classes // 2)), similarity=ev.similarity).assign(method=m) for m in ev.methods]
    sweep = pd.concat(sweeps, ignore_index=True)
    rep.tables["class_sweep"] = sweep[["method"] + [c for c in sweep.columns if c != "method"]]
    rep.captions["class_sweep"] = (f"Metrics on C classes sampled at random ({sweep_repeats} repeats, seed {seed}).")
    rep.figures["class_sweep"] = sweep_figure(sweeps[0], title=f"Metrics against the number of classes "
                                                               f"({ev.methods[0]})")

    split_evals = {}
    if ds.split is not None and ev.split is None:
        from .evaluation import evaluate

        for sp in sorted(set(ds.split[ev.rows].tolist())):
            split_evals[sp] = evaluate(ds, similarity=ev.similarity, ks=ev.ks, split=sp, group_size=min(
                group_size, max(2, n_classes // 4)), seed=seed, alpha=alpha)
    hist = histogram_table(ev, split_evals)
    rep.tables["histograms"] = hist
    rep.captions["histograms"] = "Exact positive- and negative-pair similarity histograms (count and density)."
    for m in ev.methods:
        part = hist[(hist["method"] == m) & (hist["split"] == "all")]
        jsd = ev.method_summary(m)["jsd"]
        rep.figures[f"histograms_{m}"] = histogram_figure(part, title=f"{m}: pair similarities (JSD = {jsd:.3f})")

    if split_evals:
        ref = "train" if "train" in split_evals else sorted(split_evals)[0]
        gens = [split_generalization(split_evals, m, ref, alpha).assign(method=m) for m in ev.methods]
        gen = pd.concat(gens, ignore_index=True)
        rep.tables["generalization"] = gen[["method"] + [c for c in gen.columns if c != "method"]]
        rep.captions["generalization"] = f"Metrics per split and the gap {ref} minus each other split."
        rep.figures["generalization"] = generalization_figure(gens[0], sorted(split_evals),
                                                              title=f"Metrics per split ({ev.methods[0]})")

    if ds.confidence is not None:
        curves, rows = {}, []
        for m in ev.methods:
            pq = ev.per_query(m)
            pq = pq[pq["n_positives"] > 0]
            erc = error_reject_curve(pq["confidence"].to_numpy(), pq["ap"].to_numpy(), pq["precision_at_1"].to_numpy())
            curves[m] = erc.curve
            rows.append(erc.curve.assign(method=m, auc=erc.auc, oracle_auc=erc.oracle_auc, spearman=erc.spearman,
                                         spearman_p=erc.spearman_p))
        erc_t = pd.concat(rows, ignore_index=True)
        rep.tables["erc"] = erc_t[["method"] + [c for c in erc_t.columns if c != "method"]]
        rep.captions["erc"] = "Error (1 - P@1) of the kept queries after rejecting the least confident fraction."
        rep.figures["erc"] = erc_figure(curves)


def write_report(ev: Evaluation, rep: Report, out: Path, formats: tuple[str, ...] = ("pdf",),
                 style: FigureStyle | None = None) -> list[Path]:
    """Write the report's files; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.json"]
    summary = ev.summary()
    summary["warnings"] = rep.warnings
    (out / "summary.json").write_text(json_text(summary))
    write_per_query(ev.per_query_columns(), out)
    written += [out / "per_query.csv", out / "per_query.parquet"]
    for name, df in rep.tables.items():
        written += write_table(df, out / "tables", name, rep.captions.get(name),
                               tex=rep.latex.get(name) or paper_latex(name, df, rep.captions.get(name)))
    for name, tex in rep.latex.items():
        if name not in rep.tables:
            (out / "tables" / f"{name}.tex").write_text(tex)
            written.append(out / "tables" / f"{name}.tex")
    if formats:
        written += write_figures(rep.figures, out / "figures", formats, style)
    return written
