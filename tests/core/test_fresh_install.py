"""``pip install .`` with no extras, in a fresh virtual environment (no system site-packages), gives
a working command line for everything but figure export, which exits 2 naming its extra; ``pip install
'.[dashboard]'`` (not editable) gives, from an empty folder, the demo data, the quick start and a
dashboard serving this machine only with its settings.

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


def _install(base: Path, extras: str = "") -> Path:
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=IGNORE)  # pip builds in the source tree: never in the checkout itself
    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                          f"{src}{extras}"], capture_output=True, text=True, env=_env(), cwd=base)
    assert pip.returncode == 0, pip.stderr[-3000:]
    return env_dir


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    return _install(tmp_path_factory.mktemp("fresh"))


@pytest.fixture(scope="module")
def dashboard_venv(tmp_path_factory) -> Path:
    return _install(tmp_path_factory.mktemp("fresh-dashboard"), "[dashboard]")


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


def test_the_dashboard_without_its_extra_exits_2_with_the_pip_command(venv, tmp_path):
    run = _run(venv, "dashboard", cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert "pip install 'embedding-retrieval-eval[dashboard]'" in run.stderr and "Traceback" not in run.stderr


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def test_the_quick_start_runs_in_an_empty_folder(dashboard_venv, tmp_path):
    listed = _run(dashboard_venv, "demo", cwd=tmp_path)
    assert listed.returncode == 0 and "digits.npz" in listed.stdout and "digits_runs_design.csv" in listed.stdout
    assert list(tmp_path.iterdir()) == []
    wrote = _run(dashboard_venv, "demo", "digits", "--out", ".", cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    assert (tmp_path / "digits.npz").read_bytes() == (ROOT / "demo_data" / "digits.npz").read_bytes()
    report = _run(dashboard_venv, "report", "digits.npz", "--out", "r", "--format", "", "--quiet", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "r" / "tables" / "summary.tex").is_file()
    runs = _run(dashboard_venv, "demo", "digits_runs", "--out", "runs", cwd=tmp_path)
    assert runs.returncode == 0 and (tmp_path / "runs" / "digits_runs_design.csv").is_file()
    missing = _run(dashboard_venv, "check", "demo_data/many_classes.npz", cwd=tmp_path)
    assert missing.returncode == 2 and "analysis-core demo many_classes --out demo_data" in missing.stderr


def test_the_distribution_installs_no_top_level_dashboard_and_ships_the_demo_data(dashboard_venv, tmp_path):
    site = _site_packages(dashboard_venv)
    assert not (site / "dashboard").exists()
    assert (site / "analysis_core_dashboard" / "app.py").is_file()
    from analysis_core.demo import DEMOS

    shipped = sorted(p.name for p in (site / "analysis_core" / "demo_data").iterdir())
    assert shipped == sorted(f for d in DEMOS.values() for f in d.files)  # the data, not the scripts
    probe = ("import json; from importlib.metadata import distribution as d; m = d('embedding-retrieval-eval')"
             ".metadata; print(json.dumps([m.get_all('Project-URL'), m['Description-Content-Type']]))")
    out = subprocess.run([str(dashboard_venv / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                         env=_env(), check=True, cwd=tmp_path)  # not the checkout: its egg-info would answer
    urls, content_type = json.loads(out.stdout)
    assert any(u.startswith("Repository, https://") for u in urls) and content_type == "text/markdown"


def test_the_installed_dashboard_serves_this_machine_only_with_its_settings(dashboard_venv, tmp_path):
    from tests.helpers import free_port, said_only_local, serves_localhost_with_settings

    port = free_port()
    log = tmp_path / "server.log"
    empty = tmp_path / "empty"
    empty.mkdir()
    with log.open("w") as out:
        proc = subprocess.Popen([str(dashboard_venv / "bin" / "analysis-core"), "dashboard", "--port", str(port),
                                 "--upload-mb", "9"], cwd=empty, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        serves_localhost_with_settings(proc, port, log, upload_mb=9)
        assert Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")[4].decode() == \
            str(_site_packages(dashboard_venv) / "analysis_core_dashboard" / "app.py")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    said_only_local(log.read_text(), port)
