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

    assert evaluate.__module__ == "analysis_core.api" and Dataset.__module__ == "analysis_core.io"
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
