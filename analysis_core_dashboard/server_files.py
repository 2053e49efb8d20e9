"""Files the server can read: an optional data directory (``DASHBOARD_DATA_DIR``, off by default)
whose files the sidebar offers as a dataset and a link opens by name (``?files=a.npz,b.npz``). A
session opened without naming data in its link opens on the files ``DASHBOARD_OPEN_FILES`` names
(comma-separated, as ``files=``; ``analysis-core dashboard FILE...`` sets both).

Names are paths relative to the directory, written with ``/``. A name is used only when it is one
the directory lists: no absolute path, no ``..``, nothing a symbolic link leads outside the
directory, only the loaders' file types. The files go through the same loaders and the same
server upload budget as an upload.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from analysis_core import InputError
from analysis_core.io.readers import READERS
from analysis_core.methods import natural_key
from analysis_core.serve import DATA_DIR_ENV, OPEN_ENV
from analysis_core_dashboard import uploads

ENV = DATA_DIR_ENV
SUFFIXES = (*READERS, ".txt")  # the loaders' files, and a labels file
MAX_LISTED = 5_000  # a directory of a million files is not a picker


def root() -> Path | None:
    """The data directory, or None when none is configured (or it is not a directory)."""
    value = os.environ.get(ENV)
    if not value:
        return None
    path = Path(value).expanduser().resolve()
    return path if path.is_dir() else None


def opened() -> list[str]:
    """The files a session opens on when its link names no data (``DASHBOARD_OPEN_FILES``)."""
    return [n for n in os.environ.get(OPEN_ENV, "").split(",") if n]


def listing(base: Path) -> list[str]:
    """The loadable files under ``base`` (relative names, natural order; names holding a comma are
    left out — a link separates names by commas — and so is anything outside ``base``)."""
    names: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for f in filenames:
            if f.startswith(".") or "," in f or not f.lower().endswith(SUFFIXES):
                continue
            path = Path(dirpath) / f
            if _inside(base, path):
                names.append(path.relative_to(base).as_posix())
            if len(names) >= MAX_LISTED:
                return sorted(names, key=natural_key)
    return sorted(names, key=natural_key)


def _inside(base: Path, path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(base) and path.is_file()
    except OSError:
        return False


def valid(base: Path, name: str) -> bool:
    """Whether ``name`` (from a link: anything) is a loadable file of the directory."""
    if not name or "\0" in name or "\\" in name or "," in name or name.startswith("/"):
        return False
    parts = name.split("/")
    if any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        return False
    return name.lower().endswith(SUFFIXES) and _inside(base, base.joinpath(*parts))


def digest(base: Path, names: list[str]) -> str:
    """A cache key of the files: their names, sizes and modification times (the bytes are read
    only when the dataset is not stored; a rewritten file gets a new key)."""
    h = hashlib.blake2b(digest_size=16)
    for name in names:
        st = (base / name).stat()
        h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return "dir-" + h.hexdigest()


def read(base: Path, names: list[str]) -> list[tuple[str, bytes]]:
    """The files' names and bytes; refused before reading when they are larger together than the
    server's upload budget."""
    size = sum((base / n).stat().st_size for n in names)
    if size > uploads.LEDGER.budget:
        raise InputError(", ".join(names), f"these files hold {size / uploads.MiB:,.0f} MiB, more than the server's "
                         f"upload budget of {uploads.LEDGER.budget / uploads.MiB:,.0f} MiB.",
                         f"pick fewer files, or start the server with {uploads.ENV}=<MiB>.")
    return [(n, (base / n).read_bytes()) for n in names]
