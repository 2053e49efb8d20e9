"""Corrections for testing several hypotheses at once (used by the paired method tests and the
class jackknife's differences).

Holm, S. (1979). A simple sequentially rejective multiple test procedure. Scandinavian Journal of
Statistics, 6(2), 65-70."""

from __future__ import annotations

import numpy as np
import pandas as pd


def holm(p: pd.Series) -> pd.Series:
    """Holm-adjusted p-values over the defined (non-NaN) ones: the i-th smallest of m times
    ``m - i + 1``, made monotone by a running maximum, capped at 1. The same arithmetic as
    statsmodels' ``multipletests(method="holm")``, whose every call also runs a full
    ``gc.collect()`` (0.1-0.5 s each in a process holding many objects; a report makes hundreds)."""
    out = pd.Series(np.nan, index=p.index)
    ok = p.notna()
    if ok.any():
        out[ok] = holm_adjust(p[ok].to_numpy(np.float64))
    return out


def holm_adjust(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted ``p`` (no NaN), in the order given."""
    p = np.asarray(p, np.float64)
    order = np.argsort(p)
    adjusted = np.maximum.accumulate(p[order] * np.arange(p.size, 0, -1))
    adjusted[adjusted > 1] = 1
    out = np.empty_like(adjusted)
    out[order] = adjusted
    return out
