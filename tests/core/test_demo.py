"""``analysis-core demo``: the bundled demo sets are listed, written into a folder byte for byte
(with their design tables), shipped by the distribution, and a missing demo file's message says how
to get it."""

from __future__ import annotations

import fnmatch
import subprocess
import sys
from pathlib import Path

import pytest

from analysis_core import demo

ROOT = Path(__file__).resolve().parents[2]


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis_core", *argv], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": "", "COLUMNS": "200"})


def test_the_listing_names_every_set_its_files_and_what_it_is(tmp_path):
    run = _cli("demo", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    for d in demo.DEMOS.values():
        line = next(ln for ln in lines if ln.startswith(d.name + " "))
        assert all(f in line for f in d.files) and d.description in line
    assert list(tmp_path.iterdir()) == []  # listing writes nothing


@pytest.mark.parametrize("name", list(demo.DEMOS))
def test_a_demo_set_is_written_byte_for_byte_into_the_folder(tmp_path, name):
    run = _cli("demo", name, "--out", "data/sub", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    written = sorted(p.name for p in (tmp_path / "data" / "sub").iterdir())
    assert written == sorted(demo.DEMOS[name].files)
    for f in written:
        assert (tmp_path / "data" / "sub" / f).read_bytes() == (ROOT / "demo_data" / f).read_bytes()


def test_the_runs_demo_comes_with_its_design_table_and_reports_from_it(tmp_path):
    assert _cli("demo", "digits_runs", cwd=tmp_path).returncode == 0
    run = _cli("check", "digits_runs.npz", "--design", "digits_runs_design.csv", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "triplet" in run.stdout


def test_the_default_folder_is_the_current_one(tmp_path):
    assert _cli("demo", "digits", cwd=tmp_path).returncode == 0
    assert (tmp_path / "digits.npz").is_file()


def test_an_unknown_set_or_an_unwritable_folder_exits_2_with_a_message(tmp_path):
    run = _cli("demo", "nope", cwd=tmp_path)
    assert run.returncode == 2 and "digits" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / "file").write_text("")
    run = _cli("demo", "digits", "--out", "file/x", cwd=tmp_path)
    assert run.returncode == 2 and "choose a writable --out folder" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize("path, command", [("digits.npz", "analysis-core demo digits`"),
                                           ("demo_data/digits.npz", "analysis-core demo digits --out demo_data`"),
                                           ("runs/digits_runs.npz", "analysis-core demo digits_runs --out runs`")])
def test_a_missing_demo_file_says_how_to_get_it(tmp_path, path, command):
    run = _cli("check", path, cwd=tmp_path)
    assert run.returncode == 2 and "no such file" in run.stderr and command in run.stderr, run.stderr
    run = _cli("check", "mine.npz", cwd=tmp_path)  # not a demo file: no demo hint
    assert run.returncode == 2 and "check the path" in run.stderr and "demo" not in run.stderr


def test_a_missing_demo_design_table_says_how_to_get_it(tmp_path):
    assert _cli("demo", "digits", cwd=tmp_path).returncode == 0
    run = _cli("check", "digits.npz", "--design", "digits_runs_design.csv", cwd=tmp_path)
    assert run.returncode == 2 and "analysis-core demo digits_runs`" in run.stderr, run.stderr


def test_every_demo_file_is_in_the_repository_and_in_the_distributions_package_data():
    """setup.py's package data patterns cover every demo file (a design table was once left out)."""
    import ast

    tree = ast.parse((ROOT / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    package_data = next(k.value for k in call.keywords if k.arg == "package_data")
    patterns = next(ast.literal_eval(v) for key, v in zip(package_data.keys, package_data.values, strict=True)
                    if isinstance(key, ast.Name) and key.id == "DEMO")
    for d in demo.DEMOS.values():
        for f in d.files:
            assert (ROOT / "demo_data" / f).is_file(), f
            assert any(fnmatch.fnmatch(f, p) for p in patterns), (f, patterns)
    assert demo.data_dir() == ROOT / "demo_data"  # from a checkout: the repository's folder
