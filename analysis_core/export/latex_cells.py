"""LaTeX cells shared by the report's tables: an interval, what follows a value (its half-width or
its bounds, as the interval is symmetric or not), a value with its sd, and the pivot of a long
metric table into one column per headline metric."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ..number_format import format_value


def interval_cell(lo: float, hi: float) -> str:
    return f"[{format_value(lo)}, {format_value(hi)}]"


def symmetric(v: float, lo: float, hi: float) -> bool:
    """Whether the interval [lo, hi] is v ± a half-width (up to rounding): else it is printed as
    its bounds (a Korn-Graubard interval, or one clipped to the metric's range)."""
    return abs((hi - v) - (v - lo)) <= 1e-9 * max(1.0, abs(v), hi - lo)


def interval_suffix(v: float, lo: float, hi: float, size: str = "") -> str:
    """LaTeX after a value: its interval as ``±half`` when symmetric, else its bounds, the upper
    as a superscript and the lower as a subscript (stacked: as narrow as one number, so the table
    keeps its width); nothing without a finite interval. A raw cell."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    if symmetric(v, lo, hi):
        return f"{{{size}$\\pm${format_value((hi - lo) / 2)}}}"
    return f"{{{size}$^{{{format_value(hi)}}}_{{{format_value(lo)}}}$}}"


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
