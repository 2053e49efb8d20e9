"""Generalization gap: metrics per split and their reference - other differences; the grouped
recall difference gets an interval ``+- z sqrt(se_1^2 + se_2^2)`` (independent splits).
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from .grouped_recall import GroupedRecall


def generalization_gap(per_split: dict[str, dict], grouped: dict[str, GroupedRecall], reference: str,
                       alpha: float = 0.05) -> pd.DataFrame:
    """Rows per metric: each split's value and ``reference - split`` for every other split.

    ``per_split[split]`` holds recall_at_1, map_at_r, map, jsd, mean_pos_similarity;
    ``grouped[split]`` the grouped recall of that split (its interval feeds the difference's).
    """
    z = stats.norm.ppf(1 - alpha / 2)
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
                se = [(grouped[s].table.iloc[0]["ci_high"] - grouped[s].table.iloc[0]["mean"]) / z
                      for s in (reference, o)]
                half = z * math.sqrt(se[0] ** 2 + se[1] ** 2)
                row[f"gap_{reference}_minus_{o}_ci_low"] = gap - half
                row[f"gap_{reference}_minus_{o}_ci_high"] = gap + half
        rows.append(row)
    return pd.DataFrame(rows)


def split_generalization(split_evals: dict, method: str, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`generalization_gap` of one method from per-split evaluations (split -> Evaluation
    evaluated with a group size, so each carries its grouped recall)."""
    per = {}
    for sp, e in split_evals.items():
        s = e.method_summary(method)
        per[sp] = s | {"recall_at_1": s["recall_at_k"]["1"], "map": s["map"]["expected"]}
    return generalization_gap(per, {sp: e.grouped[method] for sp, e in split_evals.items()}, reference, alpha)
