"""The Python front door: ``evaluate(embeddings, labels, ...)`` on arrays and ``load(paths)``.

Arrays go through the same checks as files (:class:`~analysis_core.io.Dataset` validates on
construction), so a notebook gets the loaders' :class:`~analysis_core.errors.InputError` messages.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .engine.core import Progress
from .errors import InputError
from .evaluation import Evaluation
from .evaluation import evaluate as _evaluate_dataset
from .io import Dataset, load_files
from .provenance import provenance

ArrayLike = Any  # a NumPy array, a list, or anything with __array__ / __dlpack__ (a CPU tensor)
# the settings evaluation.evaluate takes, besides the dataset and the split (named here)
_SIGNATURE = inspect.signature(_evaluate_dataset).parameters
_OPTIONS = frozenset(_SIGNATURE) - {"ds", "split", "progress"}


def evaluate(embeddings: ArrayLike | Mapping[str, ArrayLike] | Dataset, labels: ArrayLike | None = None, *,
             split: ArrayLike | str | None = None, confidence: ArrayLike | None = None,
             role: ArrayLike | None = None, ids: ArrayLike | None = None, name: str = "embeddings",
             within_split: str | None = None, progress: Progress | None = None, **options: Any) -> Evaluation:
    """Evaluate embeddings against class labels (leave-one-out unless ``role`` is given).

    Parameters
    ----------
    embeddings : array of shape (n_items, dim), dict of name -> array, or Dataset
        One method's vectors (a NumPy array, a list of lists, or anything with ``__array__`` or
        ``__dlpack__``, e.g. a CPU torch tensor: ``evaluate(model(x).detach(), y)``); a dict
        evaluates several methods over the same items; a :class:`Dataset` (from :func:`load`) is
        evaluated as it is, and then no per-item keyword may be given.
    labels : array of shape (n_items,)
        Class of each item (int or str). Required unless ``embeddings`` is a Dataset.
    split, confidence, role, ids : array of shape (n_items,), optional
        The optional per-item columns of the file formats (split name, the model's confidence,
        ``query``/``gallery``/``both``, item identifier). With a Dataset, ``split`` may instead
        name the split to evaluate, as in :func:`analysis_core.evaluation.evaluate`.
    name : str
        Method name when ``embeddings`` is a single array.
    within_split : str, optional
        Evaluate only the items of this split (queries and gallery inside it).
    **options
        Passed to :func:`analysis_core.evaluation.evaluate`: ``similarity``, ``ks``,
        ``n_recall``, ``group_size``, ``max_classes``, ``query_sample``, ``seed``, ``alpha``,
        ``precision`` (``"float32"``, the default, or ``"float64"``: similarities in double
        precision, for float64 embeddings whose near-equal scores float32 would tie), ...

    Returns
    -------
    Evaluation
        ``summary_frame()``, ``to_dict()`` (the ``summary.json`` document), ``per_query(method)``.

    Raises
    ------
    InputError
        With the file loaders' messages: NaN rows named, length mismatch, 1-D embeddings, one
        class, zero vectors under cosine, bad optional columns, unknown options' values.
    """
    unknown = sorted(set(options) - _OPTIONS)
    if unknown:
        raise InputError("evaluate", f"unknown option(s) {unknown}.", f"use some of {', '.join(sorted(_OPTIONS))}.")
    if isinstance(embeddings, Dataset):
        given = [k for k, v in (("labels", labels), ("confidence", confidence), ("role", role), ("ids", ids))
                 if v is not None]
        if split is not None and within_split is not None:
            raise InputError("evaluate", "both split and within_split name the split to evaluate.",
                             "give one of them.")
        if given or (split is not None and not isinstance(split, str)):
            raise InputError("evaluate", f"per-item {given or ['split']} given together with a Dataset.",
                             "put the columns into the Dataset, or pass arrays instead of the Dataset.")
        # a Dataset's caller (the command line, the dashboard) knows its files and records its own provenance
        return _evaluate_dataset(embeddings, split=within_split if split is None else split, progress=progress,
                                 **options)
    if labels is None:
        frame = "a 'label' column of the frame" if "label" in map(str, getattr(embeddings, "columns", ())) else ""
        raise InputError("evaluate", "no labels given" + (f" ({frame} is not read as the labels)." if frame else "."),
                         "call evaluate(embeddings, labels), one label per row"
                         + (": evaluate(df.drop(columns='label'), df['label'])." if frame else "."))
    if isinstance(split, str):
        raise InputError("evaluate", f"split='{split}' names a split, but arrays need one split name per item.",
                         "pass split=<array of split names> and within_split='<name>' to evaluate one split.")
    embs = dict(embeddings) if isinstance(embeddings, Mapping) else {name: embeddings}
    ds = Dataset(labels=labels, embeddings=embs, split=split, confidence=confidence, role=role, ids=ids,
                 source="input arrays").ordered()  # natural order (e2 before e10), as files are loaded
    for note in ds.notes:  # a notebook shows warnings; the loaders' notes go to the CLI's stderr
        warnings.warn(note, UserWarning, stacklevel=2)
    ev = _evaluate_dataset(ds, split=within_split, progress=progress, **options)
    return _with_provenance(ev, {**options, "within_split": within_split, "name": name})


def _with_provenance(ev: Evaluation, options: dict[str, Any]) -> Evaluation:
    """``ev`` with the provenance block of an API call on arrays: the options given and the defaults
    used (arrays have no file to digest)."""
    used = {k: p.default for k, p in _SIGNATURE.items() if k in _OPTIONS} | {
        k: v for k, v in options.items() if v is not None}
    used.pop("compute", None)  # an object, not a setting: the results do not depend on it
    block = provenance(command="api", options=used, seed=used.get("seed"), precision=ev.precision)
    return ev._sharing(dataclasses.replace(ev, provenance=block), ev._summaries)  # its passes' replicates kept


def load(path_or_paths: str | os.PathLike | Sequence[str | os.PathLike], *, labels: str | os.PathLike | None = None,
         names: Sequence[str] | None = None, feature_prefix: str | None = None) -> Dataset:
    """Load one file or several (one method per file) into a validated :class:`Dataset`.

    Formats: ``.npz`` (``embeddings`` or ``embeddings_<method>``, ``labels``, optional ``split``,
    ``confidence``, ``role``, ``id``), ``.npy`` embeddings with a ``labels`` file, ``.csv`` /
    ``.tsv`` / ``.parquet`` tables with a ``label`` column. Files are never unpickled. Problems
    raise :class:`InputError` naming the file and the fix; what the loader assumed (e.g. a dropped
    index column) is in ``Dataset.notes``.
    """
    paths = [path_or_paths] if isinstance(path_or_paths, (str, os.PathLike)) else list(path_or_paths)
    return load_files([Path(p) for p in paths], labels=labels, names=names, feature_prefix=feature_prefix)
