"""No dead code: vulture (min confidence 60, pyproject.toml ``[tool.vulture]``) finds nothing unused
in analysis_core and dashboard; names used only from outside its view are listed, each with why,
in vulture_whitelist.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARGS = ["analysis_core", "analysis_core_dashboard", "vulture_whitelist.py", "--min-confidence", "60"]


def _vulture(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    pytest.importorskip("vulture")
    return subprocess.run([sys.executable, "-m", "vulture", *args], capture_output=True, text=True, cwd=cwd)


def test_vulture_finds_nothing_unused():
    out = _vulture(*ARGS)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_the_plain_command_reads_the_same_settings():
    """``python -m vulture`` alone (pyproject.toml's paths and confidence) is what the test runs."""
    out = _vulture()
    assert (out.returncode, out.stdout) == (0, "")


def test_vulture_would_see_an_unused_function(tmp_path):
    (tmp_path / "m.py").write_text("def used():\n    return 1\n\n\ndef unused():\n    return 2\n\n\nused()\n")
    out = _vulture("m.py", "--min-confidence", "60", cwd=tmp_path)
    assert out.returncode == 3 and "unused function 'unused'" in out.stdout and "'used'" not in out.stdout
