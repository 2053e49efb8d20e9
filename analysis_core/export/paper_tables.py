"""The report's LaTeX tables for a paper: compact versions of the long and wide tables (their
CSV twins keep every row and column) and the class x method table; the main results table is in
:mod:`.main_table`.

Every table fits a two-column page (:func:`~analysis_core.export.tables.to_latex` picks
``table`` or ``table*``); numbers are printed as everywhere (:mod:`number_format`).
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..figures.class_sweep import SWEEP_METRICS
from ..metrics.registry import label as metric_label
from ..number_format import format_value
from .latex_cells import RUN_METRICS, interval_cell, interval_suffix, run_metric_rows, wide_by_metric
from .main_table import (
    runs_latex,
    summary_frame,  # noqa: F401  (re-exported: the dashboard's Overview imports it here)
)
from .tables import to_latex

TOP_PAIRS = 20  # significant pairs shown in the compact post-hoc tables
N_CLASSES = 5  # hardest and easiest classes in classes.tex
HEADERS = {"method_a": "a", "method_b": "b", "mean_diff": "mean diff.", "p_permutation_holm": "p perm. (Holm)",
           "p_wilcoxon_holm": "p Wilcoxon (Holm)", "n_classes": "C", "group_size": "S", "n_groups": "groups",
           "meandiff": "diff.", "p_adj": "p (adj.)", "spearman": "Spearman", "spearman_p": "p",
           "oracle_auc": "oracle AUC", "auc": "AUC", "n_pairs": "pairs", "mean_sim": "mean sim.", "sd_sim": "sd",
           "group1": "group 1", "group2": "group 2", "reject": "sig.", "mean": "mean", "p_value": "p",
           "p_holm": "p (Holm)"}


def _posthoc(df: pd.DataFrame, caption: str, label: str) -> str:
    sig = df[df["reject"].astype(bool)].assign(size=lambda d: d["meandiff"].abs())
    top = sig.sort_values("size", ascending=False).head(TOP_PAIRS)
    note = (f"{len(sig)} of {len(df)} pairs differ significantly; the {len(top)} largest differences are shown, "
            "every pair is in the CSV file.")
    cols = ["group1", "group2", "meandiff", "lower", "upper", "p_adj"]
    return to_latex(label=label, df=top[cols], caption=caption, headers=HEADERS, note=note, max_rows=0)


def _pr_band(df: pd.DataFrame, caption: str, label: str) -> str:
    b = df
    if "split" in b.columns:
        b = b[b["split"] == "all"]
    b = b[b["class"] == "all"]
    wide = pd.DataFrame({"recall": sorted(b["recall"].unique())})
    for m, part in b.groupby("method", sort=False):
        part = part.set_index("recall").reindex(wide["recall"])
        wide[m] = [format_value(v) + interval_suffix(v, lo, hi, r"\scriptsize") for v, lo, hi in
                   zip(part["mean"], part["low"], part["high"], strict=True)]
    return to_latex(wide, caption=caption + " All queries; per class in the CSV file.", label=label, headers=HEADERS,
                    raw=tuple(wide.columns[1:]))


def _erc(df: pd.DataFrame, caption: str, label: str) -> str:
    s = df.groupby("method", sort=False)[["auc", "oracle_auc", "spearman", "spearman_p"]].first().reset_index()
    cap = ("Error-vs-reject: area under the curve, its oracle, and the Spearman correlation of confidence with AP "
           "(the curves are in the CSV file).")
    return to_latex(s, caption=cap, label=label, headers=HEADERS)


def _histograms(df: pd.DataFrame, caption: str, label: str) -> str:
    centre = 0.5 * (df["bin_left"] + df["bin_right"])
    d = df.assign(_c=centre, _cc=centre * df["count"], _c2=centre ** 2 * df["count"])
    g = d.groupby(["method", "split", "kind"], sort=False)
    s = g.agg(n_pairs=("count", "sum"), _s=("_cc", "sum"), _s2=("_c2", "sum")).reset_index()
    s["mean_sim"] = s["_s"] / s["n_pairs"]
    s["sd_sim"] = np.sqrt(np.maximum(s["_s2"] / s["n_pairs"] - s["mean_sim"] ** 2, 0))
    s = s[["method", "split", "kind", "n_pairs", "mean_sim", "sd_sim"]]
    cap = ("Positive and negative pair similarities: pairs, mean and sd from the binned histograms (the bins are in "
           "the CSV file).")
    return to_latex(s, caption=cap, label=label, headers=HEADERS)


def _class_sweep(df: pd.DataFrame, caption: str, label: str) -> str:
    metrics = [m for m in SWEEP_METRICS if m in df.columns]
    s = df.groupby(["method", "n_classes"], sort=False)[metrics].mean().reset_index()
    return to_latex(label=label, df=s, caption=caption + " Mean over repeats.", headers=HEADERS)


def _generalization(df: pd.DataFrame, caption: str, label: str) -> str:
    gap = [c for c in df.columns if c.startswith("gap_") and not c.endswith(("_ci_low", "_ci_high"))]
    splits = [c for c in df.columns if c not in ("method", "metric", "unit", "n_units") and not c.startswith("gap_")]
    out = df[["method"]].assign(metric=[metric_label(m, short=True) for m in df["metric"]])
    for s in splits:
        out[s] = df[s].to_numpy()
    headers = dict(HEADERS)
    for g in gap:
        nan = pd.Series(np.nan, index=df.index)
        lo, hi = df.get(f"{g}_ci_low", nan), df.get(f"{g}_ci_high", nan)
        out[g] = [format_value(v) + interval_suffix(v, a, b, r"\scriptsize")
                  for v, a, b in zip(df[g], lo, hi, strict=True)]
        headers[g] = g.removeprefix("gap_").replace("_minus_", " - ")
    return to_latex(out, caption=caption, label=label, headers=headers, keys=2, raw=tuple(gap))


def _paired(df: pd.DataFrame, caption: str, label: str) -> str:
    """Method comparisons at either unit: split and metric name every row; the Holm-adjusted p-value
    of the table's test; the unit and how many units; win/tie/loss counts where queries are the unit."""
    keys = [c for c in ("split", "metric") if c in df.columns]
    out = df[keys + ["method_a", "method_b", "mean_diff"]].copy()
    if "metric" in out.columns:
        out["metric"] = [metric_label(m, short=True) for m in out["metric"]]
    out["interval"] = [interval_cell(lo, hi) for lo, hi in zip(df["ci_low"], df["ci_high"], strict=True)]
    p = "p_holm" if "p_holm" in df.columns else "p_permutation_holm"
    out["p_holm"] = df[p]
    if "unit" in df.columns:
        out["unit"] = [f"{u} ({int(n)})" if pd.notna(n) else str(u) for u, n in zip(df["unit"], df["n_units"],
                                                                                     strict=True)]
    wtl = {"wins", "ties", "losses"} <= set(df.columns) and df["wins"].notna().all()
    if wtl:
        out["W/T/L"] = [f"{int(w)}/{int(t)}/{int(loss)}" for w, t, loss in zip(df["wins"], df["ties"], df["losses"],
                                                                                strict=True)]
    return to_latex(out, caption=caption + (" W/T/L: queries where a beats, ties, loses to b." if wtl else ""),
                    label=label, headers=HEADERS, keys=len(keys) + 2)


def _two_way(df: pd.DataFrame, caption: str, label: str) -> str:
    """The split-plot table: each term with its df, F, p and the error it is tested against; notes
    only when a term is undefined."""
    keys = [c for c in ("split",) if c in df.columns]
    out = df[keys + ["term"]].copy()
    out["df"] = [f"{d:g}" if pd.notna(d) else "--" for d in df["df"]]
    out["F"] = df["F"]
    out["p_value"] = df["p_value"]
    out["error"] = df["error"]
    if df["note"].astype(str).str.len().gt(0).any():
        out["note"] = df["note"]
    return to_latex(out, caption=caption, label=label, headers=HEADERS, keys=len(keys) + 1)


def _mixed(df: pd.DataFrame, caption: str, label: str) -> str:
    """A mixed model's fixed effects; a note shared by every row (the class-unit model shown without
    tests says why) goes into the caption instead of a column."""
    keys = [c for c in ("split",) if c in df.columns]
    cols = keys + [c for c in ("term", "coef", "std_err", "t", "df", "p_value", "ci_low", "ci_high")
                   if c in df.columns and (c in ("term", "coef") or df[c].notna().any())]
    out = df[cols].copy()
    notes = [n for n in dict.fromkeys(df["note"].astype(str)) if n] if "note" in df.columns else []
    if len(notes) == 1:
        caption = f"{caption} {notes[0][0].upper()}{notes[0][1:]}."
    elif notes:
        out["note"] = df["note"]
    return to_latex(out, caption=caption, label=label, headers=HEADERS, keys=len(keys) + 1)


def _grouped(df: pd.DataFrame, caption: str, label: str) -> str:
    out = df[["method", "group_size", "k", "mean"]].copy()
    out["interval"] = [interval_cell(lo, hi) for lo, hi in zip(df["ci_low"], df["ci_high"], strict=True)]
    out["n_groups"] = df["n_groups"]
    return to_latex(label=label, df=out, caption=caption, headers=HEADERS)


def classes_latex(classes: pd.DataFrame, n: int = N_CLASSES, caption: str | None = None) -> str:
    """Class x method mean AP for the ``n`` hardest and ``n`` easiest classes (by mean AP over
    methods) from the report's per-class table (``method, label, mean_ap``)."""
    wide = classes.pivot_table(index="label", columns="method", values="mean_ap", aggfunc="first")
    wide = wide[list(dict.fromkeys(classes["method"]))]
    order = wide.mean(axis=1).sort_values().index
    hard, easy = list(order[:n]), [c for c in order[-n:] if c not in order[:n]]
    rows = pd.concat([wide.loc[hard].assign(_g="hardest"), wide.loc[easy].assign(_g="easiest")])
    out = pd.DataFrame({"class": [f"{lab} ({g})" for lab, g in zip(rows.index, rows["_g"], strict=True)]})
    for m in wide.columns:
        out[m] = rows[m].to_numpy()
    cap = caption or (f"Mean AP per class and method: the {len(hard)} hardest and {len(easy)} easiest of "
                      f"{len(order)} classes (lowest and highest mean AP over methods); every class in "
                      "classes.csv.")
    return to_latex(out, caption=cap, label="tab:classes")


def _run_values(df: pd.DataFrame, caption: str, label: str) -> str:
    keys = [c for c in ("split", "family", "run", "step") if c in df.columns]
    out, metrics = wide_by_metric(df, keys, lambda r: format_value(r["value"]))
    out["step"] = [("--" if pd.isna(s) else str(int(s))) for s in out["step"]]
    return to_latex(out, caption=caption, label=label, headers={m: metric_label(m, short=True) for m in metrics},
                    keys=3, raw=tuple(metrics))


def _run_summary(df: pd.DataFrame, caption: str, label: str) -> str:
    return runs_latex(df, caption=caption, label=label)


def _family_tests(df: pd.DataFrame, caption: str, label: str) -> str:
    """Family comparisons: split and metric on every row, the difference with its interval, the
    default test's p (Holm) and the probability of improvement with its interval."""
    part = run_metric_rows(df)
    keys = [c for c in ("split", "metric") if c in part.columns]
    out = part[keys + ["family_a", "family_b", "mean_diff"]].copy()
    out["metric"] = [metric_label(m, short=True) for m in out["metric"]]
    out["interval"] = [interval_cell(lo, hi) for lo, hi in zip(part["ci_low"], part["ci_high"], strict=True)]
    out["p_value"] = part["p_value"]
    out["p_holm"] = part["p_holm"]
    out["P(a>b)"] = [f"{format_value(v)} {interval_cell(lo, hi)}" for v, lo, hi in
                     zip(part["prob_improvement"], part["pi_low"], part["pi_high"], strict=True)]
    out["runs"] = [f"{int(a)}+{int(b)}" for a, b in zip(part["n_a"], part["n_b"], strict=True)]
    few = int(part["note"].astype(str).str.startswith("too few").sum())
    note = (f"{few} of {len(part)} comparisons rest on too few runs for the test to reach alpha: there the interval "
            "is the answer." if few else None)
    extra = "" if len(part) == len(df) else " mAP, MAP@R, R-Precision and P@1 here; every metric in the CSV file."
    return to_latex(out, caption=caption + extra, label=label, headers=HEADERS, keys=len(keys) + 2, note=note)


def _runs_needed(df: pd.DataFrame, caption: str, label: str) -> str:
    part = run_metric_rows(df)
    keys = [c for c in ("split",) if c in part.columns]
    out = part[keys + ["metric", "run_sd", "n_runs"]].copy()
    out["metric"] = [metric_label(m, short=True) for m in out["metric"]]
    out["n_runs"] = [("--" if pd.isna(n) else str(int(n))) for n in part["n_runs"]]
    if part["note"].astype(str).replace("nan", "").str.len().gt(0).any():
        out["note"] = part["note"].fillna("")
    return to_latex(out, caption=caption, label=label, headers={"run_sd": "run sd", "n_runs": "runs per family"},
                    keys=len(keys) + 1)


def _checkpoint_runs(df: pd.DataFrame, caption: str, label: str) -> str:
    def cell(r: pd.Series) -> str:
        return format_value(r["mean"]) + interval_suffix(r["mean"], r["ci_low"], r["ci_high"], r"\scriptsize")

    out, metrics = wide_by_metric(df, ["split", "family", "step"], cell)
    return to_latex(out, caption=caption, label=label, headers={m: metric_label(m, short=True) for m in metrics},
                    keys=3, raw=tuple(metrics))


def _checkpoints(df: pd.DataFrame, caption: str, label: str) -> str:
    """Checkpoints: one row per (split, curve, step), the run metrics as value with its interval
    (± half-width, or [low, high] where asymmetric); every metric in the CSV file."""
    def cell(r: pd.Series) -> str:
        return format_value(r["value"]) + interval_suffix(r["value"], r["ci_low"], r["ci_high"], r"\scriptsize")

    out, metrics = wide_by_metric(df, ["split", "family", "step"], cell)
    extra = ("" if set(df["metric"]) <= set(RUN_METRICS)
             else " mAP, MAP@R, R-Precision and P@1 here; every metric in the CSV file.")
    return to_latex(out, caption=caption + extra, label=label,
                    headers={m: metric_label(m, short=True) for m in metrics} | {"family": "curve"}, keys=3,
                    raw=tuple(metrics))


COMPACT: dict[str, Callable[[pd.DataFrame, str, str], str]] = {
    "tukey_hsd": _posthoc, "games_howell": _posthoc, "pr_band": _pr_band, "erc": _erc, "histograms": _histograms,
    "class_sweep": _class_sweep, "generalization": _generalization, "paired_tests": _paired,
    "grouped_recall": _grouped, "classes": lambda df, cap, label: classes_latex(df), "two_way_anova": _two_way,
    "mixed_model": _mixed, "runs": _run_values, "run_summary": _run_summary, "family_tests": _family_tests,
    "runs_needed": _runs_needed, "checkpoint_runs": _checkpoint_runs, "checkpoints": _checkpoints,
}


def paper_latex(name: str, df: pd.DataFrame, caption: str | None) -> str:
    """The LaTeX of report table ``name``: its compact version where it has one, else the table."""
    label = f"tab:{name.replace('_', '-')}"
    if name in COMPACT:
        tex = COMPACT[name](df, caption or "", label)
        units = unit_caption(df)
        if units and not re.search(r"(^|& )unit( &| \\\\)", tex, re.M):  # without the column: in the caption
            tex = tex.replace(r"\caption{", r"\caption{" + units + " ", 1)
        return tex
    return to_latex(df, caption=caption, label=label)


def unit_caption(df: pd.DataFrame) -> str:
    """``Unit: class (10).``: what a table's intervals and tests rest on, from its ``unit`` and
    ``n_units`` columns (several units or counts listed), or "" without them."""
    if not {"unit", "n_units"} <= set(df.columns) or not len(df):
        return ""
    pairs = df[["unit", "n_units"]].dropna().drop_duplicates()
    pairs = pairs[pairs["unit"].astype(str) != ""]
    if not len(pairs):
        return ""
    parts = [f"{u} ({int(n)})" for u, n in pairs.itertuples(index=False)][:4]
    return "Unit: " + "; ".join(parts) + ("; ..." if len(pairs) > 4 else "") + "."
