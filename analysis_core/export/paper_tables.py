"""The report's LaTeX tables for a paper: compact versions of the long and wide tables (their
CSV twins keep every row and column), the main results table and the class x method table.

Every table fits a two-column page (:func:`~analysis_core.export.tables.to_latex` picks
``table`` or ``table*``); numbers are printed as everywhere (:mod:`number_format`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..figures.class_sweep import SWEEP_METRICS
from ..metrics.registry import by_name, get_key
from ..metrics.registry import label as metric_label
from ..number_format import format_value
from ..stats.quantiles import t_half_width
from .tables import TexCell, to_latex

if TYPE_CHECKING:
    from ..evaluation import Evaluation

TOP_PAIRS = 20  # significant pairs shown in the compact post-hoc tables
N_CLASSES = 5  # hardest and easiest classes in classes.tex
HEADERS = {"method_a": "a", "method_b": "b", "mean_diff": "mean diff.", "p_permutation_holm": "p perm. (Holm)",
           "p_wilcoxon_holm": "p Wilcoxon (Holm)", "n_classes": "C", "group_size": "S", "n_groups": "groups",
           "meandiff": "diff.", "p_adj": "p (adj.)", "spearman": "Spearman", "spearman_p": "p",
           "oracle_auc": "oracle AUC", "auc": "AUC", "n_pairs": "pairs", "mean_sim": "mean sim.", "sd_sim": "sd",
           "group1": "group 1", "group2": "group 2", "reject": "sig.", "mean": "mean", "p_value": "p",
           "p_holm": "p (Holm)"}


def _interval(lo: float, hi: float) -> str:
    return f"[{format_value(lo)}, {format_value(hi)}]"


def _pm(v: float, half: float | None, size: str = "") -> str:
    """LaTeX: the value and its half-width (a raw cell)."""
    if half is None or not math.isfinite(half):
        return format_value(v)
    return f"{format_value(v)}{{{size}$\\pm${format_value(half)}}}"


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
        wide[m] = [_pm(v, (hi - lo) / 2, r"\scriptsize") for v, lo, hi in
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
        lo, hi = df.get(f"{g}_ci_low"), df.get(f"{g}_ci_high")
        halves = (hi - lo) / 2 if lo is not None and hi is not None else [None] * len(df)
        out[g] = [_pm(v, h, r"\scriptsize") for v, h in zip(df[g], halves, strict=True)]
        headers[g] = g.removeprefix("gap_").replace("_minus_", " - ")
    return to_latex(out, caption=caption, label=label, headers=headers, keys=2, raw=tuple(gap))


def _paired(df: pd.DataFrame, caption: str, label: str) -> str:
    """Method comparisons at either unit: split and metric name every row; the Holm-adjusted p-value
    of the table's test; the unit and how many units; win/tie/loss counts where queries are the unit."""
    keys = [c for c in ("split", "metric") if c in df.columns]
    out = df[keys + ["method_a", "method_b", "mean_diff"]].copy()
    if "metric" in out.columns:
        out["metric"] = [metric_label(m, short=True) for m in out["metric"]]
    out["interval"] = [_interval(lo, hi) for lo, hi in zip(df["ci_low"], df["ci_high"], strict=True)]
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
    out["interval"] = [_interval(lo, hi) for lo, hi in zip(df["ci_low"], df["ci_high"], strict=True)]
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


RUN_METRICS = ("map", "map_at_r", "r_precision", "precision_at_1")  # the run tables' LaTeX columns


def _label_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["metric"].isin(RUN_METRICS)]


def _wide(df: pd.DataFrame, keys: list[str], cell: Callable[[pd.Series], str]) -> tuple[pd.DataFrame, list[str]]:
    """One row per ``keys``, one raw LaTeX column per run metric (``cell(row)``)."""
    part = _label_rows(df)
    metrics = [m for m in RUN_METRICS if m in set(part["metric"])]
    rows = []
    for key, g in part.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key, strict=True))
        by = g.set_index("metric")
        row |= {m: cell(by.loc[m]) if m in by.index else "--" for m in metrics}
        rows.append(row)
    return pd.DataFrame(rows), metrics


def _run_values(df: pd.DataFrame, caption: str, label: str) -> str:
    keys = [c for c in ("split", "family", "run", "step") if c in df.columns]
    out, metrics = _wide(df, keys, lambda r: format_value(r["value"]))
    out["step"] = [("--" if pd.isna(s) else str(int(s))) for s in out["step"]]
    return to_latex(out, caption=caption, label=label, headers={m: metric_label(m, short=True) for m in metrics},
                    keys=3, raw=tuple(metrics))


def _mean_sd(r: pd.Series) -> str:
    sd = r["sd"]
    return format_value(r["mean"]) + (rf"{{\scriptsize$\pm${format_value(sd)}}}" if math.isfinite(sd) else "")


def _run_summary(df: pd.DataFrame, caption: str, label: str) -> str:
    return runs_latex(df, caption=caption, label=label)


def runs_latex(summary: pd.DataFrame, alpha: float = 0.05, tests: pd.DataFrame | None = None,
               caption: str | None = None, label: str = "tab:summary") -> str:
    """The main results table with replicate runs: families (x split) by headline metric, ``mean
    ± sd`` over runs and the number of runs; the best mean per column (per split) in bold; a dagger
    where the family test (``tests``: unit run, Holm across family pairs) finds the best differs
    from the runner-up at ``alpha``."""
    out, metrics = _wide(summary, ["split", "family"], _mean_sd)
    n = _label_rows(summary).groupby(["split", "family"], sort=False)["n_runs"].max()
    out.insert(2, "runs", [int(n[(s, f)]) for s, f in zip(out["split"], out["family"], strict=True)])
    marked = False
    part_means = _label_rows(summary).set_index(["split", "family", "metric"])["mean"]
    for split in dict.fromkeys(out["split"]):
        rows = out.index[out["split"] == split]
        for m in metrics:
            means = {f: part_means.get((split, f, m), math.nan) for f in out.loc[rows, "family"]}
            finite = {f: v for f, v in means.items() if math.isfinite(v)}
            if len(finite) < 2:
                continue
            best = max(finite.values())
            winners = [f for f, v in finite.items() if abs(v - best) <= 5e-5]
            for i in rows:
                f = out.at[i, "family"]
                if f in winners:
                    text = rf"\textbf{{{out.at[i, m]}}}"
                    if tests is not None and len(winners) == 1:
                        runner = max((v, g) for g, v in finite.items() if g != f)[1]
                        t = tests[(tests["split"] == split) & (tests["metric"] == m)
                                  & (((tests["family_a"] == f) & (tests["family_b"] == runner))
                                     | ((tests["family_a"] == runner) & (tests["family_b"] == f)))]
                        if len(t) and t["p_holm"].iloc[0] < alpha:
                            text += r"$^\dagger$"
                            marked = True
                    out.at[i, m] = text
    if out["split"].nunique() == 1:
        out = out.drop(columns="split")
    cap = caption or (r"Main results over replicate runs: mean {\scriptsize$\pm$sd} over runs (runs: how many) "
                      "at each run's reported checkpoint; best mean per column in bold."
                      + (rf" $^\dagger$: the best family differs from the runner-up by the exact permutation test of "
                         rf"run means, Holm across family pairs, $\alpha = {alpha:g}$ (unit: run)." if marked else
                         " Unit: run."))
    return to_latex(out, caption=TexCell(cap) if caption is None else caption, label=label,
                    headers={m: metric_label(m, short=True) for m in metrics},
                    keys=2 if "split" in out.columns else 1, raw=tuple(metrics))


def _family_tests(df: pd.DataFrame, caption: str, label: str) -> str:
    """Family comparisons: split and metric on every row, the difference with its interval, the
    default test's p (Holm) and the probability of improvement with its interval."""
    part = _label_rows(df)
    keys = [c for c in ("split", "metric") if c in part.columns]
    out = part[keys + ["family_a", "family_b", "mean_diff"]].copy()
    out["metric"] = [metric_label(m, short=True) for m in out["metric"]]
    out["interval"] = [_interval(lo, hi) for lo, hi in zip(part["ci_low"], part["ci_high"], strict=True)]
    out["p_value"] = part["p_value"]
    out["p_holm"] = part["p_holm"]
    out["P(a>b)"] = [f"{format_value(v)} {_interval(lo, hi)}" for v, lo, hi in
                     zip(part["prob_improvement"], part["pi_low"], part["pi_high"], strict=True)]
    out["runs"] = [f"{int(a)}+{int(b)}" for a, b in zip(part["n_a"], part["n_b"], strict=True)]
    few = int(part["note"].astype(str).str.startswith("too few").sum())
    note = (f"{few} of {len(part)} comparisons rest on too few runs for the test to reach alpha: there the interval "
            "is the answer." if few else None)
    extra = "" if len(part) == len(df) else " mAP, MAP@R, R-Precision and P@1 here; every metric in the CSV file."
    return to_latex(out, caption=caption + extra, label=label, headers=HEADERS, keys=len(keys) + 2, note=note)


def _runs_needed(df: pd.DataFrame, caption: str, label: str) -> str:
    part = _label_rows(df)
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
        half = (r["ci_high"] - r["ci_low"]) / 2
        return _pm(r["mean"], half if math.isfinite(half) else None, r"\scriptsize")

    out, metrics = _wide(df, ["split", "family", "step"], cell)
    return to_latex(out, caption=caption, label=label, headers={m: metric_label(m, short=True) for m in metrics},
                    keys=3, raw=tuple(metrics))


def _checkpoints(df: pd.DataFrame, caption: str, label: str) -> str:
    """Checkpoints: one row per (split, curve, step), the run metrics as value with its interval's
    half-width; every metric in the CSV file."""
    def cell(r: pd.Series) -> str:
        half = (r["ci_high"] - r["ci_low"]) / 2
        return _pm(r["value"], half if math.isfinite(half) else None, r"\scriptsize")

    out, metrics = _wide(df, ["split", "family", "step"], cell)
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


# ---- the main results table -------------------------------------------------------------------

HEADLINE = ("map", "map_at_r", "r_precision", "precision_at_1", "recall_at_k", "jsd")
LOWER_IS_BETTER: set[str] = set()  # every headline metric is better when higher (JSD: better separated)

# significance_hook(split, metric, best, runner_up) -> True (the best differs significantly from
# the runner-up by the paired test of that metric), False (it does not), None (no test for it).
SignificanceHook = Callable[[str, str, str, str], "bool | None"]


def summary_frame(evals: dict[str, Evaluation], alpha: float, recall_k: int | None = None,
                  headline: tuple[str, ...] = HEADLINE, unit: str = "query", seed: int = 0) -> pd.DataFrame:
    """One row per (split, method): each headline metric and the half-width of its 1 - alpha
    interval (the query sample's interval when there is one, else Student t over the queries;
    JSD is a property of all pairs: no interval); with ``unit="class"`` the jackknife t interval over
    classes (:meth:`~analysis_core.evaluation.Evaluation.class_jackknife`). Columns ``unit`` and
    ``n_units`` say which. ``evals``: split name -> Evaluation;
    ``headline``: registry names (``recall_at_k``: Recall at ``recall_k``)."""
    rows = []
    for split, ev in evals.items():
        s = ev.summary(alpha)["methods"]  # with a query sample, the intervals at this level
        ks = list(ev.ks)
        k = recall_k if recall_k in ks else (ks[1] if len(ks) > 1 else ks[0])
        reg = by_name(ev.ks)
        jk_half, n_units = {}, None
        if unit == "class" and ev.query_sample is None:
            jk = ev.class_jackknife(seed=seed)  # the report's grouping of classes: one jackknife
            iv = jk.intervals(alpha)
            jk_half = {(r.method, r.metric): (r.ci_high - r.ci_low) / 2 for r in iv.itertuples()}
            n_units = jk.n_units
        for m in ev.methods:
            v, pq = s[m], ev.per_query_columns(m)  # the columns as arrays: no frame needed
            if "n_positives" in pq:
                has_pos = pq["n_positives"] > 0
                pq = {c: a[has_pos] for c, a in pq.items()}
            iv = v.get("intervals") or {}
            scored = int(np.sum(np.isfinite(np.asarray(pq.get("ap", []), float))))
            row = {"split": split, "method": m,
                   "unit": "class" if n_units is not None else "query",
                   "n_units": n_units if n_units is not None else scored}
            for name in headline:
                name = f"recall_at_{k}" if name == "recall_at_k" else name
                metric = reg[name]
                value, col = get_key(v, metric.key), metric.column
                row[name] = value
                if (m, name) in jk_half:
                    half = jk_half[(m, name)]
                elif name in iv:
                    half = (iv[name]["high"] - iv[name]["low"]) / 2
                elif col is not None and col in pq:
                    half = t_half_width(pq[col], alpha)
                else:
                    half = math.nan
                row[f"{name}_half_width"] = half
            rows.append(row)
    return pd.DataFrame(rows)


def _unit_words(frame: pd.DataFrame) -> str:
    """What the main table's intervals are over, with how many units (a range across splits)."""
    if "unit" not in frame.columns or not len(frame):
        return "queries"
    unit = "classes" if (frame["unit"] == "class").all() else "queries"
    n = pd.to_numeric(frame["n_units"], errors="coerce").dropna().astype(int)
    if not len(n):
        return unit
    count = f"{n.min()}" if n.min() == n.max() else f"{n.min()}--{n.max()}"
    how = " (jackknife: each class deleted from queries and gallery)" if unit == "classes" else ""
    return f"{unit}{how}, n = {count}"


def _table_metrics(frame: pd.DataFrame, single_column: bool) -> list[str]:
    """The metric columns of the main table (its single-column variant: without MAP@R and
    R-Precision)."""
    metrics = [c for c in frame.columns if c not in ("split", "method", "unit", "n_units")
               and not c.endswith("_half_width")]
    return [m for m in metrics if m not in ("map_at_r", "r_precision")] if single_column else metrics


def _best_and_runner_up(part: pd.DataFrame, metrics: list[str]) -> tuple[dict[str, set], dict[str, str]]:
    """One split's rows of the main table: per metric, the methods within 5e-5 of the best value
    (bold), and, where one method is best alone, the runner-up it is tested against."""
    best, runner = {}, {}
    for m in metrics if len(part) > 1 else ():  # one method: nothing to be best among
        vals = part[m].to_numpy(float)
        if np.isfinite(vals).any():
            target = np.nanmin(vals) if m in LOWER_IS_BETTER else np.nanmax(vals)
            best[m] = set(part["method"][np.isclose(vals, target, rtol=0, atol=5e-5)])
            if len(best[m]) == 1:
                others = part.set_index("method")[m].drop(next(iter(best[m])))
                if others.notna().any():  # (no other method with a value: no runner-up to test)
                    runner[m] = others.idxmin() if m in LOWER_IS_BETTER else others.idxmax()
    return best, runner


def significance_questions(frame: pd.DataFrame, single_column: bool = False) -> list[tuple[str, str, str, str]]:
    """The (split, metric, best, runner-up) questions :func:`summary_latex` asks its hook: a
    caller can answer them all at once (the permutation tests of a split then share one product)
    and hand in a hook that looks the answers up."""
    metrics = _table_metrics(frame, single_column)
    out = []
    for split in dict.fromkeys(frame["split"]):
        best, runner = _best_and_runner_up(frame[frame["split"] == split], metrics)
        out += [(split, m, next(iter(best[m])), runner[m]) for m in metrics if m in runner]
    return out


def summary_latex(frame: pd.DataFrame, alpha: float, hook: SignificanceHook | None = None,
                  single_column: bool = False) -> str:
    """The main results table: methods (x split) by headline metric, value +- half-width, the
    best per column (per split) in bold (ties: all bold), a dagger where the best differs
    significantly from the runner-up (``hook``). ``single_column``: the narrower variant (no
    half-widths, no MAP@R / R-Precision) for one column."""
    metrics = _table_metrics(frame, single_column)
    splits = list(dict.fromkeys(frame["split"]))
    out_rows, marked = [], False
    for split in splits:
        part = frame[frame["split"] == split]
        best, runner = _best_and_runner_up(part, metrics)
        for _, r in part.iterrows():
            row = ({"split": split} if len(splits) > 1 else {}) | {"method": r["method"]}
            for m in metrics:
                text = format_value(r[m])
                if m in best and r["method"] in best[m]:
                    text = rf"\textbf{{{text}}}"
                    if hook is not None and m in runner and hook(split, m, r["method"], runner[m]):
                        text += r"$^\dagger$"
                        marked = True
                half = r[f"{m}_half_width"]
                if not single_column and math.isfinite(half):
                    text += rf"{{\scriptsize$\pm${format_value(half)}}}"
                row[m] = text
            out_rows.append(row)
    out = pd.DataFrame(out_rows)
    headers = {m: metric_label(m, short=True) for m in metrics}
    conf = f"{100 * (1 - alpha):g}\\%"
    units = _unit_words(frame)
    by_class = "unit" in frame.columns and (frame["unit"] == "class").all()
    test = (f"the jackknife t test over classes; $\\alpha = {alpha:g}$" if by_class else
            f"the metric's paired test on the same queries: McNemar for hit rates, sign-flip permutation "
            f"otherwise; $\\alpha = {alpha:g}$")
    cap = ("Main results: expected values over tie orders; best per column in bold"
           + ("" if single_column else f", $\\pm$ the half-width of the {conf} interval over {units}") + "."
           + (f" $^\\dagger$: the best differs significantly from the runner-up ({test})." if marked else ""))
    tex = to_latex(out, caption=TexCell(cap), label=f"tab:summary{'-column' if single_column else ''}",
                   headers=headers, keys=2 if len(splits) > 1 else 1, raw=tuple(metrics))
    if not single_column and r"\begin{table}" in tex:  # the main table spans both columns
        tex = tex.replace(r"\begin{table}", r"\begin{table*}").replace(r"\end{table}", r"\end{table*}")
    return tex
