"""Fixtures and markers shared by every test folder.

Markers (declared in pyproject.toml) say what a test needs beyond the Python packages; a test whose
need is missing on this machine is skipped with how to install it:

- ``browser``: Debian's chromium (figure export through kaleido, the real-browser tests);
- ``latex``: pdflatex with booktabs (the LaTeX tables are compiled);
- ``dask``: dask.distributed (clusters, scheduler addresses);
- ``r_oracle``: Rscript (R is the oracle of the ANOVA tables and the mixed models);
- ``slow``: over ~10 s on a 2-core machine; ``make test-fast`` leaves them out.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
import sys
from collections.abc import Callable

import numpy as np
import pytest

from .helpers import free_port as _free_port


@functools.cache
def _have_chromium() -> bool:
    from analysis_core.export.figures import chromium_path

    return chromium_path() is not None


#: marker -> (whether this machine has what it needs, the reason shown when it does not)
REQUIRES: dict[str, tuple[Callable[[], bool], str]] = {
    "browser": (_have_chromium, "Debian's chromium is missing (make test installs it as root)"),
    "latex": (lambda: shutil.which("pdflatex") is not None, "pdflatex missing (make test installs texlive)"),
    "dask": (lambda: importlib.util.find_spec("distributed") is not None,
             "dask.distributed missing (pip install '.[scale]')"),
    "r_oracle": (lambda: shutil.which("Rscript") is not None,
                 "Rscript is not installed: R is the oracle here (make system-deps installs it as root)"),
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    have = {name: functools.cache(check) for name, (check, _) in REQUIRES.items()}
    for item in items:
        for name, (_, why) in REQUIRES.items():
            if item.get_closest_marker(name) is not None and not have[name]():
                item.add_marker(pytest.mark.skip(reason=why))
        if _shares_a_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__ if item.module else item.nodeid))


def _shares_a_fixture(item: pytest.Item) -> bool:
    """Whether the test uses a module-, class- or package-scoped fixture (a streamlit server, a
    browser, an evaluation made once for the file). ``make test``'s ``--dist loadgroup`` keeps the
    tests of such a file in one worker, so the fixture is made once, not once in every worker;
    every other test goes to whichever worker is free. Session fixtures are made per worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    return any(d.scope in ("module", "class", "package") for defs in info.name2fixturedefs.values() for d in defs)


def compile_kernels() -> None:
    """Run every numba kernel variant once on a few items: both precisions, every phase-2 kernel,
    leave-one-out and query/gallery roles, per-query pair histograms, the hit-rates-only pass.
    numba compiles (or loads from its on-disk cache) each signature at its first call."""
    from analysis_core.engine.core import KERNELS, PRECISIONS, run_pass

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 6)
    X = rng.standard_normal((y.size, 3)).astype(np.float32)
    q = np.arange(y.size) % 3 != 0
    for precision in PRECISIONS:
        for kernel in KERNELS:
            run_pass(X, y, kernel=kernel, precision=precision, n_threads=1)
            run_pass(X, y, is_query=q, is_gallery=~q, kernel=kernel, precision=precision, n_threads=1)
        run_pass(X, y, precision=precision, per_query_pairs=True, n_threads=1)
        run_pass(X, y, precision=precision, hit_rates_only=True, n_threads=1)


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels() -> None:
    """The kernels compiled once per session, before the first test: a cold compile (40-120 s on
    2 cores without numba's on-disk cache) is then the session's set-up, not the time of whichever
    test happens to run first; from the cache it is a load of a few seconds. Skipped when no
    collected test module imported the engine (a session of import-graph or packaging tests)."""
    if "analysis_core.engine.core" in sys.modules:
        compile_kernels()


@pytest.fixture
def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on."""
    return _free_port()
