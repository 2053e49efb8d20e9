"""Checkpoints over training: every summary metric against checkpoint, per split and per family,
with ``1 - alpha`` intervals over queries, the best checkpoint per metric, and a paired test of the
best against the last checkpoint (on the same queries).

Checkpoints are the methods with a step in the evaluation's design (:mod:`analysis_core.design`:
from names such as ``triplet_seed0_e10`` or a design table). Methods without one are never drawn or
tested as a training curve: without any step there is nothing to analyse here (unrelated models or
training runs in their order are no curve), and beside checkpoints such a method is a curve of one
point. The ``family`` column names the curve: one run of one family (its run-averaged curves are in
:mod:`analysis_core.stats.runs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from ..design import Design
from ..metrics.registry import get_key, summary_metrics
from .paired_tests import metric_paired_tests
from .quantiles import t_quantile
from .variability import metric_frame

if TYPE_CHECKING:
    from ..evaluation import Evaluation

# why a checkpoint's interval is undefined (by its number of scored queries)
NO_INTERVAL = {0: "no interval: no scored query", 1: "no interval: one scored query"}
PAIR_STATISTIC = "no interval: a statistic of all pairs, not a mean over queries"


@dataclass(frozen=True)
class CheckpointAnalysis:
    """``table``: split, family, method, step, metric, label, value, ci_low, ci_high, n, note (why
    an interval is undefined), is_best.
    ``tests``: split, family, metric, best, last, mean_diff (best - last), ci_low, ci_high, test,
    p_value, note. ``class_ap``: split, family, method, step, class, mean_ap, n."""

    table: pd.DataFrame
    tests: pd.DataFrame
    class_ap: pd.DataFrame
    alpha: float

    def summary_frame(self) -> pd.DataFrame:
        return self.table


def families_of(methods: list[str] | Design) -> dict[str, list[tuple[str, int]]]:
    """Curve -> [(method, step)] in step order, from the design (method names: their design,
    :mod:`analysis_core.design`); none without steps (methods in their order are no training
    curve). A curve is one run of one family (``triplet_seed0``). Beside checkpoints, a method
    without a step (a baseline) is a curve of its own, one point at step 0 (named after it;
    ``<name> (no step)`` if a curve has its name), never left out."""
    design = methods if isinstance(methods, Design) else Design.from_names(methods)
    out = design.curves()
    if not out:
        return {}
    for m in without_step(design):
        out[m if m not in out else f"{m} (no step)"] = [(m, 0)]
    return out


def without_step(methods: list[str] | Design) -> list[str]:
    """The methods without a checkpoint step, when others have one (else none)."""
    design = methods if isinstance(methods, Design) else Design.from_names(methods)
    t = design.table
    return t.loc[t["step"].isna(), "method"].tolist() if design.has_steps else []


def checkpoint_analysis(evaluations: dict[str, Evaluation], alpha: float = 0.05, n_permutations: int = 10_000,
                        seed: int = 0, unit: str = "class") -> CheckpointAnalysis:
    """``evaluations``: split name (or ``"all"``) -> :class:`~analysis_core.Evaluation`.
    ``unit``: ``"class"`` (default) takes every interval and the best-vs-last test from the
    evaluation's jackknife over classes; ``"query"`` uses t intervals over queries and the paired
    per-query tests (these models, this gallery). ``unit`` and ``n_units`` columns say which."""

    rows, tests, class_rows = [], [], []
    for split, ev in evaluations.items():
        fams = families_of(ev.design)
        long = metric_frame(ev)
        registry = summary_metrics(ev.ks)
        # the rows of each (method, metric), in table order, split once (a mask per pair was most of the time)
        parts = dict(iter(long.groupby(["method", "metric"], sort=False)))
        none = long.iloc[:0]
        jk = ev.class_jackknife(seed=seed) if unit == "class" else None
        jk_iv = {} if jk is None else {(r.method, r.metric): r for r in jk.intervals(alpha).itertuples()}
        for family, members in fams.items():
            for method, step in members:
                summ = ev.method_summary(method)
                for m in registry:
                    vals = parts.get((method, m.name), none)["value"].to_numpy()
                    n = vals.size
                    value = float(get_key(summ, m.key))
                    lo = hi = math.nan
                    note = NO_INTERVAL.get(min(n, 2), "")
                    n_units = n
                    if jk is not None:
                        r = jk_iv.get((method, m.name))
                        n_units = jk.n_units
                        if r is not None:
                            lo, hi, note = max(0.0, r.ci_low), min(1.0, r.ci_high), r.note
                    elif n > 1:
                        half = t_quantile(1 - alpha / 2, n - 1) * vals.std(ddof=1) / math.sqrt(n)
                        lo, hi = max(0.0, value - half), min(1.0, value + half)
                    rows.append(dict(split=split, family=family, method=method, step=step, metric=m.name,
                                     label=m.label, value=value, ci_low=lo, ci_high=hi, n=n, note=note,
                                     unit=unit, n_units=n_units))
                rows.append(dict(split=split, family=family, method=method, step=step, metric="jsd", label="JSD",
                                 value=float(summ["jsd"]), ci_low=math.nan, ci_high=math.nan, n=0,
                                 note=PAIR_STATISTIC, unit="", n_units=math.nan))
                ap = parts.get((method, "map"), none)
                for cls, part in ap.groupby("label", sort=True):
                    class_rows.append(dict(split=split, family=family, method=method, step=step, **{"class": cls},
                                           mean_ap=float(part["value"].mean()), n=len(part)))
            tests += _best_vs_last(split, family, [m for m, _ in members], rows, long, alpha, n_permutations, seed,
                                   jk)
    table = pd.DataFrame(rows)
    best = table.groupby(["split", "family", "metric"])["value"].transform("max")
    table["is_best"] = table["value"] == best
    cols = ["split", "family", "metric", "best", "last", "mean_diff", "ci_low", "ci_high", "test", "p_value", "note",
            "unit", "n_units"]
    class_ap = pd.DataFrame(class_rows, columns=["split", "family", "method", "step", "class", "mean_ap", "n"])
    tests = pd.DataFrame(tests, columns=cols)
    tests["unit"] = tests["unit"].astype(object).fillna(unit)  # rows without a test: the unit they would be at
    return CheckpointAnalysis(table, tests, class_ap, alpha)


def _best_vs_last(split, family, methods, rows, long, alpha, n_permutations, seed, jk=None) -> list[dict]:
    """For each metric of this (split, family): the best checkpoint (the last one when it ties for
    best, else the first of equal bests) against the last one, by the metric's paired test (with
    ``jk``, the jackknife over classes)."""
    out = []
    mine = pd.DataFrame([r for r in rows if r["split"] == split and r["family"] == family])
    last = methods[-1]
    tested: dict[str, tuple[int, str]] = {}  # metric -> (its row in out, best): tested together below
    for metric, part in mine.groupby("metric", sort=False):
        if metric == "jsd":
            continue  # a pair statistic: no per-query values to pair
        if part["value"].isna().all():
            out.append(dict(split=split, family=family, metric=metric, best="", last=last, mean_diff=math.nan,
                            ci_low=math.nan, ci_high=math.nan, test="", p_value=math.nan,
                            note="undefined: no checkpoint has a value (no scored query)"))
            continue
        if len(methods) == 1:
            out.append(dict(split=split, family=family, metric=metric, best=last, last=last, mean_diff=math.nan,
                            ci_low=math.nan, ci_high=math.nan, test="", p_value=math.nan,
                            note="one checkpoint in this family: nothing to compare"))
            continue
        top = part["value"].max()
        best = last if part.loc[part["method"] == last, "value"].iloc[0] == top else \
            part.loc[part["value"].idxmax(), "method"]
        if best == last:
            out.append(dict(split=split, family=family, metric=metric, best=best, last=last, mean_diff=0.0,
                            ci_low=math.nan, ci_high=math.nan, test="", p_value=math.nan,
                            note="the last checkpoint is the best"))
            continue
        tested[metric] = (len(out), best)
        out.append({})
    if not tested:
        return out
    if jk is not None:
        for metric, (i, best) in tested.items():
            t = jk.differences(alpha, pairs=[(best, last)], metrics=[metric]).iloc[0]
            out[i] = dict(split=split, family=family, metric=metric, best=best, last=last, mean_diff=t["mean_diff"],
                          ci_low=t["ci_low"], ci_high=t["ci_high"], test=t["test"], p_value=t["p_value"],
                          note=t["note"], unit=t["unit"], n_units=t["n_units"])
        return out
    # one call for every metric's pair (each metric's rows hold only its best and last, so each is
    # tested, and Holm-adjusted, alone): the permutation tests share one product
    pairs = pd.concat([long[(long["metric"] == metric) & long["method"].isin([best, last])]
                       for metric, (_, best) in tested.items()], ignore_index=True)
    results = metric_paired_tests(pairs, alpha, n_permutations, seed).set_index("metric")
    for metric, (i, best) in tested.items():
        t = results.loc[metric]
        sign = 1.0 if t["method_a"] == best else -1.0  # pairs come in sorted order: orient as best - last
        lo, hi = sorted((sign * t["ci_low"], sign * t["ci_high"]))
        out[i] = dict(split=split, family=family, metric=metric, best=best, last=last,
                      mean_diff=sign * t["mean_diff"], ci_low=lo, ci_high=hi, test=t["test"],
                      p_value=t["p_value"], note=t["note"], unit=t["unit"], n_units=t["n_units"])
    return out
