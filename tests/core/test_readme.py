"""The README's quick start runs as written: every fenced code block under its "Quick start"
heading is executed, Python blocks in a fresh interpreter and the command-line blocks line by line,
from an empty scratch folder (the quick start writes the demo files it uses, as after ``pip install``
from any folder). Lines that install packages or start a server (pip, make, streamlit,
``analysis-core dashboard``) are the only ones skipped; a README without such blocks fails."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SKIPPED = ("pip ", "make ", "streamlit ", "python -m streamlit ", "analysis-core dashboard",
           "python -m analysis_core dashboard")  # installs and servers
CLI = ("analysis-core", "python -m analysis_core")


def quick_start_blocks(text: str) -> list[tuple[str, str, str]]:
    """(heading, language, code) of every fenced block in the "Quick start" section (from its
    ``##`` heading to the next ``##`` heading; its ``###`` subsections included)."""
    blocks, heading, inside = [], "", False
    for m in re.finditer(r"^(#{2,3}) ([^\n]+)$|^```(\w*)\n(.*?)^```$", text, re.M | re.S):
        if m.group(1):
            if m.group(1) == "##":
                inside = m.group(2).strip().lower().startswith("quick start")
            heading = m.group(2).strip()
        elif inside:
            blocks.append((heading, m.group(3), m.group(4)))
    return blocks


BLOCKS = quick_start_blocks(README.read_text(encoding="utf-8"))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    return tmp_path  # empty: no demo_data/ to lean on


def command_lines(code: str) -> list[str]:
    """The block's commands, comments dropped and continuation lines joined."""
    joined = re.sub(r"\\\n\s*", " ", code)
    return [line for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def to_argv(line: str) -> list[str] | None:
    """The argv that runs ``line`` with this interpreter, or None for a line that is skipped."""
    words = shlex.split(line, comments=True)
    text = " ".join(words)
    if text.startswith(SKIPPED):
        return None
    for prefix in CLI:
        if text.startswith(prefix):
            return [sys.executable, "-m", "analysis_core", *words[len(prefix.split()):]]
    raise AssertionError(f"the quick start runs a command this test does not know how to run: {line!r}")


def test_the_quick_start_has_a_python_block_and_command_line_blocks():
    langs = [lang for _, lang, _ in BLOCKS]
    assert "python" in langs and "bash" in langs, BLOCKS
    argvs = [a for _, lang, code in BLOCKS if lang == "bash" for a in map(to_argv, command_lines(code)) if a]
    assert {a[3] for a in argvs} >= {"demo", "check", "evaluate", "report"}


@pytest.mark.parametrize("heading,lang,code", [b for b in BLOCKS if b[1] == "python"],
                         ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "")
def test_python_block_runs(heading, lang, code, workdir):
    script = workdir / "block.py"
    script.write_text(code, encoding="utf-8")
    r = subprocess.run([sys.executable, str(script)], cwd=workdir, env=_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, f"the README's {heading} block failed:\n{r.stderr[-3000:]}"
    assert "expected=0.91666" in r.stdout  # its last line: the tie-aware AP of the documented example


@pytest.mark.slow
@pytest.mark.parametrize("heading,lang,code", [b for b in BLOCKS if b[1] == "bash"],
                         ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "")
def test_command_line_block_runs(heading, lang, code, workdir):
    for line in command_lines(code):
        argv = to_argv(line)
        if argv is None:
            continue
        r = subprocess.run(argv, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"the README's {heading} command {line!r} exited {r.returncode}:\n{r.stderr[-3000:]}"
    if heading == "Command line":  # what the text after the block promises
        assert not (workdir / "demo_data").exists()
        assert (workdir / "results" / "summary.json").is_file()
        assert (workdir / "results" / "per_query.parquet").is_file()
        assert (workdir / "report" / "tables" / "summary.tex").is_file()
