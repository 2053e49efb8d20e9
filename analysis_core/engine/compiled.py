"""numba's compiled code, loaded once per process in a thread of its own.

numba's first call in a process costs ~0.5-0.9 s (its import, its type and target registries,
the cached machine code). A pass starts the loading before its NumPy set-up and waits for it
after (:func:`~.core.run_pass`); the command line's ``evaluate`` starts it before it reads the
input, and tells numba not to probe for BLAS (see :func:`load`). This module imports numba only
in that thread, and the pass imports the compiled modules (:mod:`.phases`, :mod:`.query_metrics`)
only after its set-up's NumPy work: importing them earlier made the calling thread wait on
numba's import lock instead of working meanwhile (measured 0.04-0.08 s of a 0.6-1.6 s
``evaluate``).

A first run (numba's cache cold: a fresh install) compiles the pass's kernels, ~20 s of one core;
the loading thread then compiles them on two cores (:func:`_compile_on_two_cores`).
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
    if distinct_thresholds.stats.cache_misses:  # compiled, not loaded: numba's cache is cold (a first run)
        _compile_on_two_cores()


#: a pass's kernels (module, function) in the order a float32 pass first calls them, with that
#: call's argument types (:func:`_signatures`), for a first run's compilation on two cores
#: (``evaluate``'s passes count the class jackknife: :func:`.ranking.rank_tile_runs` and
#: :func:`.replicates.replicate_sums`; passes without it, e.g. the class-count sweep's, rank_tile)
HELPER_SHARE = (("ranking", "rank_tile_runs"), ("replicates", "replicate_sums"))
OWN_SHARE = (("row_order", "permute_rows"), ("positives", "collect_positive_scores"), ("binning", "bin_tile"),
             ("query_metrics", "query_metrics"), ("query_metrics", "leading_blocks"), ("replicates", "_fold"),
             ("ranking", "rank_tile"))


def _compile_on_two_cores() -> None:
    """A first run compiles the kernels into numba's on-disk cache, ~20 s on one core: a helper
    process compiles the largest (the pass then loads it from the cache) while this thread compiles
    the others; the pass waits for both (it joins this thread). Failures are silent: what is not
    cached is compiled by the pass as before."""
    import os
    import subprocess

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    if cores < 2:
        return
    helper = subprocess.Popen([sys.executable, "-m", __name__, *[":".join(k) for k in HELPER_SHARE]],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    compile_kernels(OWN_SHARE)
    try:
        helper.wait(timeout=600)
    except subprocess.TimeoutExpired:
        helper.kill()


def compile_kernels(kernels) -> None:
    """Compile (or load from the cache) each kernel for its pass's argument types."""
    import importlib

    signatures = _signatures()
    for module, name in kernels:
        try:
            getattr(importlib.import_module(f"{__package__}.{module}"), name).compile(signatures[module, name])
        except Exception:  # noqa: BLE001 - a kernel whose arguments changed: the pass compiles it
            pass


def _signatures() -> dict[tuple[str, str], tuple]:
    from numba import types

    f4, f8, i8, b = types.float32, types.float64, types.int64, types.boolean
    v = {d: d[::1] for d in (f4, f8, i8, types.int32, types.uint8)}  # 1-d C arrays
    return {
        ("row_order", "permute_rows"): (f4[:, ::1], v[i8]),
        ("positives", "collect_positive_scores"): (f4[:, ::1], i8, i8, b, v[i8], v[i8], v[types.uint8],
                                                   v[types.uint8], *[v[i8]] * 5, v[f4], v[i8]),
        ("binning", "bin_tile"): (f4[:, ::1], i8, i8, b, v[i8], i8[:, :, ::1], f8, f8, v[f8], v[types.int32]),
        ("ranking", "rank_tile"): (f4[:, ::1], i8, i8, b, v[i8], v[types.uint8], v[types.uint8], v[i8], v[f4],
                                   v[i8], v[f4], v[types.int32], v[types.int32], v[f4], v[f4], i8),
        ("ranking", "rank_tile_runs"): (f4[:, ::1], i8, i8, b, v[i8], v[types.uint8], v[types.uint8], v[i8], v[f4],
                                        v[i8], v[f4], types.int32[:, ::1], types.int32[:, ::1], v[f4], v[f4], i8,
                                        i8[:, ::1], i8[:, ::1]),
        ("replicates", "replicate_sums"): (v[i8], v[i8], types.int32[:, ::1], types.int32[:, ::1], *[v[i8]] * 4,
                                           f8[:, :, ::1], i8[:, ::1], v[i8]),
        ("replicates", "_fold"): (f8[:, :, ::1], i8[:, ::1], f8[:, :, ::1], i8[:, ::1]),
        ("query_metrics", "query_metrics"): (v[i8], v[f4], *[v[i8]] * 5, i8, b, f8[:, ::1], f8[:, ::1]),
        ("query_metrics", "leading_blocks"): (*[v[i8]] * 4, i8, v[i8], *[v[types.int32]] * 3, b),
    }


def _load_quietly(probe_blas: bool) -> None:
    """:func:`load` in the thread, its failure silent: the pass's first kernel call then loads
    (or compiles) the code itself and reports any error where the user sees it."""
    try:
        load(probe_blas)
    except Exception:  # noqa: BLE001 - repeated, and reported, by the pass's own first call
        pass


def _not_probed() -> None:
    raise ImportError("BLAS not probed (analysis_core.engine.compiled.load(probe_blas=False))")


if __name__ == "__main__":  # the helper of _compile_on_two_cores: module:function ...
    compile_kernels([tuple(a.split(":")) for a in sys.argv[1:]])
