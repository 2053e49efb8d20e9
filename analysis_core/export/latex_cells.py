"""LaTeX cells shared by the report's tables: an interval, a value with its half-width, a value
with its sd, and the pivot of a long metric table into one column per headline metric."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ..number_format import format_value


def interval_cell(lo: float, hi: float) -> str:
    return f"[{format_value(lo)}, {format_value(hi)}]"


def pm_cell(v: float, half: float | None, size: str = "") -> str:
    """LaTeX: the value and its half-width (a raw cell)."""
    if half is None or not math.isfinite(half):
        return format_value(v)
    return f"{format_value(v)}{{{size}$\\pm${format_value(half)}}}"


RUN_METRICS = ("map", "map_at_r", "r_precision", "precision_at_1")  # the run tables' LaTeX columns


def run_metric_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[df["metric"].isin(RUN_METRICS)]


def wide_by_metric(df: pd.DataFrame, keys: list[str],
                   cell: Callable[[pd.Series], str]) -> tuple[pd.DataFrame, list[str]]:
    """One row per ``keys``, one raw LaTeX column per run metric (``cell(row)``)."""
    part = run_metric_rows(df)
    metrics = [m for m in RUN_METRICS if m in set(part["metric"])]
    rows = []
    for key, g in part.groupby(keys, sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(keys, key, strict=True))
        by = g.set_index("metric")
        row |= {m: cell(by.loc[m]) if m in by.index else "--" for m in metrics}
        rows.append(row)
    return pd.DataFrame(rows), metrics


def mean_sd_cell(r: pd.Series) -> str:
    sd = r["sd"]
    return format_value(r["mean"]) + (rf"{{\scriptsize$\pm${format_value(sd)}}}" if math.isfinite(sd) else "")
