"""What a file is, from its content, before anything is parsed: NumPy's .npy and .npz, Parquet,
and the kinds refused with how to convert them (pickles of every protocol, PyTorch, HDF5,
safetensors, images, gzip, other zip archives). Files are never unpickled."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path
from typing import BinaryIO

from ..errors import InputError

_BINARY_SUFFIXES = {"", ".npy", ".npz", ".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt", ".h5", ".hdf5",
                    ".safetensors", ".joblib"}
# opcodes a protocol 0/1 pickle can start with (protocol 2+ starts with PROTO, 0x80)
_PICKLE0_FIRST = frozenset(b"(c]})NILFSVJKMGUTX")
TO_NPZ = "numpy.savez('embeddings.npz', embeddings=X, labels=y)"
# what a sniffed file is, and how to convert it (every refusal names both)
_REFUSED_KINDS = {
    "pickle": ("is a Python pickle (pickle.dump, joblib, or torch.save in the legacy format); pickles can "
               "run code when loaded and are never read",
               f"save arrays instead: {TO_NPZ}, with X = tensor.detach().cpu().numpy() for a tensor; or "
               "CSV/Parquet."),
    "torch": ("is a PyTorch file (torch.save, zip format); it holds pickled objects and is never unpickled",
              "convert it in Python: numpy.savez('embeddings.npz', embeddings=tensor.detach().cpu().numpy(), "
              "labels=labels.numpy())."),
    "hdf5": ("is an HDF5 file (h5py, Keras, MATLAB v7.3), which is not read directly",
             "convert it: with h5py.File(path) as f: numpy.savez('embeddings.npz', "
             "embeddings=f['<vectors>'][()], labels=f['<labels>'][()])."),
    "safetensors": ("is a safetensors file, which is not read directly",
                    "convert it: from safetensors.numpy import load_file; t = load_file(path); "
                    "numpy.savez('embeddings.npz', embeddings=t['<name>'], labels=y)."),
    "png": ("is a PNG image, not an array file", f"save the vectors themselves: {TO_NPZ}."),
    "jpeg": ("is a JPEG image, not an array file", f"save the vectors themselves: {TO_NPZ}."),
    "gzip": ("is gzip-compressed", "decompress it first (gunzip), or save with numpy.savez_compressed."),
    "zip": ("is a zip archive but not a NumPy .npz (it holds no .npy arrays)", f"create it with {TO_NPZ}."),
}


class Input:
    """One input file: its name, and its bytes in memory (an upload) or its path on disk (read lazily,
    so a ``.npy`` can be memory-mapped and an ``.npz`` opened without reading it whole)."""

    def __init__(self, name: str, data: bytes | Path) -> None:
        self.name = name
        self.path = data if isinstance(data, Path) else None
        self.data = b"" if isinstance(data, Path) else data  # on disk: read through open() / read()
        self.size = data.stat().st_size if isinstance(data, Path) else len(data)
        self.suffix = Path(name).suffix.lower()

    def open(self) -> BinaryIO:
        return open(self.path, "rb") if self.path is not None else io.BytesIO(self.data)

    def read(self) -> bytes:
        return self.path.read_bytes() if self.path is not None else self.data

    def head(self, n: int) -> bytes:
        with self.open() as f:
            return f.read(n)

    def tail(self, n: int) -> bytes:
        with self.open() as f:
            f.seek(max(0, self.size - n))
            return f.read(n)


def _is_pickle0(inp: Input) -> bool:
    """A protocol 0/1 pickle: starts with a pickle opcode, ends with STOP, and parses as a stream of
    opcodes (pickletools reads opcodes without executing anything). Only asked of binary-suffixed
    files: CSV text can start with '(' or 'c' too."""
    if inp.head(1)[:1] not in {bytes([b]) for b in _PICKLE0_FIRST} or inp.tail(1) != b".":
        return False
    import pickletools

    try:
        with inp.open() as f:
            for _ in pickletools.genops(f):
                pass
    except Exception:  # noqa: BLE001 - anything unparsable is not a pickle
        return False
    return True


def sniff(inp: Input) -> str | None:
    """What the file is, from its content: npy, npz, parquet, a refused kind, ``corrupt_zip``, or None."""
    head = inp.head(16)
    if head.startswith(b"\x93NUMPY"):
        return "npy"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        try:
            with zipfile.ZipFile(inp.open()) as zf:
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError, EOFError):
            return "corrupt_zip"
        if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names):
            return "torch"
        # an .npz is a zip of .npy members; other members (a README, a directory entry) are ignored
        return "npz" if any(n.endswith(".npy") for n in names) else "zip"
    for magic, kind in ((b"\x89PNG\r\n\x1a\n", "png"), (b"\xff\xd8\xff", "jpeg"), (b"\x89HDF\r\n\x1a\n", "hdf5"),
                        (b"\x80", "pickle"), (b"PAR1", "parquet"), (b"\x1f\x8b", "gzip")):
        if head.startswith(magic):
            return kind
    if len(head) >= 10 and head[8:10] == b'{"' and 0 < int.from_bytes(head[:8], "little") <= inp.size - 8:
        return "safetensors"
    if inp.suffix in _BINARY_SUFFIXES and _is_pickle0(inp):
        return "pickle"
    return None


def refuse_kind(kind: str | None, name: str) -> None:
    if kind in _REFUSED_KINDS:
        what, fix = _REFUSED_KINDS[kind]
        raise InputError(name, f"the file {what}.", fix)
    if kind == "corrupt_zip":
        raise InputError(name, "corrupt or truncated archive (the zip directory cannot be read).",
                         "re-save the file with numpy.savez and load it again.")
