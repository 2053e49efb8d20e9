"""``analysis-core dashboard``: the browser dashboard started with its settings, from any folder,
for an installed or an editable copy.

The settings go on Streamlit's command line (a ``.streamlit/config.toml`` applies only in the folder
the server is started from): this machine only unless told otherwise, an upload cap, no error
details in the browser, no usage statistics, no browser opened. The app is found with
``importlib.util.find_spec`` and run by ``python -m streamlit run`` (on POSIX in place of this
process, so that the server gets the signals and no orphan is left): the core imports neither
Streamlit nor the app. Files given on the command line become the app's data directory
(``DASHBOARD_DATA_DIR``) and the dataset it opens on (``DASHBOARD_OPEN_FILES``, read by
``analysis_core_dashboard.server_files``).
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from .errors import InputError
from .extras import require_installed

APP_PACKAGE = "analysis_core_dashboard"
DATA_DIR_ENV = "DASHBOARD_DATA_DIR"  # the app's data directory (analysis_core_dashboard.server_files.ENV)
OPEN_ENV = "DASHBOARD_OPEN_FILES"  # its files the app opens on (analysis_core_dashboard.server_files.OPEN_ENV)
LOCAL = "127.0.0.1"
PORT = 8501
UPLOAD_MB = 2000
#: what never changes: no browser opened, no usage statistics sent (no outside request), no
#: tracebacks (server paths) in the browser: the app logs unexpected errors with an id
FIXED = {"server.headless": "true", "browser.gatherUsageStats": "false", "client.showErrorDetails": "none"}


def app_path() -> Path:
    """The app's ``app.py``, wherever the package is installed (not imported)."""
    spec = importlib.util.find_spec(APP_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    app = next((Path(p) / "app.py" for p in locations if (Path(p) / "app.py").is_file()), None)
    if app is None:
        raise InputError(APP_PACKAGE, "the dashboard's app is not installed.",
                         "reinstall the package: pip install --force-reinstall 'embedding-retrieval-eval[dashboard]'.")
    return app


def is_local(address: str) -> bool:
    return address == "localhost" or ipaddress.ip_address(address).is_loopback


def check_address(address: str) -> str:
    if address == "localhost":
        return address
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise InputError(f"--address {address}", "is not an IP address.",
                         f"give one, e.g. {LOCAL} (this machine only, the default) or 0.0.0.0 (every interface).") \
            from None
    return address


def check_port_free(address: str, port: int) -> None:
    """Refuse a port another server holds now (Streamlit would stop with a traceback-like log)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as exc:
            problem = (f"port {port} is in use." if exc.errno == errno.EADDRINUSE
                       else f"cannot listen there ({exc.strerror or exc}).")
            raise InputError(f"--address {address} --port {port}", problem,
                             "choose another --port (or stop the server using it).") from None


def data_files(files: Sequence[str]) -> dict[str, str]:
    """The environment that opens the app on ``files`` (one folder's files): its data directory
    and the names it opens."""
    if not files:
        return {}
    from .io.readers import READERS

    paths = [Path(f).expanduser().resolve() for f in files]
    for given, p in zip(files, paths, strict=True):
        if not p.is_file():
            from .demo import missing_file_fix

            raise InputError(given, "no such file." if not p.exists() else "is not a file.",
                             missing_file_fix(given) or "check the path.")
        if p.suffix.lower() not in (*READERS, ".txt"):
            raise InputError(given, f"the dashboard does not read {p.suffix or 'files without a suffix'}.",
                             f"give {', '.join((*READERS, '.txt'))} files.")
        if "," in p.name or p.name.startswith("."):
            raise InputError(given, "the dashboard opens no file whose name holds a comma or starts with a dot.",
                             "rename the file.")
    folders = {p.parent for p in paths}
    if len(folders) > 1:
        raise InputError(", ".join(files), "the files are in different folders; the dashboard serves one folder.",
                         "put them in one folder (its other files are offered in the sidebar too).")
    return {DATA_DIR_ENV: str(folders.pop()), OPEN_ENV: ",".join(dict.fromkeys(p.name for p in paths))}


def command(app: Path, address: str, port: int, upload_mb: int) -> list[str]:
    """The ``streamlit run`` command line with every setting."""
    settings = {"server.address": address, "server.port": str(port), "server.maxUploadSize": str(upload_mb),
                **FIXED}
    return [sys.executable, "-m", "streamlit", "run", str(app), *[a for k, v in settings.items()
                                                                   for a in (f"--{k}", v)]]


def run(files: Sequence[str] = (), *, address: str = LOCAL, port: int = PORT, upload_mb: int = UPLOAD_MB) -> int:
    """Start the dashboard: on POSIX this process becomes the server (Ctrl+C stops it), else it
    waits for it; the server's exit code."""
    require_installed("dashboard")
    address = check_address(address)
    env = {**os.environ, **data_files(files)}
    app = app_path()
    check_port_free(address, port)
    if not is_local(address):
        sys.stderr.write(f"warning: listening on {address}: anyone who can reach this machine on port {port} can "
                         "use the dashboard and upload files (it has no login). Leave out --address to serve this "
                         "machine only.\n")
    host = f"[{address}]" if ":" in address else address
    shown = LOCAL if address in ("0.0.0.0", "::") else host
    sys.stderr.write(f"dashboard: http://{shown}:{port} (Ctrl+C stops it)\n")
    sys.stderr.flush()
    argv = command(app, address, port, upload_mb)
    if os.name == "posix":  # the server replaces this process: its signals, its exit code, no orphan
        os.execve(argv[0], argv, env)
    with subprocess.Popen(argv, env=env) as proc:
        try:
            return proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            raise
