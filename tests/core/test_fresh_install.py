"""``pip install .`` with no extras, in a fresh virtual environment (no system site-packages), gives
a working command line for everything but figure export, which exits 2 naming its extra.

Slow (pip installs numpy, scipy, pandas, pyarrow, numba, plotly: about a minute here; measured in
the merge note) and needs the package index: marked ``install`` (deselect with -m 'not install')."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import analysis_core

pytestmark = pytest.mark.install

ROOT = Path(__file__).resolve().parents[2]
# what a clean clone holds: no virtual environments, caches or build output
IGNORE = shutil.ignore_patterns(".git", ".venv*", "__pycache__", "*.pyc", "build", "*.egg-info", ".pytest_cache",
                                ".hypothesis", ".ruff_cache", "artifacts", "out")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("fresh")
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)  # pip builds in the source tree: never in the checkout itself
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(src)],
                         capture_output=True, text=True, env=_env(), cwd=base)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return env_dir


def _env() -> dict[str, str]:
    """This environment without anything that would make the checkout or this venv importable."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(str(Path(sys.executable).parent)))
    return env


def _run(venv: Path, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "analysis-core"), *argv], capture_output=True, text=True, cwd=cwd,
                          env=_env())


def test_the_fresh_environment_has_no_extras(venv, tmp_path):
    probe = ("import importlib.util as u, json, analysis_core; print(json.dumps([analysis_core.__file__, "
             "[m for m in ('kaleido', 'choreographer', 'streamlit', 'distributed', 'faiss', 'statsmodels') "
             "if u.find_spec(m)]]))")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env=_env(), check=True)
    where, extras = json.loads(out.stdout)
    assert where.startswith(str(venv)) and extras == []


def test_version_check_and_evaluate_work(venv, tmp_path):
    version = _run(venv, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"embedding-retrieval-eval {analysis_core.__version__}"
    digits = ROOT / "demo_data" / "digits.npz"
    check = _run(venv, "check", str(digits), cwd=tmp_path)
    assert check.returncode == 0, check.stderr
    assert "usable" in check.stdout
    ev = _run(venv, "evaluate", str(digits), "--out", str(tmp_path / "out"), "--quiet", cwd=tmp_path)
    assert ev.returncode == 0, ev.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert set(summary["methods"]) == {"pixels", "pca16", "lda9"}
    assert summary["provenance"]["tool"]["version"] == analysis_core.__version__
    assert "kaleido" not in summary["provenance"]["packages"]
    assert (tmp_path / "out" / "per_query.parquet").is_file()


def test_report_exits_2_naming_the_export_extra_and_runs_without_figures(venv, tmp_path):
    digits = str(ROOT / "demo_data" / "digits.npz")
    run = _run(venv, "report", digits, "--out", str(tmp_path / "report"), cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "pip install 'embedding-retrieval-eval[export]'" in run.stderr
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr
    # everything but the figures: statistics, tables and the summary (no statsmodels, no faiss here)
    run = _run(venv, "report", digits, "--out", str(tmp_path / "tables"), "--format", "", "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "tables" / "tables" / "summary.tex").is_file()
    assert "provenance" in json.loads((tmp_path / "tables" / "summary.json").read_text())


def test_a_cluster_exits_2_naming_the_scale_extra(venv, tmp_path):
    run = _run(venv, "evaluate", str(ROOT / "demo_data" / "digits.npz"), "--workers", "1", "--quiet", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "pip install 'embedding-retrieval-eval[scale]'" in run.stderr
