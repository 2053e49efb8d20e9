"""Quantiles a report asks for over and over, each computed once per process, and the Student t
interval built on them."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np


@lru_cache(maxsize=1024)
def t_quantile(q: float, df: int) -> float:
    """``scipy.stats.t.ppf(q, df)`` as a float, once per (q, df): a report asks for the same few
    Student t quantiles about a thousand times (every interval of every metric, method, split and
    band), and scipy's distribution machinery costs about a millisecond a call. Same value: the
    product of this float and a float64 is the product with scipy's float64."""
    from scipy import stats

    return float(stats.t.ppf(q, df))


def t_half_width(values: np.ndarray, alpha: float) -> float:
    """Half-width of the Student t interval of the mean of the finite ``values`` at level
    ``1 - alpha``: ``t_{1-alpha/2, n-1} * sd / sqrt(n)``; NaN with fewer than two values."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if v.size < 2:
        return math.nan
    return float(t_quantile(1 - alpha / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
