"""Loading: parsed files combined into one :class:`~analysis_core.io.dataset.Dataset` (several
files = several methods), from uploads (name, bytes) or from paths on disk."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..demo import missing_file_fix
from ..errors import InputError
from .checks import OPTIONAL_COLUMNS, check_classes, check_embeddings, check_labels, check_optional, row_list
from .dataset import Dataset
from .numpy_files import Allowance, allowance, declare
from .pairing import pair_labels
from .readers import read_bytes
from .sniffing import Input


def dataset_from_parts(parts: Sequence[tuple[str, dict, dict]], notes: Sequence[str] = (),
                       source: str | None = None) -> Dataset:
    """Combine parsed files (name, embeddings, columns) into one Dataset; files = methods."""
    if not parts:
        raise InputError("input", "no files given.", "give at least one file.")
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
            e = check_embeddings(np.asarray(e), name, f"embeddings_{m}" if len(embs) > 1 else "embeddings")
            if n is None:
                n = e.shape[0]
            if e.shape[0] != n:
                raise InputError(name, f"method '{m}' has {e.shape[0]} rows but {first_name} has {n}.",
                                 "every file must hold the same items in the same order.")
            if m in embeddings:
                raise InputError(name, f"method name '{m}' is used twice.", "rename one of the files (or the array).")
            embeddings[m] = e
        labs = check_labels(cols["labels"], n, name)
        if name != first_name:
            ref = check_labels(first_cols["labels"], n, first_name)
            if labs.astype(str).tolist() != ref.astype(str).tolist():
                diff = np.nonzero(labs.astype(str) != ref.astype(str))[0]
                raise InputError(name, f"labels differ from {first_name} at {row_list(diff)}.",
                                 "several files are several methods over the same items: use the same labels "
                                 "and order.")
    labels = check_labels(first_cols["labels"], n, first_name)
    opt = {c: check_optional(c, first_cols[c], n, first_name) for c in OPTIONAL_COLUMNS if c in first_cols
           if not (several and c == "confidence")}
    conf = {m: check_optional("confidence", v, n, m) for m, v in method_conf.items()} or None
    if source is None:  # file names: no folder reaches summary.json
        source = ", ".join(Path(p[0]).name for p in parts)
    from ..methods import natural_key

    ordered = {m: embeddings[m] for m in sorted(embeddings, key=natural_key)}
    ds = Dataset.from_checked(labels=labels, embeddings=ordered, split=opt.get("split"),
                               confidence=opt.get("confidence"), role=opt.get("role"), ids=opt.get("id"),
                               source=source, notes=tuple(notes), method_confidence=conf)
    check_classes(ds)
    return ds


def load_bytes(files: Sequence[tuple[str, bytes | Path]], *, labels: tuple[str, bytes | Path] | None = None,
               names: Sequence[str] | None = None, feature_prefix: str | None = None,
               max_bytes: int | Allowance | None = None) -> Dataset:
    """Load uploaded files (name, bytes) — or (name, path) for files on disk. A labels file may be
    among them for ``.npy`` uploads (paired by :func:`~.pairing.pair_labels`, each pairing in
    ``Dataset.notes``). What the readers assumed is in ``Dataset.notes``. ``max_bytes`` bounds
    what the files together may allocate (default: half the memory available; an
    :class:`~.numpy_files.Allowance` to share a budget): every .npz's and in-memory .npy's headers
    are checked against it before any file is read."""
    files = list(files)
    budget = allowance(max_bytes)
    for name, data in files:
        declare(Input(name, data), budget)
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
                                max_bytes=budget, notes=notes)
        parts.append((name, embs, cols))
    own = [name for name, _ in files if Path(name).suffix.lower() != ".npy"] if explicit else []
    if own:  # after reading: what a file really is (HDF5, a pickle, ...) is the first thing to say
        raise InputError(own[0], "a separate labels file was given, but only .npy embeddings take one: .npz, CSV "
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
               max_bytes: int | Allowance | None = None) -> Dataset:
    """Load files from disk: one dataset, one method per file (or per ``embeddings_<m>`` array).
    One path may be given alone (a string is a path, never a sequence of characters). ``.npy``
    files are memory-mapped, ``.npz`` archives read member by member."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]

    def checked(p: str | os.PathLike[str]) -> tuple[str, Path]:
        p = Path(p)
        if not p.exists():
            raise InputError(str(p), "no such file.", missing_file_fix(p) or "check the path.")
        if p.is_dir():
            raise InputError(str(p), "is a directory.", "give a file.")
        return str(p), p

    lab = checked(labels) if labels is not None else None
    return load_bytes([checked(p) for p in paths], labels=lab, names=names, feature_prefix=feature_prefix,
                      max_bytes=max_bytes)
