"""The one type every way in produces: :class:`Dataset`, validated on construction, and how
array-likes of the Python API (pandas, masked arrays, torch/JAX tensors) become NumPy arrays."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .checks import (
    RESERVED_COLUMNS,
    check_classes,
    check_embeddings,
    check_labels,
    check_one_label_type,
    check_optional,
    reduced_float,
)


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
            raise InputError(src, "embeddings must be a non-empty dict of method name -> (n_items, dim) array.",
                             "pass embeddings={'name': array}.")
        embs: dict[str, np.ndarray] = {}
        notes = list(self.notes)
        n = None
        for m, e in self.embeddings.items():
            what = "embeddings" if len(self.embeddings) == 1 else f"embeddings_{m}"
            e = _without_reserved_columns(e, src, what, notes)
            e = check_embeddings(_as_array(e, src, what), src, what)
            if n is None:
                n = e.shape[0]
            elif e.shape[0] != n:
                raise InputError(src, f"method '{m}' has {e.shape[0]} rows but method '{next(iter(embs))}' has {n}.",
                                 "give every method the same items in the same order.")
            if str(m) in embs:
                raise InputError(src, f"two methods are both named '{m}' once their names are text (e.g. 1 and '1').",
                                 "give every method a distinct name.")
            embs[str(m)] = e
        if isinstance(self.labels, (list, tuple)):
            check_one_label_type(self.labels, src)  # np.asarray would make [1, '1'] one class silently
        fields = {"embeddings": embs, "labels": check_labels(_as_array(self.labels, src, "labels"), n, src)}
        for name, col in (("split", "split"), ("confidence", "confidence"), ("role", "role"), ("ids", "id")):
            v = getattr(self, name)
            if v is not None:
                fields[name] = check_optional(col, _as_array(v, src, col), n, src)
        if self.method_confidence:
            unknown = sorted(set(self.method_confidence) - set(embs))
            if unknown:
                raise InputError(src, f"confidence given for unknown method(s) {unknown}.",
                                 f"name methods among {list(embs)} (confidence_<method>).")
            fields["method_confidence"] = {
                str(m): check_optional("confidence", _as_array(v, src, f"confidence_{m}"), n, src)
                for m, v in self.method_confidence.items()}
        for k, v in fields.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "notes", tuple(notes))
        self._derive()
        check_classes(self)

    def _derive(self) -> None:
        names, codes = np.unique(self.labels, return_inverse=True)
        object.__setattr__(self, "class_names", names)
        object.__setattr__(self, "label_codes", codes.astype(np.int64).ravel())

    @classmethod
    def from_checked(cls, **fields) -> Dataset:
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
        from ..methods import order_methods

        try:
            names = order_methods(self.methods, order)
        except ValueError as exc:
            raise InputError(self.source, str(exc) + ".",
                             "give --order a comma list naming every method once.") from exc
        if names == self.methods:
            return self
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}
        return Dataset.from_checked(**{**fields, "embeddings": {m: self.embeddings[m] for m in names}})

    def subset(self, rows: np.ndarray, methods: Sequence[str] | None = None) -> Dataset:
        """The dataset restricted to ``rows`` (indices or boolean mask), in that order, and to
        ``methods`` (default: every method; each kept method's rows are copied). The rows are
        already valid; settings-dependent checks (:func:`validate`) still apply to the subset."""
        rows = np.asarray(rows)
        names = self.methods if methods is None else list(methods)

        def take(a):
            return None if a is None else a[rows]

        return Dataset.from_checked(
            labels=self.labels[rows], embeddings={m: self.embeddings[m][rows] for m in names},
            split=take(self.split), confidence=take(self.confidence), role=take(self.role), ids=take(self.ids),
            source=self.source, notes=self.notes,
            method_confidence=None if self.method_confidence is None else {
                m: v[rows] for m, v in self.method_confidence.items() if m in names} or None,
        )


def _as_array(x, source: str, what: str) -> np.ndarray:
    """``x`` as a NumPy array without copying when possible: NumPy arrays, lists, anything with
    ``__array__`` (pandas, most array libraries) or only ``__dlpack__`` (a CPU torch/JAX/CuPy-host
    tensor: read through the DLPack protocol, so torch need not be imported here)."""
    if isinstance(x, np.ma.MaskedArray):
        if np.ma.getmaskarray(x).any():  # np.asarray would score the hidden values
            raise InputError(source, f"'{what}' is a masked array with {int(np.ma.getmaskarray(x).sum())} masked "
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
            raise InputError(source, f"'{what}' could not be read as an array ({exc}).",
                             "pass a NumPy array (for a GPU tensor: tensor.detach().cpu().numpy()).") from exc
    try:
        return np.from_dlpack(x)
    except (TypeError, ValueError, RuntimeError, BufferError) as exc:
        raise InputError(source, f"'{what}' could not be read through DLPack ({exc}).",
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
        raise InputError(source, f"'{what}' holds only the per-item column(s) {dropped}, no features.",
                         "pass the feature columns as the embeddings.")
    notes.append(f"{source}: column(s) {dropped} of '{what}' are per-item columns, not features (as in files), "
                 f"and were left out of the vectors ({len(keep)} feature columns kept); pass them as labels=, "
                 "split=, confidence=, role=, ids= to use them.")
    return x[keep]


def _tensor_for_numpy(x):
    """A tensor (torch-like: ``.dtype``, ``.detach()``, ``.float()``) as NumPy can read it: detached
    from autograd (scoring needs no gradient), and bfloat16/float8 widened to float32 on its own
    device, which is exact. Anything else is returned as is; torch is never imported here."""
    if getattr(x, "requires_grad", False) is True and callable(getattr(x, "detach", None)):
        x = x.detach()
    if reduced_float(str(getattr(x, "dtype", ""))) and callable(getattr(x, "float", None)):
        x = x.float()
    return x
