"""Optional parts of the package and the extra that installs each: a missing one is an
:class:`~analysis_core.errors.InputError` (the command line exits 2) that gives the pip command,
never an internal error.

``pip install embedding-retrieval-eval`` alone evaluates, checks and writes reports' tables;
figure export needs the ``export`` extra (kaleido, which drives Chromium), a Dask cluster the
``scale`` extra, a UMAP embedding map the ``map`` extra (umap-learn)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from .errors import InputError

DISTRIBUTION = "embedding-retrieval-eval"

#: extra -> (what it adds, the modules it provides, the option that needs it)
EXTRAS = {
    "export": ("figure export (PDF, SVG, PNG)", ("kaleido", "choreographer"),
               "or export no figures (report --format '')"),
    "scale": ("Dask clusters (--workers, --scheduler)", ("distributed",),
              "or leave out --workers / --scheduler (the same results in this process)"),
    "dashboard": ("the browser dashboard", ("streamlit", "kaleido"), ""),
    "map": ("UMAP embedding maps (the dashboard's Embedding map page)", ("umap",), "or use the PCA map"),
    "bench": ("exact top-k search with faiss (analysis_core.engine.topk.top_k)", ("faiss",),
              "or use query_neighbours, which needs no index"),
}


def install_command(extra: str) -> str:
    """The pip command that installs ``extra``, e.g. ``pip install 'embedding-retrieval-eval[export]'``."""
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def require(extra: str) -> list[ModuleType]:
    """Import the modules of ``extra``, or raise :class:`InputError` naming the extra to install."""
    modules = EXTRAS[extra][1]
    try:
        return [importlib.import_module(m) for m in modules]
    except ImportError as exc:
        raise _missing(extra, getattr(exc, "name", None) or str(exc)) from None


def require_installed(extra: str) -> None:
    """Like :func:`require`, without importing the modules (another process will run them)."""
    missing = next((m for m in EXTRAS[extra][1] if importlib.util.find_spec(m) is None), None)
    if missing is not None:
        raise _missing(extra, missing)


def _missing(extra: str, module: str) -> InputError:
    what, _, otherwise = EXTRAS[extra]
    return InputError(what, f"needs the optional package '{module}', which is not installed.",
                      f"install the '{extra}' extra: {install_command(extra)} (from a checkout: pip install "
                      f"'.[{extra}]')" + (f", {otherwise}." if otherwise else "."))
