"""One file into (method -> embeddings, per-item columns): the content is sniffed first
(:mod:`.sniffing`), then the reader of the file's extension parses it (:data:`READERS`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .numpy_files import Allowance, allowance, read_npy, read_npz
from .sniffing import TO_NPZ, Input, refuse_kind, sniff
from .tables import read_csv, read_labels_file, read_parquet, table_to_arrays


@dataclass(frozen=True)
class ReadOptions:
    """What :func:`read_bytes` was asked besides the file itself."""

    labels: tuple[str, bytes | Path] | None  # the labels file of a .npy
    method: str | None  # the method's name (default: the file stem)
    feature_prefix: str | None  # feature columns of a table: those starting with it
    budget: Allowance  # what the load may still allocate
    notes: list[str]  # what the reader assumed, appended to


def _npz(inp: Input, kind: str | None, opts: ReadOptions) -> tuple[dict, dict]:
    if kind == "npy":
        raise InputError(inp.name, "expected an .npz archive but found a single array.",
                         "use np.savez(path, embeddings=..., labels=...), or name the file .npy and give --labels.")
    if kind != "npz":
        raise InputError(inp.name, "not a NumPy .npz archive (no zip signature; corrupt or another format).",
                         f"create it with {TO_NPZ}.")
    return read_npz(inp, opts.method, opts.budget)


def _npy(inp: Input, kind: str | None, opts: ReadOptions) -> tuple[dict, dict]:
    if kind == "npz":
        raise InputError(inp.name, "named .npy but is an .npz archive.", "rename it to .npz.")
    if kind != "npy":
        raise InputError(inp.name, "not a NumPy .npy file (no NumPy signature; corrupt or another format).",
                         "save the embeddings with numpy.save(path, X).")
    arr = read_npy(inp, "embeddings", opts.budget)
    if opts.labels is None:
        raise InputError(inp.name, "an .npy file holds embeddings only; labels are missing.",
                         "give the labels file too (--labels labels.npy|.csv|.txt, or upload it beside).")
    n = arr.shape[0] if arr.ndim >= 1 else None
    return ({opts.method or Path(inp.name).stem: arr},
            {"labels": read_labels_file(Input(*opts.labels), n, opts.notes)})


def _text_table(inp: Input, kind: str | None, opts: ReadOptions) -> tuple[dict, dict]:
    return table_to_arrays(read_csv(inp, opts.notes), inp.name, opts.feature_prefix, opts.method, opts.notes,
                           text=True)


def _parquet(inp: Input, kind: str | None, opts: ReadOptions) -> tuple[dict, dict]:
    return table_to_arrays(read_parquet(inp), inp.name, opts.feature_prefix, opts.method, opts.notes, text=False)


Reader = Callable[[Input, str | None, ReadOptions], tuple[dict, dict]]
#: file extension (lower case) -> its reader, given the file, its sniffed kind and the options
READERS: dict[str, Reader] = {".npz": _npz, ".npy": _npy, ".csv": _text_table, ".tsv": _text_table,
                              ".parquet": _parquet, ".pq": _parquet}


def read_bytes(name: str, data: bytes | Path, *, labels: tuple[str, bytes | Path] | None = None,
               method: str | None = None, feature_prefix: str | None = None,
               max_bytes: int | Allowance | None = None,
               notes: list[str] | None = None) -> tuple[dict, dict]:
    """Parse one file (its bytes, or its path on disk) into (methods -> embeddings, columns); no
    cross-file checks. The content is sniffed first: pickles, PyTorch, HDF5, safetensors files and
    images are refused with how to convert them, whatever their name. ``max_bytes`` limits what
    its arrays may declare (default :func:`~.numpy_files.default_max_bytes`; an
    :class:`~.numpy_files.Allowance` shared with other files); ``notes`` collects what the reader
    assumed (a dropped index column, a header line)."""
    notes = [] if notes is None else notes
    inp = Input(name, data)
    if inp.size == 0:
        raise InputError(name, "the file is empty.", "check the upload or the path.")
    kind = sniff(inp)
    refuse_kind(kind, name)
    reader = READERS.get(inp.suffix)
    if reader is None:
        raise InputError(name, f"unsupported file type '{inp.suffix or '(none)'}'.",
                         "use .npz, .npy (+ labels), .csv, .tsv or .parquet.")
    return reader(inp, kind, ReadOptions(labels=labels, method=method, feature_prefix=feature_prefix,
                                         budget=allowance(max_bytes), notes=notes))
