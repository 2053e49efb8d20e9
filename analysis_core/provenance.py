"""Where a result came from: the ``provenance`` block of ``summary.json`` (SPEC §5).

Tool and Python versions, the versions of the packages that decide the numbers, the options and
seeds, the precision, and every input file by its **name** with the SHA-256 of its bytes. No
absolute path and no folder is recorded: a shared ``summary.json`` says what was computed from
what, not where it sat on someone's disk.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from . import __version__
from .extras import DISTRIBUTION

#: distributions whose versions can change the numbers or the files (those installed are listed)
KEY_PACKAGES = ("numpy", "scipy", "pandas", "numba", "statsmodels", "pyarrow", "plotly", "kaleido")
_CHUNK = 1 << 20


def file_digest(path: str | os.PathLike) -> str:
    """SHA-256 of the file's bytes, read in 1 MiB chunks (an input of any size in constant memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def input_record(path: str | os.PathLike, role: str = "input") -> dict[str, Any]:
    """One input file: its name (no folder), size in bytes, SHA-256 and what it was used as."""
    p = Path(path)
    return {"name": p.name, "role": role, "bytes": p.stat().st_size, "sha256": file_digest(p)}


@functools.cache
def package_versions(names: tuple[str, ...] = KEY_PACKAGES) -> dict[str, str]:
    """Installed versions of ``names`` (distributions not installed are left out); looked up once
    per process (a training loop may evaluate every epoch)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _plain(value: Any) -> Any:
    """An option's value as JSON: tuples as lists, paths by name only, anything else as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return Path(value).name
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return str(value)


def provenance(*, command: str, options: Mapping[str, Any], inputs: Iterable[Mapping[str, Any]] = (),
               seed: int | None = None, precision: str | None = None) -> dict[str, Any]:
    """The ``provenance`` block. ``command``: ``evaluate`` / ``report`` (command line) or ``api``;
    ``options``: the settings used (paths must not be among them: inputs go in ``inputs``, made by
    :func:`input_record`); ``seed`` and ``precision`` also stand on their own."""
    return {
        "tool": {"name": DISTRIBUTION, "version": __version__},
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "packages": dict(package_versions()),
        "command": command,
        "options": {k: _plain(v) for k, v in options.items()},
        "seeds": {"seed": seed},
        "precision": precision,
        "inputs": [dict(i) for i in inputs],
    }
