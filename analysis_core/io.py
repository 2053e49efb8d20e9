"""Loaders and validation: every input format becomes one :class:`Dataset`.

Formats (SPEC section 1):

* ``.npz`` with ``embeddings`` (or several ``embeddings_<method>``), ``labels`` and optional
  ``split``, ``confidence``, ``role``, ``id`` arrays;
* ``.npy`` embeddings plus a labels file (``.npy``, ``.csv`` or ``.txt``, one label per line);
* ``.csv`` / ``.parquet`` with a ``label`` column, the optional columns, and the vector as numeric
  columns (all remaining numeric columns, or those starting with a prefix) or one list column
  ``embedding``;
* several files with the same labels = several methods (name = file stem unless given).

Files are never unpickled: ``np.load(..., allow_pickle=False)``, object arrays are refused, and a
pickle stream is recognised by its first byte and refused before anything is parsed.
Every problem raises :class:`~analysis_core.errors.InputError` naming the file, the row/column and
the fix.
"""

from __future__ import annotations

import dataclasses
import io
import os
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import InputError

if TYPE_CHECKING:
    import pandas as pd

OPTIONAL_COLUMNS = ("split", "confidence", "role", "id")
ROLES = ("query", "gallery", "both")
SIMILARITIES = ("cosine", "dot", "euclidean")
_PICKLE_MAGIC = (b"\x80",)  # protocol 2+ pickles start with PROTO (0x80)


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
    label_codes: np.ndarray = field(init=False)
    class_names: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        src = self.source
        if not isinstance(self.embeddings, Mapping) or not self.embeddings:
            raise _bad(src, "embeddings must be a non-empty dict of method name -> (n_items, dim) array.",
                       "pass embeddings={'name': array}.")
        embs: dict[str, np.ndarray] = {}
        n = None
        for m, e in self.embeddings.items():
            what = "embeddings" if len(self.embeddings) == 1 else f"embeddings_{m}"
            e = _check_embeddings(as_array(e, src, what), src, what)
            if n is None:
                n = e.shape[0]
            elif e.shape[0] != n:
                raise _bad(src, f"method '{m}' has {e.shape[0]} rows but method '{next(iter(embs))}' has {n}.",
                           "give every method the same items in the same order.")
            embs[str(m)] = e
        fields = {"embeddings": embs, "labels": _check_labels(as_array(self.labels, src, "labels"), n, src)}
        for name, col in (("split", "split"), ("confidence", "confidence"), ("role", "role"), ("ids", "id")):
            v = getattr(self, name)
            if v is not None:
                fields[name] = _check_optional(col, as_array(v, src, col), n, src)
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "notes", tuple(self.notes))
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
        )


# --------------------------------------------------------------------------- validation helpers


def _bad(source: str, problem: str, fix: str) -> InputError:
    return InputError(source, problem, fix)


def _rows(idx: np.ndarray, limit: int = 5) -> str:
    idx = np.asarray(idx).ravel()
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    more = f" and {idx.size - limit} more" if idx.size > limit else ""
    return f"row{'s' if idx.size > 1 else ''} {shown}{more}"


def as_array(x, source: str, what: str) -> np.ndarray:
    """``x`` as a NumPy array without copying when possible: NumPy arrays, lists, anything with
    ``__array__`` (pandas, most array libraries) or only ``__dlpack__`` (a CPU torch/JAX/CuPy-host
    tensor: read through the DLPack protocol, so torch need not be imported here)."""
    if isinstance(x, np.ndarray):
        return x
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


def _nonfinite(a: np.ndarray, chunk_bytes: int = 64 << 20) -> tuple[np.ndarray, int, int]:
    """(rows holding NaN/inf, first bad row, its first bad column), checked in row chunks so a
    memory-mapped file is never materialised whole; rows empty when all is finite."""
    step = max(1, chunk_bytes // max(1, a.shape[1] * a.itemsize))
    bad_rows = []
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
    """Numeric, 2-D, non-empty, finite; returned C-contiguous as float64 if given as float64,
    else float32 (a C-contiguous float32/float64 array, memory-mapped or not, is not copied)."""
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
    a = np.ascontiguousarray(a, dtype=np.float64 if a.dtype == np.float64 else np.float32)
    rows, r0, c0 = _nonfinite(a)
    if rows.size:
        raise _bad(source, f"'{what}' has NaN or infinite values at {_rows(rows)} "
                   f"(first at row {r0}, column {c0}).",
                   "remove or repair those rows; nothing is dropped silently.")
    return a


def _check_labels(labels: np.ndarray, n: int, source: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.dtype == object:
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


def _check_optional(name: str, values: np.ndarray, n: int, source: str) -> np.ndarray:
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
            zero = ~np.any(e != 0, axis=1)
            if zero.any():
                raise _bad(f"{ds.source} [{m}]", f"all-zero vectors at {_rows(np.nonzero(zero)[0])} have no "
                           "direction, so cosine similarity is undefined for them.",
                           "use --similarity dot or euclidean, or remove those rows.")
    if ds.role is not None:
        if not np.isin(ds.role, ("query", "both")).any():
            raise _bad(ds.source, "no item has role 'query' or 'both'.", "mark some items as queries.")
        if not np.isin(ds.role, ("gallery", "both")).any():
            raise _bad(ds.source, "no item has role 'gallery' or 'both'.", "mark some items as gallery.")


# --------------------------------------------------------------------------- readers


def _refuse_pickle(data: bytes, source: str) -> None:
    if data[:1] in _PICKLE_MAGIC:
        raise _bad(source, "the file is a Python pickle; pickles can run code when loaded and are never read.",
                   "save arrays with np.save/np.savez (allow_pickle=False) or as CSV/Parquet.")


def _np_load(data: bytes, source: str):
    if not data:
        raise _bad(source, "the file is empty.", "check the upload or the path.")
    _refuse_pickle(data, source)
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "pickle" in str(exc).lower() or "object" in str(exc).lower():
            raise _bad(source, "it holds object arrays, which can only be read by unpickling; they are refused.",
                       "save numeric or string arrays (np.asarray(x, dtype=float/str)).") from exc
        raise _bad(source, f"not a readable NumPy file ({exc}).", "re-save it with np.save / np.savez.") from exc
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise _bad(source, f"corrupt or truncated archive ({exc.__class__.__name__}: {exc}).",
                   "re-save the file with np.savez and upload it again.") from exc


def _read_npz(data: bytes, source: str, method: str | None) -> tuple[dict, dict]:
    arch = _np_load(data, source)
    if not isinstance(arch, np.lib.npyio.NpzFile):
        raise _bad(source, "expected an .npz archive but found a single array.",
                   "use np.savez(path, embeddings=..., labels=...), or name the file .npy and give --labels.")
    try:
        keys = list(arch.files)
        emb_keys = [k for k in keys if k == "embeddings" or k.startswith("embeddings_")]
        if not emb_keys:
            raise _bad(source, f"no 'embeddings' array (found: {', '.join(keys) or 'nothing'}).",
                       "store vectors as 'embeddings' or 'embeddings_<method>'.")
        if "labels" not in keys:
            raise _bad(source, f"no 'labels' array (found: {', '.join(keys)}).", "store one label per row as 'labels'.")
        embs = {}
        for k in emb_keys:
            name = (method or Path(source).stem) if k == "embeddings" else k[len("embeddings_"):]
            embs[name] = _load_member(arch, k, source)
        cols = {"labels": _load_member(arch, "labels", source)}
        for c in OPTIONAL_COLUMNS:
            if c in keys:
                cols[c] = _load_member(arch, c, source)
        return embs, cols
    finally:
        arch.close()


def _load_member(arch, key: str, source: str) -> np.ndarray:
    try:
        return arch[key]
    except ValueError as exc:
        raise _bad(source, f"array '{key}' is an object array, which can only be read by unpickling; refused.",
                   f"save '{key}' as a numeric or string array.") from exc
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise _bad(source, f"array '{key}' is corrupt ({exc}).", "re-save the archive.") from exc


def _read_labels_file(data: bytes, source: str) -> np.ndarray:
    suffix = Path(source).suffix.lower()
    if suffix == ".npy":
        a = _np_load(data, source)
        return np.asarray(a)
    if not data.strip():
        raise _bad(source, "the labels file is empty.", "write one label per line.")
    if suffix == ".csv":
        df = _read_csv(data, source)
        col = "label" if "label" in df.columns else (df.columns[0] if df.shape[1] == 1 else None)
        if col is None:
            raise _bad(source, f"no 'label' column (columns: {', '.join(map(str, df.columns))}).",
                       "name the labels column 'label'.")
        return df[col].to_numpy()
    lines = data.decode("utf-8", errors="replace").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    vals = np.array([ln.strip() for ln in lines])
    try:
        as_int = vals.astype(np.int64)
        return as_int
    except ValueError:
        return vals


def _read_csv(data: bytes, source: str) -> pd.DataFrame:
    import pandas as pd

    if not data.strip():
        raise _bad(source, "the file is empty.", "check the upload or the path.")
    try:
        return pd.read_csv(io.BytesIO(data))
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise _bad(source, f"not a readable CSV ({exc}).",
                   "save it as comma-separated text with a header row.") from exc


def _read_parquet(data: bytes, source: str) -> pd.DataFrame:
    import pandas as pd

    if not data:
        raise _bad(source, "the file is empty.", "check the upload or the path.")
    try:
        return pd.read_parquet(io.BytesIO(data))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
        raise _bad(source, f"not a readable Parquet file ({exc.__class__.__name__}: {exc}).",
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


def _table_to_arrays(df: pd.DataFrame, source: str, prefix: str | None, method: str | None) -> tuple[dict, dict]:
    import pandas as pd

    if df.shape[0] == 0:
        raise _bad(source, "the table has no rows.", "provide at least two items.")
    df.columns = [str(c) for c in df.columns]
    if "label" not in df.columns:
        raise _bad(source, f"no 'label' column (columns: {', '.join(df.columns[:10])}).",
                   "name the class column 'label'.")
    cols = {"labels": df["label"].to_numpy()}
    for c in OPTIONAL_COLUMNS:
        if c in df.columns:
            cols[c] = df[c].to_numpy()
    name = method or Path(source).stem
    if "embedding" in df.columns:
        vecs = [_parse_list_cell(v, i, source) for i, v in enumerate(df["embedding"].tolist())]
        lens = {v.shape for v in vecs}
        if len(lens) != 1:
            first = next(i for i, v in enumerate(vecs) if v.shape != vecs[0].shape)
            raise _bad(source, f"column 'embedding' has vectors of different lengths (row 0 has {vecs[0].size}, "
                       f"row {first} has {vecs[first].size}).", "give every row a vector of the same length.")
        return {name: np.stack(vecs)}, cols
    reserved = {"label", *OPTIONAL_COLUMNS}
    feat = [c for c in df.columns if c not in reserved and (prefix is None or c.startswith(prefix))]
    if prefix is None:
        non_numeric = [c for c in feat if not pd.api.types.is_numeric_dtype(df[c])]
        if non_numeric:
            c = non_numeric[0]
            bad_rows = np.nonzero(pd.to_numeric(df[c], errors="coerce").isna().to_numpy())[0]
            raise _bad(source, f"column '{c}' is not numeric (e.g. {_rows(bad_rows)}), so it cannot be a feature.",
                       "fix those values, or name the feature columns with a common prefix and pass it "
                       "(--feature-prefix).")
    if not feat:
        raise _bad(source, "no feature columns found.",
                   "add numeric feature columns, or one 'embedding' list column.")
    for c in feat:
        if not pd.api.types.is_numeric_dtype(df[c]):
            raise _bad(source, f"feature column '{c}' is not numeric.", "store features as numbers.")
    return {name: df[feat].to_numpy()}, cols


def read_bytes(name: str, data: bytes, *, labels: tuple[str, bytes] | None = None,
               method: str | None = None, feature_prefix: str | None = None) -> tuple[dict, dict]:
    """Parse one file's bytes into (methods -> embeddings, columns). No cross-file checks."""
    suffix = Path(name).suffix.lower()
    if suffix == ".npz":
        return _read_npz(data, name, method)
    if suffix == ".npy":
        arr = _np_load(data, name)
        if isinstance(arr, np.lib.npyio.NpzFile):
            raise _bad(name, "named .npy but is an .npz archive.", "rename it to .npz.")
        if labels is None:
            raise _bad(name, "an .npy file holds embeddings only; labels are missing.",
                       "give the labels file too (--labels labels.npy|.csv|.txt, or upload it beside).")
        return {method or Path(name).stem: arr}, {"labels": _read_labels_file(labels[1], labels[0])}
    if suffix in (".csv", ".parquet", ".pq"):
        df = _read_csv(data, name) if suffix == ".csv" else _read_parquet(data, name)
        return _table_to_arrays(df, name, feature_prefix, method)
    raise _bad(name, f"unsupported file type '{suffix or '(none)'}'.", "use .npz, .npy (+ labels), .csv or .parquet.")


def dataset_from_parts(parts: Sequence[tuple[str, dict, dict]]) -> Dataset:
    """Combine parsed files (name, embeddings, columns) into one Dataset; files = methods."""
    if not parts:
        raise _bad("input", "no files given.", "give at least one file.")
    first_name, _, first_cols = parts[0]
    embeddings: dict[str, np.ndarray] = {}
    n = None
    for name, embs, cols in parts:
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
    opt = {c: _check_optional(c, first_cols[c], n, first_name) for c in OPTIONAL_COLUMNS if c in first_cols}
    source = ", ".join(p[0] for p in parts)
    ds = Dataset._from_checked(labels=labels, embeddings=embeddings, split=opt.get("split"),
                               confidence=opt.get("confidence"), role=opt.get("role"), ids=opt.get("id"),
                               source=source)
    _check_classes(ds)
    return ds


def load_bytes(files: Sequence[tuple[str, bytes]], *, labels: tuple[str, bytes] | None = None,
               names: Sequence[str] | None = None, feature_prefix: str | None = None) -> Dataset:
    """Load uploaded files (name, bytes). A labels file may be among them for ``.npy`` uploads."""
    files = list(files)
    if labels is None:
        npys = [f for f in files if Path(f[0]).suffix.lower() == ".npy"]
        lab = [f for f in files if Path(f[0]).stem.lower() in ("labels", "label") or
               Path(f[0]).suffix.lower() == ".txt"]
        if npys and lab:
            labels = lab[0]
            files = [f for f in files if f is not lab[0]]
    parts = []
    for i, (name, data) in enumerate(files):
        method = names[i] if names else None
        embs, cols = read_bytes(name, data, labels=labels, method=method, feature_prefix=feature_prefix)
        parts.append((name, embs, cols))
    return dataset_from_parts(parts)


def load_files(paths: str | Path | Sequence[str | Path], *, labels: str | Path | None = None,
               names: Sequence[str] | None = None, feature_prefix: str | None = None) -> Dataset:
    """Load files from disk: one dataset, one method per file (or per ``embeddings_<m>`` array).
    One path may be given alone (a string is a path, never a sequence of characters)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    def read(p: str | Path) -> bytes:
        p = Path(p)
        if not p.exists():
            raise _bad(str(p), "no such file.", "check the path.")
        if p.is_dir():
            raise _bad(str(p), "is a directory.", "give a file.")
        return p.read_bytes()

    lab = (str(labels), read(labels)) if labels is not None else None
    return load_bytes([(str(p), read(p)) for p in paths], labels=lab, names=names, feature_prefix=feature_prefix)
