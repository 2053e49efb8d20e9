"""The all-pairs evaluation engine (see :mod:`.core`).

numba caches the kernels' machine code beside their source (``__pycache__``), else in the user's
cache folder; when neither is writable (a read-only install run by a user without a writable
home) it refuses to compile a cached function at all. The cache then goes to a folder of the
user's own under the temporary directory, chosen here, before numba is imported.
"""

from __future__ import annotations

import os
import sys
import tempfile


def _writable(path: str) -> bool:
    while not os.path.isdir(path):  # the nearest existing folder decides whether it can be made
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.access(path, os.W_OK | os.X_OK)


def _numba_cache_dir() -> None:
    if "NUMBA_CACHE_DIR" in os.environ or "numba" in sys.modules:
        return
    if _writable(os.path.join(os.path.dirname(__file__), "__pycache__")):
        return
    home = os.path.expanduser("~")
    if home != "~" and _writable(os.path.join(home, ".cache")):
        return  # numba's own fallback: the user's cache folder
    uid = os.getuid() if hasattr(os, "getuid") else 0
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(tempfile.gettempdir(), f"analysis_core-numba-{uid}")


_numba_cache_dir()
