"""Fixed costs: the command line's help and ``check`` do not load the statistics stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy.stats", "pandas", "statsmodels", "plotly", "numba")

PROBE = """
import contextlib, io, json, sys
from analysis_core.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:])
    except SystemExit:
        pass
print(json.dumps(sorted(m for m in {heavy} if m in sys.modules)))
"""


@pytest.mark.parametrize("argv", [["--help"], ["check", str(ROOT / "demo_data" / "digits.npz")]])
def test_help_and_check_do_not_import_the_statistics_stack(argv):
    out = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *argv], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_public_names_still_import_from_the_package():
    import analysis_core
    from analysis_core import Dataset, InputError, evaluate

    assert evaluate.__module__ == "analysis_core.api" and Dataset.__module__ == "analysis_core.io.dataset"
    assert issubclass(InputError, Exception)
    assert set(analysis_core.__all__) <= set(dir(analysis_core))
    with pytest.raises(AttributeError):
        analysis_core.no_such_name  # noqa: B018


def test_evaluating_arrays_does_not_import_the_statistics_or_plotting_stack():
    """A training loop calling ``evaluate(X, y).to_dict()`` every few epochs pays for the engine
    only: no scipy.stats, pandas, statsmodels or plotly."""
    probe = ("import json, sys, numpy as np\nfrom analysis_core import evaluate\n"
             "ev = evaluate(np.random.default_rng(0).standard_normal((40, 4)), np.arange(40) % 4)\n"
             "assert ev.to_dict()['methods']['embeddings']['map']['expected'] > 0\n"
             f"print(json.dumps(sorted(m for m in {HEAVY[:-1]} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


@pytest.mark.slow
def test_the_command_line_starts_numba_without_importing_scipy_linalg_and_numba_keeps_its_blas(tmp_path):
    """``evaluate`` on the command line loads numba's code while it reads the input, and keeps
    numba from importing scipy.linalg to probe for BLAS (a few tenths of a second of the start):
    the outputs are written, scipy.linalg is not imported; numba's own ``np.dot`` still finds
    BLAS afterwards (the probe is skipped for ``np.correlate`` / ``np.convolve`` only)."""
    probe = f"""
import contextlib, io, json, sys
import numpy as np
from analysis_core.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["evaluate", {str(ROOT / "demo_data" / "digits.npz")!r}, "--quiet", "--out", {str(tmp_path)!r}])
linalg = "scipy.linalg" in sys.modules
from numba import njit
dot = njit(lambda a, b: np.dot(a, b))(np.ones(3), np.ones(3))
print(json.dumps([code, linalg, float(dot)]))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [0, False, 3.0]
    assert (tmp_path / "summary.json").is_file()


def test_a_pass_in_a_library_process_leaves_numbas_blas_probe_alone():
    """Outside the command line (a notebook, the dashboard) numba probes for BLAS as usual."""
    probe = ("import numpy as np\nfrom analysis_core.engine.core import run_pass\n"
             "run_pass(np.eye(6, dtype=np.float32), np.arange(6) % 2)\n"
             "import numba.np.arraymath as a\nprint(a._HAVE_BLAS)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert out.stdout.strip().splitlines()[-1] == "True"


def test_importing_the_evaluation_and_the_engines_set_up_imports_no_numba():
    """The pass imports its compiled modules when it runs (after :func:`.setup.prepare`'s NumPy
    work), not when the evaluation is imported: otherwise the caller's thread waits on numba's
    import lock while numba's start runs in its own thread, instead of laying out the data. This
    checks the import half: the evaluation, the engine's entry point, its set-up and plan load no
    numba module."""
    probe = ("import json, sys\nimport analysis_core.evaluation, analysis_core.engine.core, "
             "analysis_core.engine.setup, analysis_core.engine.plan\n"
             "print(json.dumps(sorted(m for m in sys.modules if m == 'numba' or m.startswith('numba.'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""}, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
