"""The all-pairs evaluation engine (see :mod:`.core`).

numba caches the kernels' machine code beside their source (``__pycache__``), else in the user's
cache folder; when neither is writable (a read-only install run by a user without a writable
home) it refuses to compile a cached function at all. The cache then goes to a private folder of
the user's own (see :func:`_private_cache_dir`), chosen here, before numba is imported.
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
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
    os.environ["NUMBA_CACHE_DIR"] = _private_cache_dir()


def _private_cache_dir() -> str:
    """A cache folder only this user can write: numba unpickles its cache index, so a folder
    another user could write into (or had made beforehand, in a shared temporary directory)
    would let them run code as this user. The per-user runtime folder if there is one, else
    ``<tmp>/analysis_core-numba-<uid>`` made 0700 and used only if it is a real folder owned by
    this user that nobody else can enter; else a fresh private folder (no cache across runs)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and _private(runtime) and _writable(runtime):
        path = os.path.join(runtime, "analysis_core-numba")
        if _private(path, make=True):
            return path
    path = os.path.join(tempfile.gettempdir(), f"analysis_core-numba-{os.getuid()}")
    if _private(path, make=True):
        return path
    path = tempfile.mkdtemp(prefix="analysis_core-numba-")
    atexit.register(shutil.rmtree, path, ignore_errors=True)  # this process's alone: removed at its end
    return path


def _private(path: str, make: bool = False) -> bool:
    if make:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


_numba_cache_dir()
