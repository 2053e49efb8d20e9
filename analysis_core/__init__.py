"""Tie-aware, deterministic evaluation of embedding retrieval and its variability (no UI imports)."""

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

__all__ = ["APResult", "Dataset", "Evaluation", "InputError", "average_precision", "evaluate", "hit_at_k", "load",
           "load_bytes", "load_files", "map_at_r", "pr_curve", "precision_at_k", "r_precision", "reciprocal_rank"]
__version__ = "0.1.0"
