"""How numbers are printed, in one place: LaTeX tables, the dashboard's tables and CSV files.

- Metrics and other statistics: 4 decimals everywhere (scientific notation only for magnitudes
  below 1e-3 or from 1e5).
- p-values: 3 significant digits, scientific notation below 0.001, and a floor: below
  ``P_FLOOR`` a p-value is printed as "< 1e-12". Below it the digits are not reliable (tail
  probabilities computed as 1 - cdf lose everything under the double-precision epsilon, 2.2e-16,
  and libraries round tiny tails to exactly 0), and no decision depends on them. A p-value is
  never printed as 0. CSV files keep full floats, floored at ``P_FLOOR`` (read it as "at most").
"""

from __future__ import annotations

import math
import re

P_FLOOR = 1e-12
DECIMALS = 4
_P_NAME = re.compile(r"(^|_)p($|_)|^p-?value$", re.IGNORECASE)


def is_p_column(name: str) -> bool:
    """``p``, ``p_value``, ``p_adj``, ``spearman_p``, ``p_permutation_holm``, ..."""
    return bool(_P_NAME.search(str(name)))


def _finite(v) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _nonfinite(v) -> str:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return "--"
    return "--" if math.isnan(f) else ("inf" if f > 0 else "-inf")


def format_p(p) -> str:
    """A p-value as text: ``"< 1e-12"``, ``"3.2e-05"``, ``"0.0123"``, ``"1"``; ``"--"`` if undefined."""
    v = _finite(p)
    if v is None:
        return "--"
    if v < P_FLOOR:
        return f"< {P_FLOOR:.0e}"
    if v < 1e-3:
        return f"{v:.2e}"
    return f"{v:.3g}"


def format_p_tex(p) -> str:
    """A p-value for LaTeX: ``$<10^{-12}$``, ``$3.20\\times10^{-5}$``, ``0.0123``; ``--`` if undefined."""
    v = _finite(p)
    if v is None:
        return "--"
    if v < P_FLOOR:
        return rf"$<10^{{{int(round(math.log10(P_FLOOR)))}}}$"
    if v < 1e-3:
        mant, exp = f"{v:.2e}".split("e")
        return rf"${mant}\times10^{{{int(exp)}}}$"
    return f"{v:.3g}"


def format_value(v, decimals: int = DECIMALS) -> str:
    """A statistic as text: 4 decimals, scientific notation for magnitudes below 1e-3 or from 1e5."""
    f = _finite(v)
    if f is None:
        return _nonfinite(v)
    if f != 0 and (abs(f) < 1e-3 or abs(f) >= 1e5):
        return f"{f:.{decimals - 2}e}"
    return f"{f:.{decimals}f}"


def floor_p_columns(df):
    """A copy of ``df`` whose p-value columns are floored at ``P_FLOOR`` (NaN kept): what CSV
    files hold, so that no tiny p-value is written as 0."""
    from pandas.api.types import is_float_dtype

    out = df.copy()
    for c in out.columns:
        if is_p_column(c) and is_float_dtype(out[c]):
            out[c] = out[c].where(out[c].isna() | (out[c] >= P_FLOOR), P_FLOOR)
    return out


def display_formats(df) -> dict:
    """Per-column formatters for a table shown on a page: p-values by :func:`format_p`, other
    floats by :func:`format_value`."""
    from pandas.api.types import is_float_dtype

    return {c: (format_p if is_p_column(c) else format_value) for c in df.columns
            if is_float_dtype(df[c])}
