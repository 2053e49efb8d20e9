"""Tie-aware, deterministic evaluation of embedding retrieval and its variability (no UI imports).

The public names are imported on first use (PEP 562 ``__getattr__``): ``python -m analysis_core
--help`` and ``check`` then never load the statistics stack (scipy.stats, pandas, statsmodels),
which alone took about a second.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .api import evaluate, load
    from .errors import InputError
    from .evaluation import Evaluation
    from .io import Dataset, load_bytes, load_files
    from .metrics.ranking import (
        APResult,
        average_precision,
        hit_at_k,
        map_at_r,
        pr_curve,
        precision_at_k,
        r_precision,
        reciprocal_rank,
    )

#: public name -> the module that defines it
_LAZY = {"InputError": ".errors", "Evaluation": ".evaluation", "evaluate": ".api", "load": ".api", "Dataset": ".io",
         "load_bytes": ".io", "load_files": ".io",
         **{n: ".metrics.ranking" for n in ("APResult", "average_precision", "hit_at_k", "map_at_r", "pr_curve",
                                            "precision_at_k", "r_precision", "reciprocal_rank")}}

__all__ = ["APResult", "Dataset", "Evaluation", "InputError", "average_precision", "evaluate", "hit_at_k", "load",
           "load_bytes", "load_files", "map_at_r", "pr_curve", "precision_at_k", "r_precision", "reciprocal_rank"]
__version__ = "0.2.0.dev0"


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'analysis_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
