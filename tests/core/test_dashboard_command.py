"""``analysis-core dashboard``: started from an empty folder (no ``.streamlit/config.toml`` in
sight) it listens on 127.0.0.1 only and answers HTTP 200, with the upload cap, no error details, no
usage statistics and headless mode on its command line; every refusal is a message and exit 2."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from analysis_core import cli, serve
from tests.helpers import free_port, listening, said_only_local, serves_localhost_with_settings

ROOT = Path(__file__).resolve().parents[2]


def test_the_address_parser_reads_this_processs_own_sockets():
    """The oracle of the socket test: a socket bound here is seen with its address."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert listening(s.getsockname()[1]) == {"127.0.0.1"}
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        assert listening(s.getsockname()[1]) == {"0.0.0.0"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STREAMLIT_", "DASHBOARD_"))}
    return {**env, "PYTHONPATH": str(ROOT)}


@pytest.mark.skipif(importlib.util.find_spec("streamlit") is None, reason="needs the dashboard extra (streamlit)")
def test_started_from_an_empty_folder_it_serves_localhost_only_with_its_settings(tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    empty = tmp_path / "empty"
    empty.mkdir()
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "analysis_core", "dashboard", "--port", str(port),
                                 "--upload-mb", "7"], cwd=empty, env=_env(), stdout=out, stderr=subprocess.STDOUT)
    try:
        serves_localhost_with_settings(proc, port, log, upload_mb=7)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    said_only_local(log.read_text(), port)
    assert list(empty.iterdir()) == []


def test_its_settings_are_the_clones_config_toml():
    """One set of settings: the command's, which the clone's .streamlit/config.toml repeats for a
    bare ``streamlit run`` from the clone's root (the browser tests)."""
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    flat = {f"{section}.{k}": v for section, values in cfg.items() for k, v in values.items()}
    argv = serve.command(Path("app.py"), serve.LOCAL, serve.PORT, serve.UPLOAD_MB)
    given = dict(zip(argv[5::2], argv[6::2], strict=True))
    assert {k.removeprefix("--"): v for k, v in given.items()} == \
        {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in {**flat, "server.port": serve.PORT}.items()}


class Started(BaseException):  # not caught by the command line's handlers
    pass


@pytest.fixture
def started(monkeypatch):
    """Run the command in this process up to the server's start: the command line it would exec."""
    seen = {}

    def execve(path, argv, env):
        seen.update(argv=argv, env=env)
        raise Started

    monkeypatch.setattr(serve.os, "execve", execve)
    return seen


def test_another_address_is_served_with_a_warning(started, capsys):
    with pytest.raises(Started):
        cli.main(["dashboard", "--address", "0.0.0.0", "--port", str(free_port())])
    assert "warning: listening on 0.0.0.0" in capsys.readouterr().err
    argv = started["argv"]
    assert argv[argv.index("--server.address") + 1] == "0.0.0.0"


def test_localhost_is_served_without_a_warning(started, capsys):
    with pytest.raises(Started):
        cli.main(["dashboard", "--port", str(free_port())])
    assert "warning" not in capsys.readouterr().err


def test_files_become_the_data_directory_and_what_the_app_opens(started, tmp_path):
    for f in ("a.npz", "b.npz"):
        (tmp_path / f).write_bytes(b"")
    with pytest.raises(Started):
        cli.main(["dashboard", str(tmp_path / "b.npz"), str(tmp_path / "a.npz"), "--port", str(free_port())])
    assert started["env"][serve.DATA_DIR_ENV] == str(tmp_path.resolve())
    assert started["env"][serve.OPEN_ENV] == "b.npz,a.npz"


@pytest.mark.parametrize("argv, message", [
    (["--address", "every"], "is not an IP address"),
    (["--port", "0"], "expected a port in 1-65535"),
    (["--upload-mb", "0"], "expected a positive integer"),
    (["digits.npz"], "analysis-core demo digits"),
    (["notes.md"], "does not read .md"),
    (["a/x.npz", "b/y.npz"], "different folders"),
])
def test_bad_options_and_files_exit_2_with_a_message(started, tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    for rel in ("notes.md", "a/x.npz", "b/y.npz"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_bytes(b"")
    try:
        code = cli.main(["dashboard", *argv])
    except SystemExit as exc:  # argparse's usage errors
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err
    assert not started


def test_a_port_in_use_exits_2(started, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert cli.main(["dashboard", "--port", str(s.getsockname()[1])]) == 2
    assert "is in use" in capsys.readouterr().err and not started


def test_without_streamlit_it_exits_2_with_the_pip_command(started, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "streamlit" else real(name, *a))
    assert cli.main(["dashboard"]) == 2
    err = capsys.readouterr().err
    assert "pip install 'embedding-retrieval-eval[dashboard]'" in err and not started


def test_the_app_is_found_where_it_is_installed():
    app = serve.app_path()
    assert app == ROOT / "analysis_core_dashboard" / "app.py"
