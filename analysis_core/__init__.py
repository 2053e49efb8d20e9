"""Tie-aware, deterministic evaluation of embedding retrieval and its variability (no UI imports)."""

from .api import evaluate, load
from .errors import InputError
from .evaluation import Evaluation
from .io import Dataset, load_bytes, load_files

__all__ = ["Dataset", "Evaluation", "InputError", "evaluate", "load", "load_bytes", "load_files"]
__version__ = "0.1.0"
