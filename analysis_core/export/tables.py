"""Tables to files: CSV and Parquet through pyarrow (several times faster than pandas' CSV
writer on large tables, and no pandas import on the command line's path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def _arrow(columns: dict[str, np.ndarray]):
    import pyarrow as pa

    return pa.table({c: (a.astype(str) if a.dtype.kind in "OUS" else a) for c, a in columns.items()})


def write_per_query(columns: dict[str, np.ndarray], out: Path) -> None:
    """``per_query.csv`` and ``per_query.parquet`` in ``out``."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = _arrow(columns)
    pacsv.write_csv(table, out / "per_query.csv")
    pq.write_table(table, out / "per_query.parquet")
