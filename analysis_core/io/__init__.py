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

The package, by concept: :mod:`.dataset` (the :class:`Dataset` type and array intake),
:mod:`.checks` (validation), :mod:`.sniffing` (what a file is), :mod:`.numpy_files` and
:mod:`.tables` (parsers), :mod:`.readers` (the table from extension to reader), :mod:`.pairing`
(which labels file goes with which embeddings file), :mod:`.loading` (files -> one Dataset).
"""

from __future__ import annotations

from .checks import OPTIONAL_COLUMNS, RESERVED_COLUMNS, ROLES, SIMILARITIES, validate
from .dataset import Dataset
from .loading import dataset_from_parts, load_bytes, load_files
from .numpy_files import default_max_bytes
from .pairing import labels_name, pair_labels
from .readers import READERS, read_bytes

__all__ = ["OPTIONAL_COLUMNS", "READERS", "RESERVED_COLUMNS", "ROLES", "SIMILARITIES", "Dataset", "dataset_from_parts",
           "default_max_bytes", "labels_name", "load_bytes", "load_files", "pair_labels", "read_bytes", "validate"]
