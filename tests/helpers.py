"""What several test modules share: the command-line runner, a small valid input file, a free port,
and the LaTeX checks of the tables (fixtures over them: tests/conftest.py)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

from analysis_core.number_format import is_p_column

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``python -m analysis_core *args`` in a fresh process on this checkout (output captured)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "analysis_core", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=300)


def good_npz(tmp_path: Path, n: int = 60, name: str = "good.npz") -> Path:
    """A valid .npz: ``n`` random 4-d float32 vectors in 3 classes."""
    rng = np.random.default_rng(0)
    p = tmp_path / name
    np.savez(p, embeddings=rng.standard_normal((n, 4)).astype(np.float32), labels=rng.integers(0, 3, n))
    return p


def zip_bomb(declared_bytes: int, d: int = 1000) -> bytes:
    """An .npz whose float32 ``embeddings`` member holds ``declared_bytes`` of zeros (rows of ``d``),
    deflated at the highest level (~1 000 : 1), beside a small ``labels`` member: a few MB that
    inflate to what they declare. Written in blocks, never whole in memory."""
    import io
    import zipfile

    n = declared_bytes // (4 * d)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        with z.open("embeddings.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, {"descr": "<f4", "fortran_order": False, "shape": (n, d)})
            block, left = bytes(64 << 20), n * d * 4
            while left:
                f.write(block[:min(left, len(block))])
                left -= min(left, len(block))
        labels = io.BytesIO()
        np.save(labels, np.arange(n) % 2)
        z.writestr("labels.npy", labels.getvalue())
    return out.getvalue()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked: the OS's choice of port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: a p-value cell of a LaTeX table: floored, scientific, or plain
P_CELL = re.compile(r"^(\$<10\^\{-12\}\$|\$[1-9]\.\d\d\\times10\^\{-\d+\}\$|0\.\d+|1|--)$")


def compile_two_column(texs: list[Path], tmp: Path, packages: tuple[str, ...] = ("booktabs",)) -> str:
    """pdflatex on every file in a two-column article; returns the log (asserting success)."""
    doc = tmp / "doc.tex"
    doc.write_text("\\documentclass[twocolumn]{article}\n" + "".join(f"\\usepackage{{{p}}}\n" for p in packages)
                   + "\\begin{document}\n" + "\n".join(f"\\input{{{t.with_suffix('')}}}\n\\clearpage" for t in texs)
                   + "\n\\end{document}\n")
    r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:]
    return (tmp / "doc.log").read_text(errors="replace")


def p_cells(tex: str) -> list[str]:
    """The cells of every p-value column (header "p" or "p ...") of a booktabs table."""
    cells = []
    for block in tex.split(r"\toprule")[1:]:
        head, body = block.split(r"\midrule", 1)
        header = [h.strip() for h in head.replace(r"\\", "").split("&")]
        header = [h.replace("\\_", "_") for h in header]
        idx = [i for i, h in enumerate(header) if re.match(r"^p( |$)", h) or is_p_column(h)]
        for line in body.split(r"\bottomrule")[0].strip().splitlines():
            row = [c.strip() for c in line.removesuffix(r"\\").split(" & ")]
            cells += [row[i] for i in idx]
    return cells


def listening(port: int) -> set[str]:
    """The local addresses of the sockets listening on TCP ``port`` (from /proc/net, as ``ss -ltn``)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            address, hex_port = local.split(":")
            if state != "0A" or int(hex_port, 16) != port:
                continue
            raw = bytes.fromhex(address)
            if width == 8:
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def serves_localhost_with_settings(proc: subprocess.Popen, port: int, log: Path, upload_mb: int) -> None:
    """``analysis-core dashboard --port port --upload-mb upload_mb`` (``proc``, its output in ``log``)
    answers HTTP 200 on 127.0.0.1, listens there only, and runs streamlit with every setting."""
    import time
    import urllib.request

    status, deadline = None, time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as r:
                status = r.status
                break
        except OSError:
            time.sleep(0.5)
    assert status == 200, log.read_text()[-3000:]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
        assert r.read() == b"ok"
    assert listening(port) == {"127.0.0.1"}  # no 0.0.0.0, no ::
    # the launcher became the server (exec): its command line holds every setting
    argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode().split("\0")
    settings = dict(zip(argv, argv[1:], strict=False))
    assert argv[1:4] == ["-m", "streamlit", "run"] and argv[4].endswith("analysis_core_dashboard/app.py")
    assert settings["--server.address"] == "127.0.0.1" and settings["--server.port"] == str(port)
    assert settings["--server.maxUploadSize"] == str(upload_mb)
    assert settings["--client.showErrorDetails"] == "none"
    assert settings["--browser.gatherUsageStats"] == "false" and settings["--server.headless"] == "true"


def said_only_local(output: str, port: int) -> None:
    """The server's output names its local URL, no network URL and no usage statistics."""
    assert f"http://127.0.0.1:{port}" in output
    assert "Network URL" not in output and "External URL" not in output, output
    assert "usage statistics" not in output.lower(), output
