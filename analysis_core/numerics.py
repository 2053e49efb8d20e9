"""Arithmetic shared by every layer: means that do not depend on the order of their terms."""

from __future__ import annotations

import math

import numpy as np


def fsum_mean(x: np.ndarray) -> float:
    """Mean with an exactly rounded sum (math.fsum): independent of the order of the queries."""
    x = np.asarray(x, np.float64)
    return math.fsum(x.tolist()) / x.size if x.size else float("nan")
