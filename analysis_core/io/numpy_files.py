""".npy and .npz files, read without unpickling (``allow_pickle=False``; object arrays refused
from their header) and without allocating what a header merely declares: every declared size is
checked against the file's real size and a memory limit first; a ``.npy`` on disk is memory-mapped.

What a load may allocate is an :class:`Allowance`: each array's size is taken from it when its
header is read, before the array exists, so a load (every file of it together) never allocates
more than its limit — a small archive declaring gigabytes of zeros (a zip bomb) is refused
uninflated. An uncompressed array held in memory (an uploaded ``.npy``, an ``np.savez`` member) is
a read-only view of the uploaded bytes, not a copy of them."""

from __future__ import annotations

import io
import math
import os
import struct
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


def _npy_header(f, name: str, what: str) -> tuple[tuple[int, ...], np.dtype, int, bool]:
    """(shape, dtype, header length, Fortran order) of a .npy stream, read without touching the data."""
    try:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        else:  # 2.0 and 3.0 differ only in the header's text encoding
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        return tuple(int(x) for x in shape), dtype, f.tell(), bool(fortran)
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        raise InputError(name, f"array '{what}' has an unreadable .npy header ({exc}).",
                         "re-save it with numpy.save / numpy.savez.") from exc


def npy_holds_labels(inp: Input) -> bool:
    """A .npy whose header (read without the data) declares one value per item: 1-D, or one
    column of integers, booleans or text. An unreadable header is left to the reader's message."""
    try:
        with inp.open() as f:
            shape, dtype, _, _ = _npy_header(f, inp.name, "labels")
    except InputError:
        return False
    return len(shape) == 1 or (len(shape) == 2 and shape[1] == 1 and dtype.kind in "biuUS")


class OverBudget(InputError):
    """A load refused because the arrays it declares exceed what it may allocate."""


class Allowance:
    """What one load may allocate (``limit`` bytes; None = no limit), taken array by array from what
    each array's header declares, before the array is allocated. Taking the same array of the same
    file again is free, so a load can check every file's headers before it reads any of them and
    the readers check again. ``what`` names the limit and ``fix`` says how to raise it (the messages
    of a refusal); a server sharing one budget between sessions overrides :meth:`_grant`."""

    def __init__(self, limit: int | None, what: str = "what one load may allocate; default: half the memory "
                 "available", fix: str = "check the arrays' shapes; if they are right, pass a larger max_bytes= "
                 "to load/load_files or free memory.") -> None:
        self.limit, self.what, self.fix = limit, what, fix
        self.taken = 0
        self._arrays: set[tuple[str, str]] = set()

    def take(self, name: str, what: str, nbytes: int, desc: str, new: int | None = None) -> None:
        """Take ``nbytes`` for array ``what`` of file ``name`` (``desc``: its shape, dtype and size,
        for the message), or raise :class:`OverBudget` when that would exceed the limit. ``new``:
        the part of ``nbytes`` the read allocates (less when the array is a view of the file's bytes
        in memory; None: all of it), for a budget that counts those bytes already."""
        if (name, what) in self._arrays:
            return
        self._grant(name, what, nbytes, desc, nbytes if new is None else new)
        self._arrays.add((name, what))
        self.taken += nbytes

    def _grant(self, name: str, what: str, nbytes: int, desc: str, new: int) -> None:
        if self.limit is not None and self.taken + nbytes > self.limit:
            held = f" (with the {_size(self.taken)} of arrays before it)" if self.taken else ""
            raise OverBudget(name, f"array '{what}' declares {desc}{held}, over the limit of {_size(self.limit)} "
                             f"({self.what}).", self.fix)

    def release(self) -> None:
        """The load is over (what it allocated is now the dataset's, or freed)."""


def allowance(max_bytes: int | Allowance | None) -> Allowance:
    """``max_bytes`` as an :class:`Allowance`: a number of bytes, or None for :func:`default_max_bytes`."""
    if isinstance(max_bytes, Allowance):
        return max_bytes
    return Allowance(default_max_bytes() if max_bytes is None else max_bytes)


def held_bytes(what: str, shape: tuple[int, ...], dtype: np.dtype) -> int:
    """Bytes array ``what`` takes once read: its declared size, and for embeddings stored in another
    dtype than float32/float64 the float copy the loader makes of them as well (both exist at once)."""
    n = math.prod(shape)
    declared = n * dtype.itemsize
    if what.startswith("embeddings") and dtype not in (np.float32, np.float64):
        return declared + n * (8 if dtype.itemsize >= 8 else 4)
    return declared


def _check_declared(name: str, what: str, shape: tuple[int, ...], dtype: np.dtype, available: int,
                    budget: Allowance | None, view: bool = False) -> None:
    """Refuse before allocating: object arrays, a header claiming more data than the file holds, and
    arrays over what the load may still allocate (``budget``; None: memory-mapped, nothing allocated;
    ``view``: the array will be a view of the file's bytes in memory, so only a conversion allocates)."""
    if dtype.hasobject:
        raise InputError(name, f"array '{what}' is an object array, which can only be read by unpickling; refused.",
                         f"save '{what}' as a numeric or string array (np.asarray(x, dtype=float/str)).")
    declared = math.prod(shape) * dtype.itemsize
    desc = f"shape {shape}, dtype {dtype}, {_size(declared)}"
    if declared > available:
        raise InputError(name, f"array '{what}' declares {desc}, but the file holds only {_size(available)} of data: "
                         "it is truncated or corrupt.", "re-save it with numpy.save / numpy.savez and load it again.")
    if budget is not None:
        held = held_bytes(what, shape, dtype)
        budget.take(name, what, held, desc, held - declared if view else held)


def _viewable(offset: int, shape: tuple[int, ...], dtype: np.dtype, fortran: bool) -> bool:
    """Whether the array at ``offset`` of bytes in memory is kept as a view of them: :func:`_view`
    gives one (the bytes' start is aligned: CPython's bytes data are 16-byte aligned) and it is in
    C order (the dataset copies Fortran-ordered vectors to C order)."""
    return math.prod(shape) > 0 and dtype.itemsize > 0 and offset % dtype.alignment == 0 and not (
        fortran and len(shape) > 1)


def _view(buf: bytes, offset: int, shape: tuple[int, ...], dtype: np.dtype, fortran: bool) -> np.ndarray | None:
    """The array stored uncompressed at ``offset`` of ``buf`` as a read-only view (no copy), or None
    where a view does not fit: empty arrays, and data not aligned for the dtype (compiled kernels
    expect aligned arrays; the caller copies instead)."""
    n = math.prod(shape)
    if n == 0 or dtype.itemsize == 0 or offset + n * dtype.itemsize > len(buf):
        return None
    a = np.frombuffer(buf, dtype=dtype, count=n, offset=offset)
    return a.reshape(shape, order="F" if fortran else "C") if a.flags.aligned else None


def read_npy(inp: Input, what: str, budget: Allowance | None) -> np.ndarray:
    """A .npy file, memory-mapped when it is on disk, else (its header checked and its size taken
    from ``budget``) a read-only view of its bytes, or a copy where a view does not fit."""
    with inp.open() as f:
        shape, dtype, offset, fortran = _npy_header(f, inp.name, what)
    on_disk = inp.path is not None  # memory-mapped: nothing is allocated, only the size is checked
    _check_declared(inp.name, what, shape, dtype, inp.size - offset, None if on_disk else budget,
                    view=_viewable(offset, shape, dtype, fortran))
    try:
        if inp.path is not None:
            return np.load(inp.path, mmap_mode="r", allow_pickle=False)
        view = _view(inp.data, offset, shape, dtype, fortran)
        return view if view is not None else np.load(io.BytesIO(inp.data), allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise InputError(inp.name, f"not a readable NumPy file ({exc}).", "re-save it with numpy.save.") from exc


def _npz_used(zf: zipfile.ZipFile, name: str) -> tuple[dict[str, str], list[str], list[str], list[str]]:
    """(array name -> member, the embeddings arrays, every array read, the confidence_<method>
    arrays) of an open .npz; refused without embeddings or labels."""
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
    return members, emb_keys, used, conf_keys


_Header = tuple[tuple[int, ...], np.dtype, int, bool]  # shape, dtype, header length, Fortran order


def _npz_headers(zf: zipfile.ZipFile, name: str, members: dict[str, str], used: list[str],
                 budget: Allowance, buf: bytes | None) -> dict[str, _Header]:
    """Each used member's .npy header, checked (object dtype, declared size against the member's
    size) and its size taken from ``budget``: only a header's few bytes are inflated. A member is
    never inflated past the size the archive's directory gives it (``zipfile`` stops there), and
    the header's shape must fit in that size, so what is declared bounds what is inflated."""
    headers = {}
    for k in used:
        info = zf.getinfo(members[k])
        with zf.open(info) as f:
            headers[k] = _npy_header(f, name, k)
        shape, dtype, offset, fortran = headers[k]
        start = _stored_start(buf, info) if buf is not None else None
        _check_declared(name, k, shape, dtype, info.file_size - offset, budget,
                        view=start is not None and _viewable(start + offset, shape, dtype, fortran))
    return headers


def _stored_start(buf: bytes, info: zipfile.ZipInfo) -> int | None:
    """Where an uncompressed member's data start in the archive's bytes; None for a compressed or
    encrypted member, or a local header that is not where the directory says."""
    if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 1:
        return None
    local = buf[info.header_offset:info.header_offset + 30]
    if len(local) < 30 or local[:4] != b"PK\x03\x04":
        return None
    return info.header_offset + 30 + sum(struct.unpack("<HH", local[26:30]))  # after the name and extra field


def _stored_view(buf: bytes, info: zipfile.ZipInfo, header: _Header) -> np.ndarray | None:
    """An uncompressed member's array (``np.savez``) as a read-only view of the archive's bytes in
    memory, once its checksum matched; None for a compressed or encrypted member, a checksum that
    does not match (read through ``zipfile``, which says so) or data a view does not fit."""
    start = _stored_start(buf, info)
    if start is None:
        return None
    data = memoryview(buf)[start:start + info.file_size]
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        return None
    shape, dtype, offset, fortran = header
    return _view(buf, start + offset, shape, dtype, fortran)


def _npz_array(inp: Input, zf: zipfile.ZipFile, info: zipfile.ZipInfo, header: _Header) -> np.ndarray:
    view = _stored_view(inp.data, info, header) if inp.path is None else None
    if view is not None:
        return view
    with zf.open(info) as f:
        return np.lib.format.read_array(f, allow_pickle=False)


def declare(inp: Input, budget: Allowance) -> None:
    """Take from ``budget`` what ``inp`` (an .npz, or an .npy in memory) will allocate, from its
    headers alone: a load calls it for every file before reading any, so no file is inflated when
    the files together are over the limit. Other problems are left to the file's reader, whose
    message says what the file is."""
    try:
        if inp.suffix == ".npz":
            with zipfile.ZipFile(inp.open()) as zf:
                members, _, used, _ = _npz_used(zf, inp.name)
                _npz_headers(zf, inp.name, members, used, budget, inp.data if inp.path is None else None)
        elif inp.suffix == ".npy" and inp.path is None:
            with inp.open() as f:
                shape, dtype, offset, fortran = _npy_header(f, inp.name, "embeddings")
            _check_declared(inp.name, "embeddings", shape, dtype, inp.size - offset, budget,
                            view=_viewable(offset, shape, dtype, fortran))
    except OverBudget:
        raise
    except (InputError, zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError):
        pass


def read_npz(inp: Input, method: str | None, budget: Allowance) -> tuple[dict, dict]:
    """The arrays of an .npz: every used member's header is checked (object dtype, declared size
    against the member's real size) and its size taken from ``budget`` before any array is
    allocated; uncompressed members in memory are views of the archive's bytes."""
    name = inp.name
    try:
        zf = zipfile.ZipFile(inp.open())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(name, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                         "re-save the file with numpy.savez and load it again.") from exc
    with zf:
        members, emb_keys, used, conf_keys = _npz_used(zf, name)
        try:
            headers = _npz_headers(zf, name, members, used, budget, inp.data if inp.path is None else None)
            arrays = {k: _npz_array(inp, zf, zf.getinfo(members[k]), headers[k]) for k in used}
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
