"""Quantiles a report asks for over and over, each computed once per process."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)
def t_quantile(q: float, df: int) -> float:
    """``scipy.stats.t.ppf(q, df)`` as a float, once per (q, df): a report asks for the same few
    Student t quantiles about a thousand times (every interval of every metric, method, split and
    band), and scipy's distribution machinery costs about a millisecond a call. Same value: the
    product of this float and a float64 is the product with scipy's float64."""
    from scipy import stats

    return float(stats.t.ppf(q, df))
