"""Statistics over the per-query tables of an evaluation: variability across classes and methods,
method comparisons, bands, grouped recall, sweeps, histograms.

``from analysis_core.stats import analyse`` runs the variability statistics in one call. Names are
imported on first use (PEP 562), so importing the package loads no statistics stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .analysis import VariabilityAnalysis, analyse, prepare

_LAZY = {"analyse": ".analysis", "prepare": ".analysis", "VariabilityAnalysis": ".analysis"}
__all__ = ["VariabilityAnalysis", "analyse", "prepare"]


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
