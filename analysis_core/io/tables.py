"""Tables and text: CSV/TSV (delimiter sniffed, a written-out index column dropped with a note,
labels kept as text unless all are plain integers), Parquet, labels files (one label per line, a
header line recognised), and a table's columns as embeddings and per-item columns."""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InputError
from .checks import OPTIONAL_COLUMNS, RESERVED_COLUMNS, row_list
from .numpy_files import read_npy
from .sniffing import Input, refuse_kind, sniff

if TYPE_CHECKING:
    import pandas as pd

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


def read_labels_file(inp: Input, n: int | None, notes: list[str]) -> np.ndarray:
    """One label per line (.txt), a one-column or 'label'-column table (.csv/.tsv), or a .npy. A
    first line that is a header ('label', 'class', ..., or text above integer labels when there is
    one line too many) is recognised and reported in ``notes``."""
    name = inp.name
    if inp.suffix == ".npy":
        refuse_kind(sniff(inp), name)
        return np.asarray(read_npy(inp, "labels", None))
    kind = sniff(inp)
    refuse_kind(kind, name)
    data = inp.read()
    parquet = kind == "parquet" and data.endswith(b"PAR1")  # a text file may begin with 'PAR1' (a gene name)
    if kind in ("npy", "npz", "zip", "gzip") or parquet or b"\x00" in data[:65536]:
        utf16 = data[:2] in (b"\xff\xfe", b"\xfe\xff")
        what = {"npy": "a NumPy .npy array", "npz": "a NumPy .npz archive"}.get(
            kind or "",
            "a Parquet table" if parquet else "UTF-16 text (saved as 'Unicode')" if utf16 else "binary, not text")
        raise InputError(name, f"the labels file is {what}, but its name ends in '{inp.suffix}', which is read as "
                         "UTF-8 text lines.", "give labels as .npy (numpy.save(path, y)), or as UTF-8 .txt or .csv "
                         "(one label per line), or store them as the 'labels' array of an .npz holding the embeddings.")
    if not data.strip():
        raise InputError(name, "the labels file is empty.", "write one label per line.")
    if inp.suffix in (".csv", ".tsv"):
        import pandas as pd

        try:
            df = pd.read_csv(io.BytesIO(data), sep=_delimiter(data, inp.suffix), header=None, dtype=str,
                             keep_default_na=False, skip_blank_lines=True)
        except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
            raise InputError(name, f"not a readable CSV ({exc}).", "write one label per line.") from exc
        first = [str(c).strip().lower() for c in df.iloc[0].tolist()]
        if df.shape[1] > 1:
            if "label" not in first:
                raise InputError(name, f"no 'label' column (columns: {', '.join(first)}).",
                                 "name the labels column 'label'.")
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
        raise InputError(name, f"{len(values)} labels for {n} embedding rows (one too many; is the first line "
                         f"{head!r} a header?).", "remove the header line, or name it 'label'.")
    return _labels_from_text(values)


def read_csv(inp: Input, notes: list[str]) -> pd.DataFrame:
    import pandas as pd

    name = inp.name
    data = inp.read()
    if not data.strip():
        raise InputError(name, "the file is empty.", "check the upload or the path.")
    sep = _delimiter(data, inp.suffix)
    if inp.suffix == ".csv" and sep != ",":
        notes.append(f"{name}: read as {'tab' if sep == chr(9) else 'semicolon'}-separated.")
    try:
        # text columns as text: labels "007" and "7" stay distinct, ids keep leading zeros
        return pd.read_csv(io.BytesIO(data), sep=sep, dtype={c: str for c in ("label", "split", "role", "id")})
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise InputError(name, f"not a readable CSV ({exc}).",
                         "save it as comma-separated text with a header row.") from exc


def read_parquet(inp: Input) -> pd.DataFrame:
    import pandas as pd

    try:
        return pd.read_parquet(inp.path if inp.path is not None else io.BytesIO(inp.data))
    except Exception as exc:  # noqa: BLE001 - pyarrow raises many types for corrupt files
        raise InputError(inp.name, f"not a readable Parquet file ({exc.__class__.__name__}: {exc}).",
                         "re-save it with DataFrame.to_parquet.") from exc


def _parse_list_cell(v, row: int, source: str) -> np.ndarray:
    if isinstance(v, str):
        txt = v.strip().strip("[]()").replace(",", " ")
        try:
            return np.array(txt.split(), dtype=np.float64)
        except ValueError as exc:
            raise InputError(source, f"column 'embedding' at row {row} is not a list of numbers ({v[:40]!r}).",
                             "write vectors as '[0.1, 0.2, ...]'.") from exc
    try:
        return np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(source, f"column 'embedding' at row {row} is not a list of numbers.",
                         "store vectors as lists of numbers.") from exc


def table_to_arrays(df: pd.DataFrame, source: str, prefix: str | None, method: str | None,
                     notes: list[str], text: bool) -> tuple[dict, dict]:
    """Columns of a table; ``text``: read from CSV/TSV text (labels converted by
    :func:`_labels_from_text`), else typed (Parquet: string labels stay strings)."""
    import pandas as pd

    if df.shape[0] == 0:
        raise InputError(source, "the table has no rows.", "provide at least two items.")
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
            raise InputError(source, f"column {df.columns.get_loc(c) + 1} has no header ('{c}'), so it cannot be told "
                             "apart from a written-out index.",
                             "name it (e.g. 'id' to keep it as item ids), or write the table with index=False.")
    if "label" not in df.columns:
        raise InputError(source, f"no 'label' column (columns: {', '.join(df.columns[:10])}).",
                         "name the class column 'label'.")
    lab = df["label"]
    if lab.isna().any():
        raise InputError(source, f"missing labels at {row_list(np.nonzero(lab.isna().to_numpy())[0])}.",
                         "give every item a label.")
    cols = {"labels": _labels_from_text(lab.tolist()) if text else lab.to_numpy()}
    for c in OPTIONAL_COLUMNS:
        if c in df.columns:
            cols[c] = df[c].to_numpy(dtype=object) if c != "confidence" else df[c].to_numpy()
    name = method or Path(source).stem
    if "embedding" in df.columns:
        empty = df["embedding"].isna().to_numpy() | (df["embedding"].astype(str).str.strip() == "").to_numpy()
        if empty.any():
            raise InputError(source, f"column 'embedding' has no vector at {row_list(np.nonzero(empty)[0])}.",
                             "give every row a vector, or remove those rows.")
        vecs = [_parse_list_cell(v, i, source) for i, v in enumerate(df["embedding"].tolist())]
        lens = {v.shape for v in vecs}
        if len(lens) != 1:
            first = next(i for i, v in enumerate(vecs) if v.shape != vecs[0].shape)
            raise InputError(source, f"column 'embedding' has vectors of different lengths (row 0 has {vecs[0].size}, "
                             f"row {first} has {vecs[first].size}).", "give every row a vector of the same length.")
        return {name: np.stack(vecs)}, cols
    feat = [c for c in df.columns if c not in RESERVED_COLUMNS and (prefix is None or c.startswith(prefix))]
    if prefix is None:
        non_numeric = [c for c in feat if not pd.api.types.is_numeric_dtype(df[c])]
        if non_numeric:
            c = non_numeric[0]
            bad_rows = np.nonzero(pd.to_numeric(df[c], errors="coerce").isna().to_numpy())[0]
            where = f"e.g. {row_list(bad_rows)}" if bad_rows.size else f"its values are read as {df[c].dtype}, e.g. " \
                f"{str(df[c].iloc[0])[:30]!r}"
            raise InputError(source, f"column '{c}' is not numeric ({where}), so it cannot be a feature.",
                             "fix those values, or name the feature columns with a common prefix and pass it "
                             "(--feature-prefix).")
    if not feat:
        raise InputError(source, "no feature columns found.",
                         "add numeric feature columns, or one 'embedding' list column.")
    for c in feat:
        if not pd.api.types.is_numeric_dtype(df[c]):
            raise InputError(source, f"feature column '{c}' is not numeric.", "store features as numbers.")
    return {name: df[feat].to_numpy()}, cols
