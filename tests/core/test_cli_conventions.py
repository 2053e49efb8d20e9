"""Command-line conventions: every command's help shows the defaults, examples and exit codes,
and an optional extra that is not installed exits 2 with the pip command (not an internal error)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "demo_data" / "digits.npz"
EXIT_LINES = ("0  success", "2  bad input", "3  the Dask cluster", "1  an internal error")


def _cli(*argv: str, pythonpath: str = str(ROOT), cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis_core", *argv], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": pythonpath, "PATH": "", "COLUMNS": "200"})


@pytest.mark.parametrize("command, defaults", [
    ((), ()),
    (("check",), ("(default: cosine)",)),
    (("evaluate",), ("(default: 1,2,4,8)", "(default: 512)", "(default: 0)", "(default: cosine)")),
    (("report",), ("(default: pdf)", "(default: double)", "(default: 0.05)", "(default: 10)", "(default: 300)")),
    (("demo",), ("(default: .)",)),
    (("dashboard",), ("(default: 8501)", "(default: 127.0.0.1)", "(default: 2000)")),
])
def test_help_shows_defaults_examples_and_exit_codes(command, defaults):
    run = _cli(*command, "--help")
    assert run.returncode == 0
    text = " ".join(run.stdout.split())  # argparse wraps help text: compare with single spaces
    for d in defaults:
        assert d in text
    assert "examples:" in run.stdout
    example = f"python -m analysis_core {command[0]} " if command else "python -m analysis_core check "
    assert example in run.stdout
    for line in EXIT_LINES:
        assert line in run.stdout


def test_every_documented_example_runs_from_an_empty_folder_after_its_demo_command():
    """The examples name demo files that an earlier example of the same help writes
    (``demo NAME``), so they run as printed from any folder after ``pip install``."""
    from analysis_core.demo import DEMOS

    demo_files = {f: name for name, d in DEMOS.items() for f in d.files}
    for command in ("", "check", "evaluate", "report", "demo", "dashboard"):
        text = _cli(*filter(None, [command]), "--help").stdout
        examples = text[text.index("examples"):].splitlines()
        written: set[str] = set()
        for line in examples:
            words = line.split()
            if words[2:4] and words[3] == "demo" and len(words) > 4 and words[4] in DEMOS:
                written.update(DEMOS[words[4]].files)
            for word in words:
                assert "demo_data/" not in word, (command, line)
                if word in demo_files:
                    assert word in written, f"{command} --help uses {word} before `demo {demo_files[word]}`"


def _shadow(tmp_path: Path, module: str) -> str:
    """A PYTHONPATH on which ``module`` is missing, as after a plain ``pip install .``."""
    (tmp_path / f"{module}.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{module}'\", name='{module}')\n")
    return f"{tmp_path}:{ROOT}"


@pytest.mark.parametrize("module", ["choreographer", "kaleido"])
def test_report_without_the_export_extra_exits_2_naming_it(tmp_path, module):
    run = _cli("report", str(DIGITS), "--out", str(tmp_path / "out"), pythonpath=_shadow(tmp_path, module))
    assert run.returncode == 2, run.stderr
    assert "pip install 'embedding-retrieval-eval[export]'" in run.stderr
    assert "internal error" not in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()  # refused before anything was computed or written


def test_a_cluster_without_dask_exits_2_with_the_pip_command(tmp_path):
    run = _cli("evaluate", str(DIGITS), "--workers", "1", "--quiet", pythonpath=_shadow(tmp_path, "distributed"))
    assert run.returncode == 2, run.stderr
    assert "pip install 'embedding-retrieval-eval[scale]'" in run.stderr and "-e" not in run.stderr.split()


def test_an_unknown_missing_module_is_still_reported_as_a_bug(tmp_path):
    """Only the extras' modules become exit 2: a missing required package is a broken install."""
    run = _cli("check", str(DIGITS), pythonpath=_shadow(tmp_path, "numpy"))
    assert run.returncode != 0 and "[export]" not in run.stderr
