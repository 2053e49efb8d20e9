"""Generalization gap: metrics per split and their reference - other differences; the grouped
recall difference gets an interval ``+- t_{1-alpha/2, nu} sqrt(se_1^2 + se_2^2)`` (independent
splits; each split's standard error over its groups, unclipped; nu by Welch-Satterthwaite from the
splits' G - 1 degrees of freedom). Undefined (NaN) when neither split's groups vary: a spread of
zero over a handful of groups is no evidence of a precise mean.
"""

from __future__ import annotations

import math

import pandas as pd

from ..errors import InputError
from ..options import check_alpha
from .grouped_recall import GroupedRecall
from .quantiles import t_quantile


def generalization_gap(per_split: dict[str, dict], grouped: dict[str, GroupedRecall], reference: str,
                       alpha: float = 0.05) -> pd.DataFrame:
    """Rows per metric: each split's value and ``reference - split`` for every other split.

    ``per_split[split]`` holds recall_at_1, map_at_r, map, jsd, mean_pos_similarity;
    ``grouped[split]`` the grouped recall of that split (its interval feeds the difference's).
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

    for metric in ("recall_at_1", "grouped_recall_at_1", "map_at_r", "map", "jsd", "mean_pos_similarity"):
        row = {"metric": metric, **{s: value(metric, s) for s in per_split}}
        for o in others:
            gap = value(metric, reference) - value(metric, o)
            row[f"gap_{reference}_minus_{o}"] = gap
            if metric == "grouped_recall_at_1":
                half = _difference_half_width([grouped[s].table.iloc[0] for s in (reference, o)], alpha)
                row[f"gap_{reference}_minus_{o}_ci_low"] = gap - half
                row[f"gap_{reference}_minus_{o}_ci_high"] = gap + half
        rows.append(row)
    return pd.DataFrame(rows)


def _difference_half_width(rows, alpha: float) -> float:
    """Half-width of the interval of a difference of two independent grouped recalls (their
    table rows: se, n_groups): Welch-Satterthwaite degrees of freedom; NaN if undefined."""
    se = [float(r["se"]) for r in rows]
    df = [int(r["n_groups"]) - 1 for r in rows]
    v = [s * s for s in se]
    if not all(math.isfinite(x) for x in v) or sum(v) == 0.0:
        return math.nan
    nu = sum(v) ** 2 / sum(x * x / d for x, d in zip(v, df, strict=True) if x > 0)
    return t_quantile(1 - alpha / 2, nu) * math.sqrt(sum(v))


def split_generalization(split_evals: dict, method: str, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`generalization_gap` of one method from per-split evaluations (split -> Evaluation
    evaluated with a group size, so each carries its grouped recall)."""
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
    return generalization_gap(per, {sp: e.grouped[method] for sp, e in split_evals.items()}, reference, alpha)
