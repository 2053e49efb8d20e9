"""Generalization gap: metrics per split and their reference - other differences; the grouped
recall difference gets an interval ``+- t_{1-alpha/2, nu} sqrt(se_1^2 + se_2^2)`` (independent
splits; each split's standard error over its groups, unclipped; nu by Welch-Satterthwaite from the
splits' G - 1 degrees of freedom). Undefined (NaN) when neither split's groups vary: a spread of
zero over a handful of groups is no evidence of a precise mean. With the class unit the per-query
metrics (Recall@1, MAP@R, mAP) get the same interval from each split's jackknife over classes
(:mod:`.class_jackknife`: its standard error and G - 1 df); ``unit`` and ``n_units`` (the units of
every split of the row together) name what each row's intervals rest on.
"""

from __future__ import annotations

import math

import pandas as pd

from ..errors import InputError
from ..options import check_alpha
from .grouped_recall import GroupedRecall
from .quantiles import t_quantile

JACKKNIFED = {"recall_at_1": "recall_at_1", "map_at_r": "map_at_r", "map": "map"}  # row -> jackknife metric


def generalization_gap(per_split: dict[str, dict], grouped: dict[str, GroupedRecall], reference: str,
                       alpha: float = 0.05, jackknives: dict | None = None) -> pd.DataFrame:
    """Rows per metric: each split's value and ``reference - split`` for every other split.

    ``per_split[split]`` holds recall_at_1, map_at_r, map, jsd, mean_pos_similarity;
    ``grouped[split]`` the grouped recall of that split (its interval feeds the difference's);
    ``jackknives[split]``: that split's :class:`~.class_jackknife.ClassJackknife` of the method
    (one method), for class-unit intervals of the per-query metrics.
    """
    check_alpha(alpha)
    known = sorted(per_split)
    if reference not in per_split:
        raise InputError("generalization gap", f"unknown reference split '{reference}'.", f"use one of {known}.")
    rows = []
    others = [s for s in per_split if s != reference]
    def value(metric: str, s: str) -> float:
        if metric == "grouped_recall_at_1":
            return float(grouped[s].table.iloc[0]["mean"])
        return float(per_split[s][metric])

    ses = {}
    if jackknives:
        for sp, jk in jackknives.items():
            iv = jk.intervals(alpha).set_index("metric")
            ses[sp] = {m: (float(iv.loc[m, "se"]), jk.n_units) for m in JACKKNIFED.values() if m in iv.index}
    for metric in ("recall_at_1", "grouped_recall_at_1", "map_at_r", "map", "jsd", "mean_pos_similarity"):
        row = {"metric": metric, **{s: value(metric, s) for s in per_split}}
        unit, n_units = "", 0
        for o in others:
            gap = value(metric, reference) - value(metric, o)
            row[f"gap_{reference}_minus_{o}"] = gap
            half = math.nan
            if metric == "grouped_recall_at_1":
                parts = [grouped[s].table.iloc[0] for s in (reference, o)]
                half = _difference_half_width([(float(r["se"]), int(r["n_groups"])) for r in parts], alpha)
                unit = "group of classes"
                n_units = sum(int(grouped[s].table.iloc[0]["n_groups"]) for s in per_split)
            elif metric in JACKKNIFED and all(JACKKNIFED[metric] in ses.get(s, {}) for s in (reference, o)):
                parts = [ses[s][JACKKNIFED[metric]] for s in (reference, o)]
                half = _difference_half_width(parts, alpha)
                unit = "class"
                n_units = sum(ses[s][JACKKNIFED[metric]][1] for s in per_split if JACKKNIFED[metric] in ses.get(s, {}))
            if metric == "grouped_recall_at_1" or metric in JACKKNIFED and jackknives:
                row[f"gap_{reference}_minus_{o}_ci_low"] = gap - half
                row[f"gap_{reference}_minus_{o}_ci_high"] = gap + half
        row["unit"], row["n_units"] = unit, n_units if unit else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def _difference_half_width(parts: list[tuple[float, int]], alpha: float) -> float:
    """Half-width of the interval of a difference of two independent estimates, each given as
    (standard error, units it rests on, with units - 1 df): Welch-Satterthwaite degrees of
    freedom; NaN if undefined."""
    se = [float(s) for s, _ in parts]
    df = [int(n) - 1 for _, n in parts]
    if min(df) < 1:
        return math.nan
    v = [s * s for s in se]
    if not all(math.isfinite(x) for x in v) or sum(v) == 0.0:
        return math.nan
    # Welch-Satterthwaite is scale-free: the variances relative to the largest, so that tiny
    # ones (squares below 1e-308) do not underflow to a zero denominator
    top = max(v)
    w = [x / top for x in v]
    nu = sum(w) ** 2 / sum(x * x / d for x, d in zip(w, df, strict=True) if x > 0)
    return t_quantile(1 - alpha / 2, nu) * math.sqrt(sum(v))


def split_generalization(split_evals: dict, method: str, reference: str, alpha: float = 0.05,
                         unit: str = "class", seed: int = 0) -> pd.DataFrame:
    """:func:`generalization_gap` of one method from per-split evaluations (split -> Evaluation
    evaluated with a group size, so each carries its grouped recall); with ``unit="class"`` the
    per-query metrics get intervals from each split's jackknife over classes."""
    per = {}
    unknown = [sp for sp, e in split_evals.items() if method not in e.methods]
    if unknown:
        known = next(iter(split_evals.values())).methods if split_evals else []
        raise InputError("generalization gap", f"no method '{method}' in split(s) {unknown}.",
                         f"choose one of {known[:10]}.")
    missing = [sp for sp, e in split_evals.items() if e.grouped is None or method not in e.grouped]
    if missing:
        raise InputError("generalization gap", f"split(s) {missing} were evaluated without grouped recall.",
                         "evaluate every split with a group size (group_size=..., --group-size).")
    for sp, e in split_evals.items():
        s = e.method_summary(method)
        per[sp] = s | {"recall_at_1": s["recall_at_k"]["1"], "map": s["map"]["expected"]}
    jks = None
    if unit == "class":
        jks = {sp: e.class_jackknife(seed=seed) for sp, e in split_evals.items()}
        jks = {sp: _one_method(jk, method) for sp, jk in jks.items() if not jk.why}
        if len(jks) < len(split_evals):
            jks = None  # a split without class-level inference: no class interval for any gap
    return generalization_gap(per, {sp: e.grouped[method] for sp, e in split_evals.items()}, reference, alpha, jks)


def _one_method(jk, method: str):
    """``jk`` restricted to ``method``."""
    from dataclasses import replace

    i = jk.methods.index(method)
    return replace(jk, methods=[method], estimate=jk.estimate[i:i + 1], replicates=jk.replicates[:, i:i + 1],
                   n_scored=jk.n_scored[i:i + 1])
