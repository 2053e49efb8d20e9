"""numba's compiled code, loaded once per process in a thread of its own.

numba's first call in a process costs ~0.5-0.9 s (its import, its type and target registries,
the cached machine code). A pass starts the loading before its NumPy set-up and waits for it
after (:func:`~.core.run_pass`); the command line's ``evaluate`` starts it before it reads the
input, and tells numba not to probe for BLAS (see :func:`load`). This module imports numba only
in that thread, and the pass imports the compiled modules (:mod:`.phases`, :mod:`.query_metrics`)
only after its set-up's NumPy work: importing them earlier made the calling thread wait on
numba's import lock instead of working meanwhile (measured 0.04-0.08 s of a 0.6-1.6 s
``evaluate``).
"""

from __future__ import annotations

import sys
import threading

_thread: threading.Thread | None = None
_lock = threading.Lock()


def start(*, probe_blas: bool = True) -> threading.Thread:
    """The thread running :func:`load`, started by the first call in this process (later calls
    return it; join it before calling a kernel to wait for the loading)."""
    global _thread
    with _lock:
        if _thread is None:
            _thread = threading.Thread(target=_load_quietly, args=(probe_blas,), daemon=True, name="numba-start")
            _thread.start()
        return _thread


def load(probe_blas: bool = True) -> None:
    """Import the kernels and load one small kernel's cached machine code, with the argument types
    the pass uses: numba's one-time start.

    ``probe_blas=False`` (the command line: a process running no numba code but this package's)
    keeps numba's start from importing scipy.linalg (~0.2-0.4 s) only to learn whether its
    ``np.correlate`` / ``np.convolve`` may call BLAS: they then use numba's own loop. No kernel here
    calls them, and ``np.dot`` inside numba still checks for BLAS when it is compiled."""
    import numpy as np

    if not probe_blas and "numba.np.arraymath" not in sys.modules:
        import numba.np.linalg as linalg

        probe = linalg.ensure_blas
        linalg.ensure_blas = _not_probed  # arraymath probes once, at import, through this name
        try:
            import numba.np.arraymath  # noqa: F401
        finally:
            linalg.ensure_blas = probe
    from .positives import distinct_thresholds

    distinct_thresholds(np.zeros(1, np.float32), np.zeros(0, np.int64), np.array([0, 1], np.int64))


def _load_quietly(probe_blas: bool) -> None:
    """:func:`load` in the thread, its failure silent: the pass's first kernel call then loads
    (or compiles) the code itself and reports any error where the user sees it."""
    try:
        load(probe_blas)
    except Exception:  # noqa: BLE001 - repeated, and reported, by the pass's own first call
        pass


def _not_probed() -> None:
    raise ImportError("BLAS not probed (analysis_core.engine.compiled.load(probe_blas=False))")
