"""Which labels file goes with which ``.npy`` embeddings file when several files come together
(an upload, the command line's file list): by name (``X.npy`` + ``X_labels.npy``), a shared
``labels.*`` file, or the only candidate (:func:`pair_labels`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ..errors import InputError
from .numpy_files import npy_holds_labels
from .sniffing import Input

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
    by_content = [i for i in unnamed if len(files) > 1 and npy_holds_labels(Input(*files[i]))]
    if len(by_content) < len(unnamed):  # with no 2-D array beside it, a 1-D one is embeddings the reader refuses
        for i in by_content:
            kinds[i] = "labels"
    emb = [i for i, k in enumerate(kinds) if k == "embeddings"]
    lab = [i for i, k in enumerate(kinds) if k == "labels"]
    if not emb or not lab:
        if len(files) == 1 and kinds[0] == "labels" and Path(files[0][0]).suffix.lower() == ".npy":
            raise InputError(files[0][0], "looks like a labels file (by its name), but no embeddings were given.",
                       "give the embeddings file too, e.g. check embeddings.npy --labels labels.npy.")
        return [(f, None) for f in files], []  # nothing to pair: each reader says what it misses
    name_of = [f[0] for f in files]
    owner: dict[int, tuple[int, str]] = {}  # embeddings file -> (labels file, how)
    for e in emb:
        stem = Path(name_of[e]).stem.casefold()
        naming = [j for j in lab if (labels_name(name_of[j])[1] or "").casefold() == stem]
        if len(naming) > 1:
            raise InputError(name_of[e], "several labels files name it: " + ", ".join(name_of[j] for j in naming) + ".",
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
            raise InputError(name_of[left_emb[0]], f"no labels file pairs with it (the labels files given: {given}).",
                       _PAIR_FIX)
        elif len(left_lab) == 1:
            raise InputError(name_of[left_lab[0]], "could be the labels of " + " or ".join(name_of[e] for e in left_emb)
                       + ": its name pairs it with none of them.", _PAIR_FIX)
        else:
            raise InputError(", ".join(name_of[i] for i in left_emb + left_lab),
                       "cannot tell which labels file belongs to which embeddings file.", _PAIR_FIX)
    if left_lab:  # nothing given is silently dropped
        raise InputError(name_of[left_lab[0]], "looks like a labels file, but pairs with no embeddings file "
                   "(" + ", ".join(f"{name_of[e]} has {name_of[j]}" for e, (j, _) in owner.items()) + ").",
                   "name it after its embeddings file (X_labels.npy for X.npy), or leave it out.")
    shown = [Path(n).name if isinstance(d, Path) else n for n, d in files]  # as the summary's source: no folder
    notes = [f"labels of {shown[e]}: {shown[j]} ({how})" for e, (j, how) in sorted(owner.items())]
    return [(f, files[owner[i][0]] if i in owner else None) for i, f in enumerate(files) if kinds[i] != "labels"], notes
