"""Tables to files: CSV and Parquet through pyarrow (several times faster than pandas' CSV
writer on large tables, and no pandas import on the command line's path), and LaTeX tables with
booktabs rules that compile as they are in a plain article (``\\usepackage{booktabs}``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


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


def _json_safe(obj):
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def json_text(obj) -> str:
    """Indented JSON with NaN/inf written as null (strict JSON readers reject NaN)."""
    import json

    return json.dumps(_json_safe(obj), indent=2) + "\n"


def tex_escape(text: str) -> str:
    return "".join(_TEX_SPECIAL.get(ch, ch) for ch in str(text)).replace("−", "--")


def _cell(v) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return "--"
        if math.isinf(v):
            return r"$\infty$" if v > 0 else r"$-\infty$"
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e5):
            mant, exp = f"{v:.2e}".split("e")
            return rf"${mant}\times10^{{{int(exp)}}}$"
        return f"{v:.4f}"
    return tex_escape(v)


def to_latex(df, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs ``table`` environment: numbers right-aligned (4 decimals, scientific notation
    for very small or large values), text left-aligned, every special character escaped."""
    cols = list(df.columns)
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    align = "".join("r" if is_numeric_dtype(df[c]) and not is_bool_dtype(df[c]) else "l" for c in cols)
    lines = [r"\begin{table}[htbp]", r"\centering", r"\small"]
    if caption:
        lines.append(rf"\caption{{{tex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    lines += [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(tex_escape(c) for c in cols) + r" \\",
              r"\midrule"]
    for row in df.itertuples(index=False):
        lines.append(" & ".join(_cell(v) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def write_table(df, out: Path, name: str, caption: str | None = None) -> list[Path]:
    """``out/<name>.csv`` and its LaTeX twin ``out/<name>.tex``."""
    out.mkdir(parents=True, exist_ok=True)
    csv, tex = out / f"{name}.csv", out / f"{name}.tex"
    df.to_csv(csv, index=False)
    tex.write_text(to_latex(df, caption=caption, label=f"tab:{name.replace('_', '-')}"))
    return [csv, tex]
