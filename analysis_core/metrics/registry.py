"""One table of the summary metrics: what each is called in per_query.csv, in summary.json, on a
page, and whether it is a mean of graded per-query values or a hit rate (per query 0 or 1 unless
a tie block straddles the cutoff). Every output and every test per metric reads this table."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """A summary metric: ``column`` in the per-query table, ``key`` in ``summary.json`` (dotted
    for nested keys), ``label`` for tables and figures, ``kind`` ``"mean"`` or ``"hit"``."""

    name: str
    column: str
    key: str
    label: str
    kind: str


def summary_metrics(ks: tuple[int, ...] = (1, 2, 4, 8)) -> list[Metric]:
    """The summary metrics for cutoffs ``ks``, in reading order. Recall@1 is P@1 (a hit in the
    top 1) and is listed once, as P@1."""
    out = [Metric("map", "ap", "map.expected", "mAP", "mean"),
           Metric("map_at_r", "map_at_r", "map_at_r", "MAP@R", "mean"),
           Metric("r_precision", "r_precision", "r_precision", "R-Precision", "mean"),
           Metric("precision_at_1", "precision_at_1", "precision_at_1", "P@1", "hit"),
           Metric("mrr", "rr", "mrr", "MRR", "mean")]
    out += [Metric(f"recall_at_{k}", f"recall_at_{k}", f"recall_at_k.{k}", f"Recall@{k}", "hit")
            for k in sorted(set(ks)) if k != 1]
    return out
