"""The main results table of a paper: methods (or families over runs) x headline metrics, with
each interval's half-width (or the sd over runs), the best per column in bold and a dagger where
the best differs significantly from the runner-up.

Every table fits a two-column page (:func:`~analysis_core.export.tables.to_latex`); numbers are
printed as everywhere (:mod:`analysis_core.number_format`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..metrics.registry import by_name, get_key
from ..metrics.registry import label as metric_label
from ..number_format import format_value
from ..stats.quantiles import t_half_width
from .latex_cells import interval_suffix, mean_sd_cell, run_metric_rows, symmetric, wide_by_metric
from .tables import TexCell, to_latex

if TYPE_CHECKING:
    from ..evaluation import Evaluation

HEADLINE = ("map", "map_at_r", "r_precision", "precision_at_1", "recall_at_k", "jsd")
LOWER_IS_BETTER: set[str] = set()  # every headline metric is better when higher (JSD: better separated)

# significance_hook(split, metric, best, runner_up) -> True (the best differs significantly from
# the runner-up by the paired test of that metric), False (it does not), None (no test for it).
SignificanceHook = Callable[[str, str, str, str], "bool | None"]


def summary_frame(evals: dict[str, Evaluation], alpha: float, recall_k: int | None = None,
                  headline: tuple[str, ...] = HEADLINE, unit: str = "query", seed: int = 0) -> pd.DataFrame:
    """One row per (split, method): each headline metric and its 1 - alpha interval,
    ``<metric>_ci_low`` / ``<metric>_ci_high`` (the query sample's interval when there is one, else
    Student t over the queries; JSD is a property of all pairs: no interval); with
    ``unit="class"`` the jackknife interval over classes
    (:meth:`~analysis_core.evaluation.Evaluation.class_jackknife`: t, or Korn-Graubard for hit
    rates and means near 0 or 1, asymmetric). Every interval is clipped to the metric's range
    [0, 1]. Columns ``unit`` and ``n_units`` say which. ``evals``: split name -> Evaluation;
    ``headline``: registry names (``recall_at_k``: Recall at ``recall_k``)."""
    rows = []
    for split, ev in evals.items():
        s = ev.summary(alpha)["methods"]  # with a query sample, the intervals at this level
        ks = list(ev.ks)
        k = recall_k if recall_k in ks else (ks[1] if len(ks) > 1 else ks[0])
        reg = by_name(ev.ks)
        jk_bounds, n_units = {}, None
        if unit == "class" and ev.query_sample is None:
            jk = ev.class_jackknife(seed=seed)  # the report's grouping of classes: one jackknife
            iv = jk.intervals(alpha)
            jk_bounds = {(r.method, r.metric): (r.ci_low, r.ci_high) for r in iv.itertuples()}
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
                if (m, name) in jk_bounds:
                    lo, hi = jk_bounds[(m, name)]
                elif name in iv:
                    lo, hi = iv[name]["low"], iv[name]["high"]
                elif col is not None and col in pq:
                    half = t_half_width(pq[col], alpha)
                    lo, hi = value - half, value + half
                else:
                    lo = hi = math.nan
                if metric.kind in ("mean", "hit"):  # a mean of values in [0, 1]: so is every bound
                    lo, hi = min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)
                row[f"{name}_ci_low"], row[f"{name}_ci_high"] = lo, hi
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
               and not c.endswith(("_ci_low", "_ci_high"))]
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
    """The main results table: methods (x split) by headline metric, value +- half-width (or
    the bounds of an asymmetric interval, stacked: :func:`~.latex_cells.interval_suffix`),
    the best per column (per split) in bold (ties: all bold), a dagger where the best differs
    significantly from the runner-up (``hook``). ``single_column``: the narrower variant (no
    intervals, no MAP@R / R-Precision) for one column."""
    metrics = _table_metrics(frame, single_column)
    splits = list(dict.fromkeys(frame["split"]))
    out_rows, marked, asymmetric = [], False, False
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
                lo, hi = r[f"{m}_ci_low"], r[f"{m}_ci_high"]
                if not single_column and math.isfinite(lo) and math.isfinite(hi):
                    text += interval_suffix(r[m], lo, hi, r"\scriptsize")
                    asymmetric = asymmetric or not symmetric(r[m], lo, hi)
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
           + ("" if single_column else f", $\\pm$ the half-width of the {conf} interval over {units}"
              + ("; an asymmetric interval (Korn--Graubard for hit rates and means near 0 or 1, or one clipped "
                 "to [0, 1]) as its bounds, the upper above and the lower below" if asymmetric else "")) + "."
           + (f" $^\\dagger$: the best differs significantly from the runner-up ({test})." if marked else ""))
    tex = to_latex(out, caption=TexCell(cap), label=f"tab:summary{'-column' if single_column else ''}",
                   headers=headers, keys=2 if len(splits) > 1 else 1, raw=tuple(metrics))
    if not single_column and r"\begin{table}" in tex:  # the main table spans both columns
        tex = tex.replace(r"\begin{table}", r"\begin{table*}").replace(r"\end{table}", r"\end{table*}")
    return tex


def runs_latex(summary: pd.DataFrame, alpha: float = 0.05, tests: pd.DataFrame | None = None,
               caption: str | None = None, label: str = "tab:summary") -> str:
    """The main results table with replicate runs: families (x split) by headline metric, ``mean
    ± sd`` over runs and the number of runs; the best mean per column (per split) in bold; a dagger
    where the family test (``tests``: unit run, Holm across family pairs) finds the best differs
    from the runner-up at ``alpha``."""
    out, metrics = wide_by_metric(summary, ["split", "family"], mean_sd_cell)
    n = run_metric_rows(summary).groupby(["split", "family"], sort=False)["n_runs"].max()
    out.insert(2, "runs", [int(n[(s, f)]) for s, f in zip(out["split"], out["family"], strict=True)])
    marked = False
    part_means = run_metric_rows(summary).set_index(["split", "family", "metric"])["mean"]
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
