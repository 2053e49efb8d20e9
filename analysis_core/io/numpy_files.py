""".npy and .npz files, read without unpickling (``allow_pickle=False``; object arrays refused
from their header) and without allocating what a header merely declares: every declared size is
checked against the file's real size and a memory limit first; a ``.npy`` on disk is memory-mapped."""

from __future__ import annotations

import io
import math
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ..errors import InputError
from .checks import OPTIONAL_COLUMNS
from .sniffing import Input


def _available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable, else free pages)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def default_max_bytes() -> int:
    """The default limit on the arrays one file may declare: half the memory available now (the
    evaluation needs about as much again for its own copies), or 8 GiB where that is unknown."""
    avail = _available_memory()
    return avail // 2 if avail else 8 << 30


def _size(n: int) -> str:
    for unit, b in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= b:
            return f"{n / b:.1f} {unit}"
    return f"{n} bytes"


def _npy_header(f, name: str, what: str) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header length) of a .npy stream, read without touching the data."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = np.lib.format.read_array_header_1_0(f)
        else:  # 2.0 and 3.0 differ only in the header's text encoding
            shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        return tuple(int(x) for x in shape), dtype, f.tell()
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        raise InputError(name, f"array '{what}' has an unreadable .npy header ({exc}).",
                         "re-save it with numpy.save / numpy.savez.") from exc


def npy_holds_labels(inp: Input) -> bool:
    """A .npy whose header (read without the data) declares one value per item: 1-D, or one
    column of integers, booleans or text. An unreadable header is left to the reader's message."""
    try:
        with inp.open() as f:
            shape, dtype, _ = _npy_header(f, inp.name, "labels")
    except InputError:
        return False
    return len(shape) == 1 or (len(shape) == 2 and shape[1] == 1 and dtype.kind in "biuUS")


def _check_declared(name: str, what: str, shape: tuple[int, ...], dtype: np.dtype, available: int,
                    limit: int | None, already: int = 0) -> int:
    """Refuse before allocating: object arrays, a header claiming more data than the file holds, and
    arrays larger than ``limit`` bytes (together with ``already`` declared by the same file)."""
    if dtype.hasobject:
        raise InputError(name, f"array '{what}' is an object array, which can only be read by unpickling; refused.",
                         f"save '{what}' as a numeric or string array (np.asarray(x, dtype=float/str)).")
    declared = math.prod(shape) * dtype.itemsize
    desc = f"shape {shape}, dtype {dtype}, {_size(declared)}"
    if declared > available:
        raise InputError(name, f"array '{what}' declares {desc}, but the file holds only {_size(available)} of data: "
                         "it is truncated or corrupt.", "re-save it with numpy.save / numpy.savez and load it again.")
    if limit is not None and already + declared > limit:
        raise InputError(name, f"array '{what}' declares {desc}, over the limit of {_size(limit)} for one file "
                         "(default: half the memory available).",
                         "check the array's shape; if it is right, pass a larger max_bytes= to load/load_files "
                         "or free memory.")
    return declared


def read_npy(inp: Input, what: str, max_bytes: int | None) -> np.ndarray:
    """A .npy file, memory-mapped when it is on disk, else read after its header was checked."""
    with inp.open() as f:
        shape, dtype, offset = _npy_header(f, inp.name, what)
    on_disk = inp.path is not None  # memory-mapped: nothing is allocated, only the size is checked
    limit = None if on_disk else (default_max_bytes() if max_bytes is None else max_bytes)
    _check_declared(inp.name, what, shape, dtype, inp.size - offset, limit)
    try:
        if inp.path is not None:
            return np.load(inp.path, mmap_mode="r", allow_pickle=False)
        return np.load(io.BytesIO(inp.data), allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(inp.name, f"not a readable NumPy file ({exc}).", "re-save it with numpy.save.") from exc


def read_npz(inp: Input, method: str | None, max_bytes: int | None) -> tuple[dict, dict]:
    """The arrays of an .npz: every used member's header is checked (object dtype, declared size
    against the member's real size and against ``max_bytes``) before any array is allocated."""
    name = inp.name
    try:
        zf = zipfile.ZipFile(inp.open())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(name, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                         "re-save the file with numpy.savez and load it again.") from exc
    with zf:
        members = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}
        keys = list(members)
        emb_keys = [k for k in keys if k == "embeddings" or k.startswith("embeddings_")]
        if not emb_keys:
            raise InputError(name, f"no 'embeddings' array (found: {', '.join(keys) or 'nothing'}).",
                             "store vectors as 'embeddings' or 'embeddings_<method>'.")
        if "labels" not in keys:
            raise InputError(name, f"no 'labels' array (found: {', '.join(keys)}).",
                             "store one label per row as 'labels'.")
        conf_keys = [k for k in keys if k.startswith("confidence_")]
        used = [*emb_keys, "labels", *(c for c in OPTIONAL_COLUMNS if c in keys), *conf_keys]
        limit = default_max_bytes() if max_bytes is None else max_bytes
        total = 0
        try:
            for k in used:
                info = zf.getinfo(members[k])
                with zf.open(info) as f:
                    shape, dtype, offset = _npy_header(f, name, k)
                total += _check_declared(name, k, shape, dtype, info.file_size - offset, limit, total)
            arrays = {}
            for k in used:
                with zf.open(members[k]) as f:
                    arrays[k] = np.lib.format.read_array(f, allow_pickle=False)
        except InputError:
            raise
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
            raise InputError(name, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                             "re-save the file with numpy.savez and load it again.") from exc
    embs = {((method or Path(name).stem) if k == "embeddings" else k[len("embeddings_"):]): arrays[k]
            for k in emb_keys}
    cols: dict[str, object] = {c: arrays[c] for c in ("labels", *OPTIONAL_COLUMNS) if c in arrays}
    own = {k[len("confidence_"):]: arrays[k] for k in conf_keys}
    unknown = sorted(set(own) - set(embs))
    if unknown:
        raise InputError(name, f"confidence_<method> arrays for methods it does not hold: {unknown} "
                         f"(methods: {sorted(embs)}).", "name each confidence_<method> after an embeddings_<method>.")
    if own:
        cols["method_confidence"] = own
    return embs, cols
