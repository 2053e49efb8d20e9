"""Loaders and validation: every input format becomes one :class:`Dataset`.

Formats (docs/user-guide.md, "Input files"):

* ``.npz`` with ``embeddings`` (or several ``embeddings_<method>``), ``labels`` and optional
  ``split``, ``confidence``, ``role``, ``id`` arrays;
* ``.npy`` embeddings plus a labels file (``.npy``, ``.csv`` or ``.txt``, one label per line), given
  explicitly or found among the files by :func:`pair_labels` (``X.npy`` + ``X_labels.npy``);
* ``.csv`` / ``.tsv`` / ``.parquet`` with a ``label`` column, the optional columns, and the vector as numeric
  columns (all remaining numeric columns, or those starting with a prefix) or one list column
  ``embedding``;
* several files with the same labels = several methods (name = file stem unless given).

Files are sniffed by content before anything is parsed: pickles (every protocol), PyTorch, HDF5 and
safetensors files and images are refused with how to convert them. Files are never unpickled:
``allow_pickle=False``, object arrays refused from their header. An archive's declared array sizes
are checked (against its real size and a memory limit) before anything is allocated; ``.npy``
files on disk are memory-mapped. CSV/TSV: delimiter sniffed, a written-out index column dropped
with a note, labels kept as text unless all are plain integers; a labels file's header line is
recognised. What a reader assumed is kept in ``Dataset.notes``.
Every problem raises :class:`~analysis_core.errors.InputError` naming the file, the row/column and
the fix.
"""

from __future__ import annotations

import dataclasses
import io
import math
import numbers
import os
import re
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from .errors import InputError

if TYPE_CHECKING:
    import pandas as pd

OPTIONAL_COLUMNS = ("split", "confidence", "role", "id")
#: columns of a table that are never features: the label and the optional per-item columns (files,
#: and frames passed to the Python API, leave them out of the vector)
RESERVED_COLUMNS = frozenset({"label", *OPTIONAL_COLUMNS})
ROLES = ("query", "gallery", "both")
SIMILARITIES = ("cosine", "dot", "euclidean")


@dataclass(frozen=True, repr=False)
class Dataset:
    """Labels, one or more methods' embeddings, and optional per-item columns.

    Construction validates with the loaders' checks and messages (:class:`InputError`): finite
    2-D embeddings of equal row counts, one label per row, well-formed optional columns, at least
    two items in two classes. ``embeddings`` maps method name -> (N, d) array (anything with
    ``__array__`` or ``__dlpack__``); it is stored as float64 when given as float64, else
    float32, C-contiguous (d may differ between methods). ``label_codes`` are dense integer codes
    of ``labels`` in sorted label order, so they depend on the set of labels only, not on row
    order. ``notes`` are what the loaders changed or assumed (e.g. a dropped CSV index column);
    front ends show them to the user.
    """

    labels: np.ndarray
    embeddings: dict[str, np.ndarray]
    split: np.ndarray | None = None
    confidence: np.ndarray | None = None
    role: np.ndarray | None = None
    ids: np.ndarray | None = None
    source: str = "dataset"
    notes: tuple[str, ...] = ()
    method_confidence: dict[str, np.ndarray] | None = None  # method -> its own confidence (checkpoints)
    label_codes: np.ndarray = field(init=False)
    class_names: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        src = self.source
        if not isinstance(self.embeddings, Mapping) or not self.embeddings:
            raise _bad(src, "embeddings must be a non-empty dict of method name -> (n_items, dim) array.",
                       "pass embeddings={'name': array}.")
        embs: dict[str, np.ndarray] = {}
        notes = list(self.notes)
        n = None
        for m, e in self.embeddings.items():
            what = "embeddings" if len(self.embeddings) == 1 else f"embeddings_{m}"
            e = _without_reserved_columns(e, src, what, notes)
            e = _check_embeddings(_as_array(e, src, what), src, what)
            if n is None:
                n = e.shape[0]
            elif e.shape[0] != n:
                raise _bad(src, f"method '{m}' has {e.shape[0]} rows but method '{next(iter(embs))}' has {n}.",
                           "give every method the same items in the same order.")
            if str(m) in embs:
                raise _bad(src, f"two methods are both named '{m}' once their names are text (e.g. 1 and '1').",
                           "give every method a distinct name.")
            embs[str(m)] = e
        if isinstance(self.labels, (list, tuple)):
            _check_one_label_type(self.labels, src)  # np.asarray would make [1, '1'] one class silently
        fields = {"embeddings": embs, "labels": _check_labels(_as_array(self.labels, src, "labels"), n, src)}
        for name, col in (("split", "split"), ("confidence", "confidence"), ("role", "role"), ("ids", "id")):
            v = getattr(self, name)
            if v is not None:
                fields[name] = _check_optional(col, _as_array(v, src, col), n, src)
        if self.method_confidence:
            unknown = sorted(set(self.method_confidence) - set(embs))
            if unknown:
                raise _bad(src, f"confidence given for unknown method(s) {unknown}.",
                           f"name methods among {list(embs)} (confidence_<method>).")
            fields["method_confidence"] = {
                str(m): _check_optional("confidence", _as_array(v, src, f"confidence_{m}"), n, src)
                for m, v in self.method_confidence.items()}
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "notes", tuple(notes))
        self._derive()
        _check_classes(self)

    def _derive(self) -> None:
        names, codes = np.unique(self.labels, return_inverse=True)
        object.__setattr__(self, "class_names", names)
        object.__setattr__(self, "label_codes", codes.astype(np.int64).ravel())

    @classmethod
    def _from_checked(cls, **fields) -> Dataset:
        """A Dataset from arrays that already passed the checks (a subset of a valid Dataset, or
        arrays the loaders checked file by file with file names in the messages): skips the O(N d)
        finiteness pass a second time."""
        ds = object.__new__(cls)
        for f in dataclasses.fields(cls):
            if f.init:
                object.__setattr__(ds, f.name, fields.get(f.name, f.default))
        ds._derive()
        return ds

    def __repr__(self) -> str:
        methods = ", ".join(f"{m}: {e.shape[1]}-d" for m, e in self.embeddings.items())
        cols = [c for c in ("split", "confidence", "role", "ids") if getattr(self, c) is not None]
        return (f"Dataset(source={self.source!r}, n_items={self.n_items}, n_classes={self.n_classes}, "
                f"methods={{{methods}}}" + (f", columns={cols}" if cols else "") + ")")

    @property
    def n_items(self) -> int:
        return int(self.labels.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.class_names.shape[0])

    @property
    def methods(self) -> list[str]:
        return list(self.embeddings)

    def confidence_for(self, method: str) -> np.ndarray | None:
        """The method's own confidence (``confidence_<method>``), else the shared ``confidence``."""
        own = (self.method_confidence or {}).get(method)
        return own if own is not None else self.confidence

    @property
    def has_confidence(self) -> bool:
        return self.confidence is not None or bool(self.method_confidence)

    def shared_confidence_methods(self) -> list[str]:
        """Methods that fall back on the one shared ``confidence`` (a warning when several do)."""
        if self.confidence is None:
            return []
        return [m for m in self.methods if m not in (self.method_confidence or {})]

    def ordered(self, order: Sequence[str] | None = None) -> Dataset:
        """The same dataset with its methods in natural order (``e3`` before ``e10``) or in ``order``."""
        from .methods import order_methods

        try:
            names = order_methods(self.methods, order)
        except ValueError as exc:
            raise _bad(self.source, str(exc) + ".", "give --order a comma list naming every method once.") from exc
        if names == self.methods:
            return self
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        return Dataset._from_checked(**{**fields, "embeddings": {m: self.embeddings[m] for m in names}})

    def subset(self, rows: np.ndarray) -> Dataset:
        """The dataset restricted to ``rows`` (indices or boolean mask), in that order. The rows
        are already valid; settings-dependent checks (:func:`validate`) still apply to the subset."""
        rows = np.asarray(rows)

        def take(a):
            return None if a is None else a[rows]

        return Dataset._from_checked(
            labels=self.labels[rows], embeddings={m: e[rows] for m, e in self.embeddings.items()},
            split=take(self.split), confidence=take(self.confidence), role=take(self.role), ids=take(self.ids),
            source=self.source, notes=self.notes,
            method_confidence=None if self.method_confidence is None else {
                m: v[rows] for m, v in self.method_confidence.items()},
        )


# --------------------------------------------------------------------------- validation helpers


def _bad(source: str, problem: str, fix: str) -> InputError:
    return InputError(source, problem, fix)


def _rows(idx: np.ndarray, limit: int = 5) -> str:
    idx = np.asarray(idx).ravel()
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    more = f" and {idx.size - limit} more" if idx.size > limit else ""
    return f"row{'s' if idx.size > 1 else ''} {shown}{more}"


def _as_array(x, source: str, what: str) -> np.ndarray:
    """``x`` as a NumPy array without copying when possible: NumPy arrays, lists, anything with
    ``__array__`` (pandas, most array libraries) or only ``__dlpack__`` (a CPU torch/JAX/CuPy-host
    tensor: read through the DLPack protocol, so torch need not be imported here)."""
    if isinstance(x, np.ma.MaskedArray):
        if np.ma.getmaskarray(x).any():  # np.asarray would score the hidden values
            raise _bad(source, f"'{what}' is a masked array with {int(np.ma.getmaskarray(x).sum())} masked "
                       "value(s); their hidden values would be used as if they were data.",
                       "drop the masked rows, or fill them (x.filled(...)) if that is what you mean.")
        return np.ma.getdata(x)
    if isinstance(x, np.matrix):
        return np.asarray(x)
    if isinstance(x, np.ndarray):
        return x
    x = _tensor_for_numpy(x)
    if hasattr(x, "__array__") or not hasattr(x, "__dlpack__"):
        try:
            return np.asarray(x)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise _bad(source, f"'{what}' could not be read as an array ({exc}).",
                       "pass a NumPy array (for a GPU tensor: tensor.detach().cpu().numpy()).") from exc
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise _bad(source, f"'{what}' could not be read through DLPack ({exc}).",
                   "move it to the CPU first (tensor.detach().cpu()) or pass a NumPy array.") from exc


def _without_reserved_columns(x, source: str, what: str, notes: list[str]):
    """A data frame (anything with named ``columns``: pandas, polars) without its label and
    optional per-item columns, which are never features (:data:`RESERVED_COLUMNS`, as the file
    loaders read tables); what was left out is said in ``notes``. Anything else is returned as is."""
    columns = getattr(x, "columns", None)
    if columns is None or isinstance(x, np.ndarray):
        return x
    names = [str(c) for c in columns]
    dropped = [c for c in names if c in RESERVED_COLUMNS]
    if not dropped:
        return x
    keep = [c for c in columns if str(c) not in RESERVED_COLUMNS]
    if not keep:
        raise _bad(source, f"'{what}' holds only the per-item column(s) {dropped}, no features.",
                   "pass the feature columns as the embeddings.")
    notes.append(f"{source}: column(s) {dropped} of '{what}' are per-item columns, not features (as in files), "
                 f"and were left out of the vectors ({len(keep)} feature columns kept); pass them as labels=, "
                 "split=, confidence=, role=, ids= to use them.")
    return x[keep]


def _reduced_float(dtype_name: str) -> bool:
    """Float types NumPy has no dtype for (bfloat16, float8): every value is exactly a float32."""
    return dtype_name.endswith("bfloat16") or dtype_name.split(".")[-1].startswith("float8")


def _tensor_for_numpy(x):
    """A tensor (torch-like: ``.dtype``, ``.detach()``, ``.float()``) as NumPy can read it: detached
    from autograd (scoring needs no gradient), and bfloat16/float8 widened to float32 on its own
    device, which is exact. Anything else is returned as is; torch is never imported here."""
    if getattr(x, "requires_grad", False) is True and callable(getattr(x, "detach", None)):
        x = x.detach()
    if _reduced_float(str(getattr(x, "dtype", ""))) and callable(getattr(x, "float", None)):
        x = x.float()
    return x


def _nonfinite(a: np.ndarray, chunk_bytes: int = 64 << 20) -> tuple[np.ndarray, int, int]:
    """(rows holding NaN/inf, first bad row, its first bad column), checked in row chunks so a
    memory-mapped file is never materialised whole; rows empty when all is finite."""
    step = max(1, chunk_bytes // max(1, a.shape[1] * a.itemsize))
    bad_rows: list[np.ndarray] = []
    first = (-1, -1)
    for i in range(0, a.shape[0], step):
        ok = np.isfinite(a[i:i + step])
        if not ok.all():
            r = np.nonzero(~ok.all(axis=1))[0]
            if not bad_rows:
                first = (i + int(r[0]), int(np.nonzero(~ok[r[0]])[0][0]))
            bad_rows.append(i + r)
    return (np.concatenate(bad_rows) if bad_rows else np.zeros(0, np.int64)), *first


def _check_embeddings(a: np.ndarray, source: str, what: str = "embeddings") -> np.ndarray:
    """Numeric, 2-D, non-empty, finite; returned C-contiguous as float64 if given as float64 (or as
    integers beyond float32's 2^24), else float32 (a C-contiguous float32/float64 array,
    memory-mapped or not, is not copied)."""
    if _reduced_float(a.dtype.name):  # ml_dtypes' bfloat16 (JAX arrays): widened exactly
        a = a.astype(np.float32)
    if a.dtype == object:
        raise _bad(source, f"'{what}' is an object array, which could only be read by unpickling.",
                   "save it as a numeric array (e.g. np.asarray(x, dtype=np.float32)).")
    if a.dtype.kind not in "biuf":
        raise _bad(source, f"'{what}' has non-numeric dtype {a.dtype}.",
                   "store the vectors as float or integer numbers.")
    if a.ndim == 1:
        raise _bad(source, f"'{what}' is 1-D (shape {a.shape}); one vector per row is needed.",
                   "reshape to (n_items, dim), e.g. x.reshape(-1, 1) for 1-dimensional vectors.")
    if a.ndim != 2:
        raise _bad(source, f"'{what}' has shape {a.shape}; expected (n_items, dim).",
                   "flatten each item's vector into one row.")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise _bad(source, f"'{what}' is empty (shape {a.shape}).", "provide at least two items with a vector each.")
    a = np.ascontiguousarray(a, dtype=np.float64 if a.dtype == np.float64 or _beyond_float32(a) else np.float32)
    rows, r0, c0 = _nonfinite(a)
    if rows.size:
        raise _bad(source, f"'{what}' has NaN or infinite values at {_rows(rows)} "
                   f"(first at row {r0}, column {c0}).",
                   "remove or repair those rows; nothing is dropped silently.")
    return a


def _beyond_float32(a: np.ndarray) -> bool:
    """Integers float32 would round (magnitudes above 2^24): stored as float64 instead, so that
    ``precision="float64"`` sees the values given."""
    return a.dtype.kind in "iu" and a.dtype.itemsize > 2 and bool(
        max(abs(int(a.max())), abs(int(a.min()))) > 2**24)


def _is_missing(v) -> bool:
    """None, a NaN number, pandas' NA or NaT: the missing values an object array of labels holds."""
    return v is None or (isinstance(v, numbers.Number) and v != v) or type(v).__name__ in ("NAType", "NaTType")


def _check_one_label_type(values, source: str) -> None:
    """Labels that are all text or all numbers: a mix (1 and '1') would become one class as text."""
    text = number = None
    for i, v in enumerate(values):
        if isinstance(v, (str, bytes, np.str_, np.bytes_)):
            text = i if text is None else text
        elif isinstance(v, numbers.Number) and not _is_missing(v):
            number = i if number is None else number
        if text is not None and number is not None:
            raise _bad(source, f"labels mix numbers and text (row {number}: {values[number]!r}, row {text}: "
                       f"{values[text]!r}); as text, 1 and '1' would be one class.",
                       "give every label the same type: all int or all str.")


def _check_labels(labels: np.ndarray, n: int | None, source: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.dtype == object:
        missing = np.fromiter((_is_missing(v) for v in labels.ravel()), bool, labels.size)
        if missing.any():  # None / NaN / pd.NA would become a class named 'None' / 'nan'
            raise _bad(source, f"missing labels at {_rows(np.nonzero(missing)[0])}.", "give every item a label.")
        _check_one_label_type(labels.ravel(), source)
        try:
            labels = labels.astype(str)
        except Exception as exc:  # noqa: BLE001 - any failure means unusable labels
            raise _bad(source, f"labels could not be read as text ({exc}).", "store labels as int or str.") from exc
    if labels.ndim == 2 and 1 in labels.shape:
        labels = labels.ravel()
    if labels.ndim != 1:
        raise _bad(source, f"labels have shape {labels.shape}; expected one label per item.",
                   "give a 1-D array of labels.")
    if labels.shape[0] != n:
        raise _bad(source, f"{labels.shape[0]} labels for {n} embedding rows (length mismatch).",
                   "give exactly one label per embedding row, in the same order.")
    if labels.dtype.kind == "f":
        bad = ~np.isfinite(labels)
        if bad.any():
            raise _bad(source, f"missing (NaN) labels at {_rows(np.nonzero(bad)[0])}.",
                       "give every item a label.")
        if np.all(labels == np.round(labels)):
            labels = labels.astype(np.int64)
    if labels.dtype.kind in "US":
        empty = np.char.str_len(labels.astype(str)) == 0
        if empty.any():
            raise _bad(source, f"empty labels at {_rows(np.nonzero(empty)[0])}.", "give every item a label.")
    if labels.dtype.kind == "b":
        labels = labels.astype(np.int64)
    return labels


def _check_optional(name: str, values: np.ndarray, n: int | None, source: str) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == object:
        values = values.astype(str)
    if values.ndim != 1 or values.shape[0] != n:
        raise _bad(source, f"column '{name}' has shape {values.shape}; expected {n} values, one per item.",
                   f"give one '{name}' value per item.")
    if name == "confidence":
        if values.dtype.kind not in "biuf":
            raise _bad(source, f"column 'confidence' is not numeric (dtype {values.dtype}).",
                       "give confidences as numbers.")
        values = values.astype(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise _bad(source, f"column 'confidence' has NaN/inf at {_rows(np.nonzero(bad)[0])}.",
                       "give every item a finite confidence, or drop the column.")
        return values
    if name == "role":
        values = np.char.lower(np.char.strip(values.astype(str)))
        bad = ~np.isin(values, ROLES)
        if bad.any():
            seen = sorted(set(values[bad].tolist()))[:5]
            raise _bad(source, f"column 'role' has unknown values {seen} at {_rows(np.nonzero(bad)[0])}.",
                       "use only 'query', 'gallery' or 'both'.")
        return values
    if name == "split":
        values = values.astype(str)
        bad = (np.char.str_len(np.char.strip(values)) == 0) | np.isin(np.char.lower(values), ("nan", "none"))
        if bad.any():
            raise _bad(source, f"column 'split' has empty values at {_rows(np.nonzero(bad)[0])}.",
                       "give every item a split name (e.g. train/val/test), or drop the column.")
        return values
    return values.astype(str)


def _check_classes(ds: Dataset) -> None:
    """Checks of the content that hold whatever the settings: two items, two classes."""
    if ds.n_classes < 2:
        raise _bad(ds.source, f"all {ds.n_items} items are in one class ('{ds.class_names[0]}'); "
                   "retrieval of same-class items cannot be scored.",
                   "provide items of at least two classes.")
    if ds.n_items < 2:
        raise _bad(ds.source, "fewer than two items.", "provide at least two items.")


def validate(ds: Dataset, similarity: str = "cosine") -> None:
    """Checks that depend on the evaluation settings, and the content checks again for subsets
    (a split or a class sample of a valid dataset may hold one class): raise :class:`InputError`."""
    if similarity not in SIMILARITIES:
        raise _bad(ds.source, f"unknown similarity '{similarity}'.", f"use one of {', '.join(SIMILARITIES)}.")
    _check_classes(ds)
    if similarity == "cosine":
        for m, e in ds.embeddings.items():
            step = max(1, (64 << 20) // max(1, e.shape[1] * e.itemsize))  # row chunks: no N x d temporary
            zero = np.concatenate([~np.any(e[i:i + step] != 0, axis=1) for i in range(0, e.shape[0], step)])
            if zero.any():
                raise _bad(f"{ds.source} [{m}]", f"all-zero vectors at {_rows(np.nonzero(zero)[0])} have no "
                           "direction, so cosine similarity is undefined for them.",
                           "choose the dot or euclidean similarity (--similarity dot, similarity='dot', or the "
                           "dashboard's Similarity control), or remove those rows.")
    if ds.role is not None:
        if not np.isin(ds.role, ("query", "both")).any():
            raise _bad(ds.source, "no item has role 'query' or 'both'.", "mark some items as queries.")
        if not np.isin(ds.role, ("gallery", "both")).any():
            raise _bad(ds.source, "no item has role 'gallery' or 'both'.", "mark some items as gallery.")


# --------------------------------------------------------------------------- reading files

_BINARY_SUFFIXES = {"", ".npy", ".npz", ".pt", ".pth", ".pkl", ".pickle", ".bin", ".ckpt", ".h5", ".hdf5",
                    ".safetensors", ".joblib"}
# opcodes a protocol 0/1 pickle can start with (protocol 2+ starts with PROTO, 0x80)
_PICKLE0_FIRST = frozenset(b"(c]})NILFSVJKMGUTX")
_TO_NPZ = "numpy.savez('embeddings.npz', embeddings=X, labels=y)"
# what a sniffed file is, and how to convert it (every refusal names both)
_REFUSED_KINDS = {
    "pickle": ("is a Python pickle (pickle.dump, joblib, or torch.save in the legacy format); pickles can "
               "run code when loaded and are never read",
               f"save arrays instead: {_TO_NPZ}, with X = tensor.detach().cpu().numpy() for a tensor; or "
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
    "png": ("is a PNG image, not an array file", f"save the vectors themselves: {_TO_NPZ}."),
    "jpeg": ("is a JPEG image, not an array file", f"save the vectors themselves: {_TO_NPZ}."),
    "gzip": ("is gzip-compressed", "decompress it first (gunzip), or save with numpy.savez_compressed."),
    "zip": ("is a zip archive but not a NumPy .npz (it holds no .npy arrays)", f"create it with {_TO_NPZ}."),
}


class _Input:
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


def _is_pickle0(inp: _Input) -> bool:
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


def _sniff(inp: _Input) -> str | None:
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


def _refuse_kind(kind: str | None, name: str) -> None:
    if kind in _REFUSED_KINDS:
        what, fix = _REFUSED_KINDS[kind]
        raise _bad(name, f"the file {what}.", fix)
    if kind == "corrupt_zip":
        raise _bad(name, "corrupt or truncated archive (the zip directory cannot be read).",
                   "re-save the file with numpy.savez and load it again.")


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
        raise _bad(name, f"array '{what}' has an unreadable .npy header ({exc}).",
                   "re-save it with numpy.save / numpy.savez.") from exc


def _check_declared(name: str, what: str, shape: tuple[int, ...], dtype: np.dtype, available: int,
                    limit: int | None, already: int = 0) -> int:
    """Refuse before allocating: object arrays, a header claiming more data than the file holds, and
    arrays larger than ``limit`` bytes (together with ``already`` declared by the same file)."""
    if dtype.hasobject:
        raise _bad(name, f"array '{what}' is an object array, which can only be read by unpickling; refused.",
                   f"save '{what}' as a numeric or string array (np.asarray(x, dtype=float/str)).")
    declared = math.prod(shape) * dtype.itemsize
    desc = f"shape {shape}, dtype {dtype}, {_size(declared)}"
    if declared > available:
        raise _bad(name, f"array '{what}' declares {desc}, but the file holds only {_size(available)} of data: "
                   "it is truncated or corrupt.", "re-save it with numpy.save / numpy.savez and load it again.")
    if limit is not None and already + declared > limit:
        raise _bad(name, f"array '{what}' declares {desc}, over the limit of {_size(limit)} for one file "
                   "(default: half the memory available).",
                   "check the array's shape; if it is right, pass a larger max_bytes= to load/load_files "
                   "or free memory.")
    return declared


def _read_npy(inp: _Input, what: str, max_bytes: int | None) -> np.ndarray:
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
        raise _bad(inp.name, f"not a readable NumPy file ({exc}).", "re-save it with numpy.save.") from exc


def _read_npz(inp: _Input, method: str | None, max_bytes: int | None) -> tuple[dict, dict]:
    """The arrays of an .npz: every used member's header is checked (object dtype, declared size
    against the member's real size and against ``max_bytes``) before any array is allocated."""
    name = inp.name
    try:
        zf = zipfile.ZipFile(inp.open())
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise _bad(name, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                   "re-save the file with numpy.savez and load it again.") from exc
    with zf:
        members = {n[:-4]: n for n in zf.namelist() if n.endswith(".npy")}
        keys = list(members)
        emb_keys = [k for k in keys if k == "embeddings" or k.startswith("embeddings_")]
        if not emb_keys:
            raise _bad(name, f"no 'embeddings' array (found: {', '.join(keys) or 'nothing'}).",
                       "store vectors as 'embeddings' or 'embeddings_<method>'.")
        if "labels" not in keys:
            raise _bad(name, f"no 'labels' array (found: {', '.join(keys)}).", "store one label per row as 'labels'.")
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
            raise _bad(name, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                       "re-save the file with numpy.savez and load it again.") from exc
    embs = {((method or Path(name).stem) if k == "embeddings" else k[len("embeddings_"):]): arrays[k]
            for k in emb_keys}
    cols: dict[str, object] = {c: arrays[c] for c in ("labels", *OPTIONAL_COLUMNS) if c in arrays}
    own = {k[len("confidence_"):]: arrays[k] for k in conf_keys}
    unknown = sorted(set(own) - set(embs))
    if unknown:
        raise _bad(name, f"confidence_<method> arrays for methods it does not hold: {unknown} "
                   f"(methods: {sorted(embs)}).", "name each confidence_<method> after an embeddings_<method>.")
    if own:
        cols["method_confidence"] = own
    return embs, cols


_INT_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
_ALL_INT_TEXT = re.compile(r"(?:-?(?:0|[1-9][0-9]*)\n)*-?(?:0|[1-9][0-9]*)")
_LABEL_HEADERS = {"label", "labels", "class", "classes", "target", "targets", "y", "category"}


def _labels_from_text(values: Sequence[str]) -> np.ndarray:
    """Labels read from text: integers when every label is written as a plain integer ("7", "-3"),
    else the text as written (so "007" and "7" stay two classes)."""
    vals = np.array([str(v).strip() for v in values])
    if vals.size and _all_int_text(vals.tolist()):
        try:
            return vals.astype(np.int64)
        except (ValueError, OverflowError):
            return vals
    return vals


def _all_int_text(values: list[str]) -> bool:
    """Every value a plain integer literal; one regex pass over the joined text (fast for 10^6 labels)."""
    return bool(values) and _ALL_INT_TEXT.fullmatch("\n".join(values)) is not None


def _delimiter(data: bytes, suffix: str) -> str:
    """The field separator, from the header line: tab, semicolon or comma (the most frequent)."""
    first = next((ln for ln in data[:65536].decode("utf-8", errors="replace").splitlines() if ln.strip()), "")
    counts = {sep: first.count(sep) for sep in ("\t", ";", ",")}
    best = max(counts, key=lambda s: counts[s])
    if counts[best] == 0:
        return "\t" if suffix == ".tsv" else ","
    return best


def _read_labels_file(inp: _Input, n: int | None, notes: list[str]) -> np.ndarray:
    """One label per line (.txt), a one-column or 'label'-column table (.csv/.tsv), or a .npy. A
    first line that is a header ('label', 'class', ..., or text above integer labels when there is
    one line too many) is recognised and reported in ``notes``."""
    name = inp.name
    if inp.suffix == ".npy":
        _refuse_kind(_sniff(inp), name)
        return np.asarray(_read_npy(inp, "labels", None))
    kind = _sniff(inp)
    _refuse_kind(kind, name)
    data = inp.read()
    parquet = kind == "parquet" and data.endswith(b"PAR1")  # a text file may begin with 'PAR1' (a gene name)
    if kind in ("npy", "npz", "zip", "gzip") or parquet or b"\x00" in data[:65536]:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        what = {"npy": "a NumPy .npy array", "npz": "a NumPy .npz archive"}.get(
            kind or "",
            "a Parquet table" if parquet else "UTF-16 text (saved as 'Unicode')" if utf16 else "binary, not text")
        raise _bad(name, f"the labels file is {what}, but its name ends in '{inp.suffix}', which is read as UTF-8 "
                   "text lines.", "give labels as .npy (numpy.save(path, y)), or as UTF-8 .txt or .csv (one label "
                   "per line), or store them as the 'labels' array of an .npz holding the embeddings.")
    if not data.strip():
        raise _bad(name, "the labels file is empty.", "write one label per line.")
    if inp.suffix in (".csv", ".tsv"):
        import pandas as pd

        try:
            df = pd.read_csv(io.BytesIO(data), sep=_delimiter(data, inp.suffix), header=None, dtype=str,
                             keep_default_na=False, skip_blank_lines=True)
        except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
            raise _bad(name, f"not a readable CSV ({exc}).", "write one label per line.") from exc
        first = [str(c).strip().lower() for c in df.iloc[0].tolist()]
        if df.shape[1] > 1:
            if "label" not in first:
                raise _bad(name, f"no 'label' column (columns: {', '.join(first)}).", "name the labels column 'label'.")
            notes.append(f"{name}: first row read as a header; labels from its 'label' column.")
            return _labels_from_text(df.iloc[1:, first.index("label")].tolist())
        values = df.iloc[:, 0].tolist()
    else:
        values = data.decode("utf-8-sig", errors="replace").splitlines()  # a BOM is not part of a label
        while values and not values[-1].strip():
            values.pop()
    values = [str(v).strip() for v in values]
    head = values[0]
    one_extra = n is not None and len(values) == n + 1
    if head.lower() in _LABEL_HEADERS or (one_extra and not _INT_TEXT.fullmatch(head)
                                          and _all_int_text(values[1:])):
        notes.append(f"{name}: first line {head!r} read as a header, not a label.")
        values = values[1:]
    elif one_extra:
        raise _bad(name, f"{len(values)} labels for {n} embedding rows (one too many; is the first line "
                   f"{head!r} a header?).", "remove the header line, or name it 'label'.")
    return _labels_from_text(values)


def _read_csv(inp: _Input, notes: list[str]) -> pd.DataFrame:
    import pandas as pd

    name = inp.name
    data = inp.read()
    if not data.strip():
        raise _bad(name, "the file is empty.", "check the upload or the path.")
    sep = _delimiter(data, inp.suffix)
    if inp.suffix == ".csv" and sep != ",":
        notes.append(f"{name}: read as {'tab' if sep == chr(9) else 'semicolon'}-separated.")
    try:
        # text columns as text: labels "007" and "7" stay distinct, ids keep leading zeros
        return pd.read_csv(io.BytesIO(data), sep=sep, dtype={c: str for c in ("label", "split", "role", "id")})
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise _bad(name, f"not a readable CSV ({exc}).",
                   "save it as comma-separated text with a header row.") from exc


def _read_parquet(inp: _Input) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_parquet(inp.path if inp.path is not None else io.BytesIO(inp.data))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
        raise _bad(inp.name, f"not a readable Parquet file ({exc.__class__.__name__}: {exc}).",
                   "re-save it with DataFrame.to_parquet.") from exc


def _parse_list_cell(v, row: int, source: str) -> np.ndarray:
    if isinstance(v, str):
        txt = v.strip().strip("[]()").replace(",", " ")
        try:
            return np.array(txt.split(), dtype=np.float64)
        except ValueError as exc:
            raise _bad(source, f"column 'embedding' at row {row} is not a list of numbers ({v[:40]!r}).",
                       "write vectors as '[0.1, 0.2, ...]'.") from exc
    try:
        return np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise _bad(source, f"column 'embedding' at row {row} is not a list of numbers.",
                   "store vectors as lists of numbers.") from exc


def _table_to_arrays(df: pd.DataFrame, source: str, prefix: str | None, method: str | None,
                     notes: list[str], text: bool) -> tuple[dict, dict]:
    """Columns of a table; ``text``: read from CSV/TSV text (labels converted by
    :func:`_labels_from_text`), else typed (Parquet: string labels stay strings)."""
    import pandas as pd

    if df.shape[0] == 0:
        raise _bad(source, "the table has no rows.", "provide at least two items.")
    df.columns = [str(c) for c in df.columns]
    unnamed = [c for c in df.columns if c.startswith("Unnamed: ")]
    if unnamed:
        c = unnamed[0]
        v = df[c]
        if c == df.columns[0] and pd.api.types.is_integer_dtype(v) and np.array_equal(v.to_numpy(),
                                                                                        np.arange(len(df))):
            notes.append(f"{source}: column 1 has no header and holds 0..{len(df) - 1}, the row index "
                         "DataFrame.to_csv writes by default; it was dropped (write with index=False to avoid it).")
            df = df.drop(columns=[c])
        else:
            raise _bad(source, f"column {df.columns.get_loc(c) + 1} has no header ('{c}'), so it cannot be told "
                       "apart from a written-out index.",
                       "name it (e.g. 'id' to keep it as item ids), or write the table with index=False.")
    if "label" not in df.columns:
        raise _bad(source, f"no 'label' column (columns: {', '.join(df.columns[:10])}).",
                   "name the class column 'label'.")
    lab = df["label"]
    if lab.isna().any():
        raise _bad(source, f"missing labels at {_rows(np.nonzero(lab.isna().to_numpy())[0])}.",
                   "give every item a label.")
    cols = {"labels": _labels_from_text(lab.tolist()) if text else lab.to_numpy()}
    for c in OPTIONAL_COLUMNS:
        if c in df.columns:
            cols[c] = df[c].to_numpy(dtype=object) if c != "confidence" else df[c].to_numpy()
    name = method or Path(source).stem
    if "embedding" in df.columns:
        empty = df["embedding"].isna().to_numpy() | (df["embedding"].astype(str).str.strip() == "").to_numpy()
        if empty.any():
            raise _bad(source, f"column 'embedding' has no vector at {_rows(np.nonzero(empty)[0])}.",
                       "give every row a vector, or remove those rows.")
        vecs = [_parse_list_cell(v, i, source) for i, v in enumerate(df["embedding"].tolist())]
        lens = {v.shape for v in vecs}
        if len(lens) != 1:
            first = next(i for i, v in enumerate(vecs) if v.shape != vecs[0].shape)
            raise _bad(source, f"column 'embedding' has vectors of different lengths (row 0 has {vecs[0].size}, "
                       f"row {first} has {vecs[first].size}).", "give every row a vector of the same length.")
        return {name: np.stack(vecs)}, cols
    feat = [c for c in df.columns if c not in RESERVED_COLUMNS and (prefix is None or c.startswith(prefix))]
    if prefix is None:
        non_numeric = [c for c in feat if not pd.api.types.is_numeric_dtype(df[c])]
        if non_numeric:
            c = non_numeric[0]
            bad_rows = np.nonzero(pd.to_numeric(df[c], errors="coerce").isna().to_numpy())[0]
            where = f"e.g. {_rows(bad_rows)}" if bad_rows.size else f"its values are read as {df[c].dtype}, e.g. " \
                f"{str(df[c].iloc[0])[:30]!r}"
            raise _bad(source, f"column '{c}' is not numeric ({where}), so it cannot be a feature.",
                       "fix those values, or name the feature columns with a common prefix and pass it "
                       "(--feature-prefix).")
    if not feat:
        raise _bad(source, "no feature columns found.",
                   "add numeric feature columns, or one 'embedding' list column.")
    for c in feat:
        if not pd.api.types.is_numeric_dtype(df[c]):
            raise _bad(source, f"feature column '{c}' is not numeric.", "store features as numbers.")
    return {name: df[feat].to_numpy()}, cols


def read_bytes(name: str, data: bytes | Path, *, labels: tuple[str, bytes | Path] | None = None,
               method: str | None = None, feature_prefix: str | None = None, max_bytes: int | None = None,
               notes: list[str] | None = None) -> tuple[dict, dict]:
    """Parse one file (its bytes, or its path on disk) into (methods -> embeddings, columns); no
    cross-file checks. The content is sniffed first: pickles, PyTorch, HDF5, safetensors files and
    images are refused with how to convert them, whatever their name. ``max_bytes`` limits what
    one archive may declare (default :func:`default_max_bytes`); ``notes`` collects what the reader
    assumed (a dropped index column, a header line)."""
    notes = [] if notes is None else notes
    inp = _Input(name, data)
    if inp.size == 0:
        raise _bad(name, "the file is empty.", "check the upload or the path.")
    kind = _sniff(inp)
    _refuse_kind(kind, name)
    suffix = inp.suffix
    if suffix == ".npz":
        if kind == "npy":
            raise _bad(name, "expected an .npz archive but found a single array.",
                       "use np.savez(path, embeddings=..., labels=...), or name the file .npy and give --labels.")
        if kind != "npz":
            raise _bad(name, "not a NumPy .npz archive (no zip signature; corrupt or another format).",
                       f"create it with {_TO_NPZ}.")
        return _read_npz(inp, method, max_bytes)
    if suffix == ".npy":
        if kind == "npz":
            raise _bad(name, "named .npy but is an .npz archive.", "rename it to .npz.")
        if kind != "npy":
            raise _bad(name, "not a NumPy .npy file (no NumPy signature; corrupt or another format).",
                       "save the embeddings with numpy.save(path, X).")
        arr = _read_npy(inp, "embeddings", max_bytes)
        if labels is None:
            raise _bad(name, "an .npy file holds embeddings only; labels are missing.",
                       "give the labels file too (--labels labels.npy|.csv|.txt, or upload it beside).")
        n = arr.shape[0] if arr.ndim >= 1 else None
        return {method or Path(name).stem: arr}, {"labels": _read_labels_file(_Input(*labels), n, notes)}
    if suffix in (".csv", ".tsv"):
        return _table_to_arrays(_read_csv(inp, notes), name, feature_prefix, method, notes, text=True)
    if suffix in (".parquet", ".pq"):
        return _table_to_arrays(_read_parquet(inp), name, feature_prefix, method, notes, text=False)
    raise _bad(name, f"unsupported file type '{suffix or '(none)'}'.",
               "use .npz, .npy (+ labels), .csv, .tsv or .parquet.")


def dataset_from_parts(parts: Sequence[tuple[str, dict, dict]], notes: Sequence[str] = (),
                       source: str | None = None) -> Dataset:
    """Combine parsed files (name, embeddings, columns) into one Dataset; files = methods."""
    if not parts:
        raise _bad("input", "no files given.", "give at least one file.")
    first_name, _, first_cols = parts[0]
    embeddings: dict[str, np.ndarray] = {}
    method_conf: dict[str, np.ndarray] = {}
    n = None
    several = len(parts) > 1
    for name, embs, cols in parts:
        if several and len(embs) > 1:  # several multi-method files: names become <file stem>/<method>
            embs = {f"{Path(name).stem}/{m}": e for m, e in embs.items()}
            if "method_confidence" in cols:
                cols = {**cols, "method_confidence": {f"{Path(name).stem}/{m}": v
                                                      for m, v in cols["method_confidence"].items()}}
        for m, v in cols.get("method_confidence", {}).items():
            method_conf[m] = v
        if several and "confidence" in cols:  # each file's own confidence belongs to its methods
            for m in embs:
                method_conf.setdefault(m, cols["confidence"])
        for m, e in embs.items():
            e = _check_embeddings(np.asarray(e), name, f"embeddings_{m}" if len(embs) > 1 else "embeddings")
            if n is None:
                n = e.shape[0]
            if e.shape[0] != n:
                raise _bad(name, f"method '{m}' has {e.shape[0]} rows but {first_name} has {n}.",
                           "every file must hold the same items in the same order.")
            if m in embeddings:
                raise _bad(name, f"method name '{m}' is used twice.", "rename one of the files (or the array).")
            embeddings[m] = e
        labs = _check_labels(cols["labels"], n, name)
        if name != first_name:
            ref = _check_labels(first_cols["labels"], n, first_name)
            if labs.astype(str).tolist() != ref.astype(str).tolist():
                diff = np.nonzero(labs.astype(str) != ref.astype(str))[0]
                raise _bad(name, f"labels differ from {first_name} at {_rows(diff)}.",
                           "several files are several methods over the same items: use the same labels and order.")
    labels = _check_labels(first_cols["labels"], n, first_name)
    opt = {c: _check_optional(c, first_cols[c], n, first_name) for c in OPTIONAL_COLUMNS if c in first_cols
           if not (several and c == "confidence")}
    conf = {m: _check_optional("confidence", v, n, m) for m, v in method_conf.items()} or None
    if source is None:  # file names: no folder reaches summary.json
        source = ", ".join(Path(p[0]).name for p in parts)
    from .methods import natural_key

    ordered = {m: embeddings[m] for m in sorted(embeddings, key=natural_key)}
    ds = Dataset._from_checked(labels=labels, embeddings=ordered, split=opt.get("split"),
                               confidence=opt.get("confidence"), role=opt.get("role"), ids=opt.get("id"),
                               source=source, notes=tuple(notes), method_confidence=conf)
    _check_classes(ds)
    return ds


_LABELS_NAME = re.compile(r"(?:(?P<pre>.+?)[-_. ]+)?labels?(?:[-_. ]+(?P<post>.+))?", re.IGNORECASE)
_PAIR_FIX = ("name each labels file after its embeddings file (X.npy + X_labels.npy, labels_X.npy or "
             "X.labels.txt), or give one file named labels.npy (or .txt, .csv) that every .npy file shares.")


def labels_name(name: str) -> tuple[bool, str | None]:
    """Whether a file's name says it holds labels, and the stem of the embeddings file it names:
    ``labels.npy``, ``Label.txt`` -> (True, None), a labels file for any embeddings file;
    ``X_labels.npy``, ``X-labels.npy``, ``X.labels.txt``, ``X labels.csv``, ``labels_X.npy``,
    ``X_label.npy`` -> (True, "X"); anything else (``Xlabels.npy``, ``a_labels_b.npy``) ->
    (False, None). The word is matched without regard to case; the separators are ``_ - .`` and a
    space."""
    m = _LABELS_NAME.fullmatch(Path(name).stem)
    if m is None or (m["pre"] and m["post"]):
        return False, None
    return True, m["pre"] or m["post"]


def _npy_holds_labels(inp: _Input) -> bool:
    """A .npy whose header (read without the data) declares one value per item: 1-D, or one
    column of integers, booleans or text. An unreadable header is left to the reader's message."""
    try:
        with inp.open() as f:
            shape, dtype, _ = _npy_header(f, inp.name, "labels")
    except InputError:
        return False
    return len(shape) == 1 or (len(shape) == 2 and shape[1] == 1 and dtype.kind in "biuUS")


_File = tuple[str, bytes | Path]  # a file's name and its bytes (an upload) or its path on disk


def pair_labels(files: Sequence[_File]) -> tuple[list[tuple[_File, _File | None]], list[str]]:
    """Which labels file goes with which ``.npy`` embeddings file, when several files are given
    together (an upload, the command line's file list) without an explicit labels file.

    A *labels file* is a ``.txt`` file, a ``.npy`` whose name says labels (:func:`labels_name`) or
    whose header declares one value per item (1-D, or one column of integers or text), or a
    ``.csv``/``.tsv`` whose name says labels; any other ``.npy`` holds embeddings. ``.npz``, other
    CSV and Parquet files carry their own labels and take part in nothing. Each embeddings file
    ``X.npy`` gets, in this order:

    1. the labels file whose name names it (``X_labels.npy``, ``labels_X.npy``, ``X.labels.txt``, ...);
    2. else the one labels file left over, when it is named ``labels.*``/``label.*`` (shared by
       every such embeddings file: several methods over the same items) or when it is the only
       candidate (one embeddings file and one labels file left, whatever their names).

    Anything else is ambiguous and refused with the files named (two labels files for one
    embeddings file, a labels file that could belong to several, a labels file left unused).
    Returns the non-labels files in their order, each with its labels file (None: none is needed
    or none was given), and one note per pairing saying which file was paired and why."""
    files = list(files)
    kinds = []
    for name, _ in files:
        suffix = Path(name).suffix.lower()
        says = labels_name(name)[0]
        if suffix == ".txt" or (suffix in (".csv", ".tsv") and says):
            kinds.append("labels")
        elif suffix == ".npy":
            kinds.append("labels" if says else "embeddings")
        else:
            kinds.append("other")
    unnamed = [i for i, k in enumerate(kinds) if k == "embeddings"]
    by_content = [i for i in unnamed if len(files) > 1 and _npy_holds_labels(_Input(*files[i]))]
    if len(by_content) < len(unnamed):  # with no 2-D array beside it, a 1-D one is embeddings the reader refuses
        for i in by_content:
            kinds[i] = "labels"
    emb = [i for i, k in enumerate(kinds) if k == "embeddings"]
    lab = [i for i, k in enumerate(kinds) if k == "labels"]
    if not emb or not lab:
        if len(files) == 1 and kinds[0] == "labels" and Path(files[0][0]).suffix.lower() == ".npy":
            raise _bad(files[0][0], "looks like a labels file (by its name), but no embeddings were given.",
                       "give the embeddings file too, e.g. check embeddings.npy --labels labels.npy.")
        return [(f, None) for f in files], []  # nothing to pair: each reader says what it misses
    name_of = [f[0] for f in files]
    owner: dict[int, tuple[int, str]] = {}  # embeddings file -> (labels file, how)
    for e in emb:
        stem = Path(name_of[e]).stem.casefold()
        naming = [j for j in lab if (labels_name(name_of[j])[1] or "").casefold() == stem]
        if len(naming) > 1:
            raise _bad(name_of[e], "several labels files name it: " + ", ".join(name_of[j] for j in naming) + ".",
                       "give one labels file per embeddings file.")
        if naming:
            owner[e] = (naming[0], "paired by name")
    left_emb = [e for e in emb if e not in owner]
    left_lab = [j for j in lab if j not in {o for o, _ in owner.values()}]
    if left_emb:
        generic = len(left_lab) == 1 and labels_name(name_of[left_lab[0]]) == (True, None)
        if len(left_lab) == 1 and (generic or len(left_emb) == 1):
            how = "shared by every .npy file" if generic and len(emb) > 1 else "the only labels file left"
            owner.update({e: (left_lab[0], how) for e in left_emb})
            left_lab = []
        elif not left_lab:
            given = ", ".join(f"{name_of[j]} (for {name_of[e]})" for e, (j, _) in owner.items())
            raise _bad(name_of[left_emb[0]], f"no labels file pairs with it (the labels files given: {given}).",
                       _PAIR_FIX)
        elif len(left_lab) == 1:
            raise _bad(name_of[left_lab[0]], "could be the labels of " + " or ".join(name_of[e] for e in left_emb)
                       + ": its name pairs it with none of them.", _PAIR_FIX)
        else:
            raise _bad(", ".join(name_of[i] for i in left_emb + left_lab),
                       "cannot tell which labels file belongs to which embeddings file.", _PAIR_FIX)
    if left_lab:  # nothing given is silently dropped
        raise _bad(name_of[left_lab[0]], "looks like a labels file, but pairs with no embeddings file "
                   "(" + ", ".join(f"{name_of[e]} has {name_of[j]}" for e, (j, _) in owner.items()) + ").",
                   "name it after its embeddings file (X_labels.npy for X.npy), or leave it out.")
    shown = [Path(n).name if isinstance(d, Path) else n for n, d in files]  # as the summary's source: no folder
    notes = [f"labels of {shown[e]}: {shown[j]} ({how})" for e, (j, how) in sorted(owner.items())]
    return [(f, files[owner[i][0]] if i in owner else None) for i, f in enumerate(files) if kinds[i] != "labels"], notes


def load_bytes(files: Sequence[tuple[str, bytes | Path]], *, labels: tuple[str, bytes | Path] | None = None,
               names: Sequence[str] | None = None, feature_prefix: str | None = None,
               max_bytes: int | None = None) -> Dataset:
    """Load uploaded files (name, bytes) — or (name, path) for files on disk. A labels file may be
    among them for ``.npy`` uploads. What the readers assumed is in ``Dataset.notes``."""
    files = list(files)
    notes: list[str] = []
    explicit = labels is not None
    if explicit:
        paired = [(f, labels) for f in files]
    else:
        paired, notes = pair_labels(files)
        files = [f for f, _ in paired]
    parts = []
    for i, ((name, data), lab) in enumerate(paired):
        method = names[i] if names else None
        embs, cols = read_bytes(name, data, labels=lab, method=method, feature_prefix=feature_prefix,
                                max_bytes=max_bytes, notes=notes)
        parts.append((name, embs, cols))
    own = [name for name, _ in files if Path(name).suffix.lower() != ".npy"] if explicit else []
    if own:  # after reading: what a file really is (HDF5, a pickle, ...) is the first thing to say
        raise _bad(own[0], "a separate labels file was given, but only .npy embeddings take one: .npz, CSV "
                   "and Parquet files carry their labels inside.", "leave out the labels file (--labels) and "
                   "store the labels in the file (a 'labels' array, a 'label' column), or save the embeddings "
                   "as .npy.")
    # a file on disk is named without its folder; an upload by the name it came with (which is no
    # path, whatever characters it holds)
    source = ", ".join(Path(name).name if isinstance(data, Path) else name for name, data in files)
    return dataset_from_parts(parts, notes=list(dict.fromkeys(notes)), source=source)


def load_files(paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], *,
               labels: str | os.PathLike[str] | None = None,
               names: Sequence[str] | None = None, feature_prefix: str | None = None,
               max_bytes: int | None = None) -> Dataset:
    """Load files from disk: one dataset, one method per file (or per ``embeddings_<m>`` array).
    One path may be given alone (a string is a path, never a sequence of characters). ``.npy``
    files are memory-mapped, ``.npz`` archives read member by member."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]

    def checked(p: str | os.PathLike[str]) -> tuple[str, Path]:
        p = Path(p)
        if not p.exists():
            raise _bad(str(p), "no such file.", "check the path.")
        if p.is_dir():
            raise _bad(str(p), "is a directory.", "give a file.")
        return str(p), p

    lab = checked(labels) if labels is not None else None
    return load_bytes([checked(p) for p in paths], labels=lab, names=names, feature_prefix=feature_prefix,
                      max_bytes=max_bytes)
