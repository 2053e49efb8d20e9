"""Checks of a dataset's content, with messages that name the file, the rows and the fix: the
embeddings (numeric, 2-D, finite), the labels (one per row, one type, none missing), the optional
per-item columns, and the checks that depend on the evaluation settings (:func:`validate`). Every
problem raises :class:`~analysis_core.errors.InputError`."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError

if TYPE_CHECKING:
    from .dataset import Dataset

OPTIONAL_COLUMNS = ("split", "confidence", "role", "id")
#: columns of a table that are never features: the label and the optional per-item columns (files,
#: and frames passed to the Python API, leave them out of the vector)
RESERVED_COLUMNS = frozenset({"label", *OPTIONAL_COLUMNS})
ROLES = ("query", "gallery", "both")
SIMILARITIES = ("cosine", "dot", "euclidean")


def row_list(idx: np.ndarray, limit: int = 5) -> str:
    idx = np.asarray(idx).ravel()
    shown = ", ".join(str(int(i)) for i in idx[:limit])
    more = f" and {idx.size - limit} more" if idx.size > limit else ""
    return f"row{'s' if idx.size > 1 else ''} {shown}{more}"


def reduced_float(dtype_name: str) -> bool:
    """Float types NumPy has no dtype for (bfloat16, float8): every value is exactly a float32."""
    return dtype_name.endswith("bfloat16") or dtype_name.split(".")[-1].startswith("float8")


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


def check_embeddings(a: np.ndarray, source: str, what: str = "embeddings") -> np.ndarray:
    """Numeric, 2-D, non-empty, finite; returned C-contiguous as float64 if given as float64 (or as
    integers beyond float32's 2^24), else float32 (a C-contiguous float32/float64 array,
    memory-mapped or not, is not copied)."""
    if reduced_float(a.dtype.name):  # ml_dtypes' bfloat16 (JAX arrays): widened exactly
        a = a.astype(np.float32)
    if a.dtype == object:
        raise InputError(source, f"'{what}' is an object array, which could only be read by unpickling.",
                         "save it as a numeric array (e.g. np.asarray(x, dtype=np.float32)).")
    if a.dtype.kind not in "biuf":
        raise InputError(source, f"'{what}' has non-numeric dtype {a.dtype}.",
                         "store the vectors as float or integer numbers.")
    if a.ndim == 1:
        raise InputError(source, f"'{what}' is 1-D (shape {a.shape}); one vector per row is needed.",
                         "reshape to (n_items, dim), e.g. x.reshape(-1, 1) for 1-dimensional vectors.")
    if a.ndim != 2:
        raise InputError(source, f"'{what}' has shape {a.shape}; expected (n_items, dim).",
                         "flatten each item's vector into one row.")
    if a.shape[0] == 0 or a.shape[1] == 0:
        raise InputError(source, f"'{what}' is empty (shape {a.shape}).",
                         "provide at least two items with a vector each.")
    a = np.ascontiguousarray(a, dtype=np.float64 if a.dtype == np.float64 or _beyond_float32(a) else np.float32)
    rows, r0, c0 = _nonfinite(a)
    if rows.size:
        raise InputError(source, f"'{what}' has NaN or infinite values at {row_list(rows)} "
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


def check_one_label_type(values, source: str) -> None:
    """Labels that are all text or all numbers: a mix (1 and '1') would become one class as text."""
    text = number = None
    for i, v in enumerate(values):
        if isinstance(v, (str, bytes, np.str_, np.bytes_)):
            text = i if text is None else text
        elif isinstance(v, numbers.Number) and not _is_missing(v):
            number = i if number is None else number
        if text is not None and number is not None:
            raise InputError(source, f"labels mix numbers and text (row {number}: {values[number]!r}, row {text}: "
                             f"{values[text]!r}); as text, 1 and '1' would be one class.",
                             "give every label the same type: all int or all str.")


def check_labels(labels: np.ndarray, n: int | None, source: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.dtype == object:
        missing = np.fromiter((_is_missing(v) for v in labels.ravel()), bool, labels.size)
        if missing.any():  # None / NaN / pd.NA would become a class named 'None' / 'nan'
            raise InputError(source, f"missing labels at {row_list(np.nonzero(missing)[0])}.",
                             "give every item a label.")
        check_one_label_type(labels.ravel(), source)
        try:
            labels = labels.astype(str)
        except Exception as exc:  # noqa: BLE001 - any failure means unusable labels
            raise InputError(source, f"labels could not be read as text ({exc}).",
                             "store labels as int or str.") from exc
    if labels.ndim == 2 and 1 in labels.shape:
        labels = labels.ravel()
    if labels.ndim != 1:
        raise InputError(source, f"labels have shape {labels.shape}; expected one label per item.",
                         "give a 1-D array of labels.")
    if labels.shape[0] != n:
        raise InputError(source, f"{labels.shape[0]} labels for {n} embedding rows (length mismatch).",
                         "give exactly one label per embedding row, in the same order.")
    if labels.dtype.kind == "f":
        bad = ~np.isfinite(labels)
        if bad.any():
            raise InputError(source, f"missing (NaN) labels at {row_list(np.nonzero(bad)[0])}.",
                             "give every item a label.")
        if np.all(labels == np.round(labels)):
            labels = labels.astype(np.int64)
    if labels.dtype.kind in "US":
        empty = np.char.str_len(labels.astype(str)) == 0
        if empty.any():
            raise InputError(source, f"empty labels at {row_list(np.nonzero(empty)[0])}.", "give every item a label.")
    if labels.dtype.kind == "b":
        labels = labels.astype(np.int64)
    return labels


def check_optional(name: str, values: np.ndarray, n: int | None, source: str) -> np.ndarray:
    values = np.asarray(values)
    if values.dtype == object:
        values = values.astype(str)
    if values.ndim != 1 or values.shape[0] != n:
        raise InputError(source, f"column '{name}' has shape {values.shape}; expected {n} values, one per item.",
                         f"give one '{name}' value per item.")
    if name == "confidence":
        if values.dtype.kind not in "biuf":
            raise InputError(source, f"column 'confidence' is not numeric (dtype {values.dtype}).",
                             "give confidences as numbers.")
        values = values.astype(np.float64)
        bad = ~np.isfinite(values)
        if bad.any():
            raise InputError(source, f"column 'confidence' has NaN/inf at {row_list(np.nonzero(bad)[0])}.",
                             "give every item a finite confidence, or drop the column.")
        return values
    if name == "role":
        values = np.char.lower(np.char.strip(values.astype(str)))
        bad = ~np.isin(values, ROLES)
        if bad.any():
            seen = sorted(set(values[bad].tolist()))[:5]
            raise InputError(source, f"column 'role' has unknown values {seen} at {row_list(np.nonzero(bad)[0])}.",
                             "use only 'query', 'gallery' or 'both'.")
        return values
    if name == "split":
        values = values.astype(str)
        bad = (np.char.str_len(np.char.strip(values)) == 0) | np.isin(np.char.lower(values), ("nan", "none"))
        if bad.any():
            raise InputError(source, f"column 'split' has empty values at {row_list(np.nonzero(bad)[0])}.",
                             "give every item a split name (e.g. train/val/test), or drop the column.")
        return values
    return values.astype(str)


def check_classes(ds: Dataset) -> None:
    """Checks of the content that hold whatever the settings: two items, two classes."""
    if ds.n_classes < 2:
        raise InputError(ds.source, f"all {ds.n_items} items are in one class ('{ds.class_names[0]}'); "
                         "retrieval of same-class items cannot be scored.",
                         "provide items of at least two classes.")
    if ds.n_items < 2:
        raise InputError(ds.source, "fewer than two items.", "provide at least two items.")


def validate(ds: Dataset, similarity: str = "cosine") -> None:
    """Checks that depend on the evaluation settings, and the content checks again for subsets
    (a split or a class sample of a valid dataset may hold one class): raise :class:`InputError`."""
    if similarity not in SIMILARITIES:
        raise InputError(ds.source, f"unknown similarity '{similarity}'.", f"use one of {', '.join(SIMILARITIES)}.")
    check_classes(ds)
    if similarity == "cosine":
        for m, e in ds.embeddings.items():
            step = max(1, (64 << 20) // max(1, e.shape[1] * e.itemsize))  # row chunks: no N x d temporary
            zero = np.concatenate([~np.any(e[i:i + step] != 0, axis=1) for i in range(0, e.shape[0], step)])
            if zero.any():
                raise InputError(f"{ds.source} [{m}]", f"all-zero vectors at {row_list(np.nonzero(zero)[0])} have no "
                                 "direction, so cosine similarity is undefined for them.",
                                 "choose the dot or euclidean similarity (--similarity dot, similarity='dot', or the "
                                 "dashboard's Similarity control), or remove those rows.")
    if ds.role is not None:
        if not np.isin(ds.role, ("query", "both")).any():
            raise InputError(ds.source, "no item has role 'query' or 'both'.", "mark some items as queries.")
        if not np.isin(ds.role, ("gallery", "both")).any():
            raise InputError(ds.source, "no item has role 'gallery' or 'both'.", "mark some items as gallery.")
