"""Tables to files: CSV and Parquet through pyarrow (several times faster than pandas' CSV
writer on large tables, and no pandas import on the command line's path), and LaTeX tables with
booktabs rules that compile as they are in a plain article (``\\usepackage{booktabs}``)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..metrics.registry import label as metric_label
from ..number_format import floor_p_columns, format_p_tex, format_value, is_p_column

_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_\allowbreak{}",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                # pdflatex's default (OT1) font prints these three as ¡ ¿ and an em dash
                "<": r"\textless{}", ">": r"\textgreater{}", "|": r"\textbar{}"}


def _arrow_column(a: np.ndarray):
    """One column as an Arrow array, built from its buffers: ``pyarrow.array`` on a NumPy array
    imports pandas (0.4 s), which the command line's path does not otherwise need."""
    import pyarrow as pa

    a = np.asarray(a)
    if a.dtype.kind == "b":
        bits = pa.py_buffer(np.packbits(a, bitorder="little"))
        return pa.Array.from_buffers(pa.bool_(), a.size, [None, bits])
    if a.dtype.kind in "iuf":
        a = np.ascontiguousarray(a, a.dtype.newbyteorder("="))
        return pa.Array.from_buffers(pa.from_numpy_dtype(a.dtype), a.size, [None, pa.py_buffer(a)])
    data = [str(v).encode("utf-8") for v in a.tolist()]
    offsets = np.zeros(len(data) + 1, np.int64)
    np.cumsum([len(b) for b in data], out=offsets[1:])
    # string (int32 offsets) built directly: a cast would import pyarrow.compute (0.1 s)
    kind = pa.string() if offsets[-1] < 2**31 else pa.large_string()
    if kind == pa.string():
        offsets = offsets.astype(np.int32)
    return pa.Array.from_buffers(kind, len(data), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(data))])


def _arrow(columns: dict[str, np.ndarray]):
    import pyarrow as pa

    return pa.Table.from_arrays([_arrow_column(a) for a in columns.values()], names=list(columns))


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


# Unicode the figures and pages use, as LaTeX that pdflatex compiles without extra packages
_TEX_UNICODE = {"−": "--", "–": "--", "—": "---", "ρ": r"$\rho$", "α": r"$\alpha$", "×": r"$\times$",
                "±": r"$\pm$", "≤": r"$\le$", "≥": r"$\ge$", "·": r"$\cdot$", "…": r"\ldots{}", "≈": r"$\approx$",
                "→": r"$\to$", "σ": r"$\sigma$", "μ": r"$\mu$", "Δ": r"$\Delta$", "χ": r"$\chi$", "²": r"$^2$"}

# a plain two-column article (10 pt): column and text width, inter-column padding, in pt
COLUMN_PT, TEXT_PT = 229.5, 469.0
MAX_ROWS = 40  # longer tables: the first rows here, every row in the CSV twin


# combining accents (Unicode NFD) as pdflatex's accent commands: é -> \'{e}, so that accented
# labels stay distinct from plain ones
_TEX_ACCENTS = {"\u0300": "\\`", "\u0301": "\\'", "\u0302": "\\^", "\u0303": "\\~", "\u0304": "\\=",
                "\u0306": "\\u", "\u0307": "\\.", "\u0308": '\\"', "\u030a": "\\r", "\u030b": "\\H",
                "\u030c": "\\v", "\u0323": "\\d", "\u0327": "\\c"}  # no ogonek (\k): OT1 has none


def tex_escape(text: str) -> str:
    """``text`` for LaTeX: special characters escaped, known Unicode symbols as LaTeX, accented
    Latin letters with pdflatex's accent commands, and any other character (pdflatex has no glyph
    for it: CJK, Cyrillic, ...) as its code point, ``U+4E2D``: distinct labels stay distinct."""
    import unicodedata

    out = []
    for ch in str(text):
        if ch in _TEX_SPECIAL:
            out.append(_TEX_SPECIAL[ch])
        elif ch in _TEX_UNICODE:
            out.append(_TEX_UNICODE[ch])
        elif ord(ch) < 128:
            out.append(ch)
        else:
            nfd = unicodedata.normalize("NFD", ch)
            base, marks = nfd[0], list(nfd[1:])
            if ord(base) < 128 and base.isalpha() and marks and all(m in _TEX_ACCENTS for m in marks):
                above = any(m not in ("\u0323", "\u0327") for m in marks)  # dot below and cedilla keep the dot
                word = {"i": "\\i", "j": "\\j"}.get(base, base) if above else base  # dotless under an accent above
                for m in marks:
                    word = f"{_TEX_ACCENTS[m]}{{{word}}}"
                out.append(word)
            else:
                out.append(f"\\textsc{{u+{ord(ch):04x}}}\\allowbreak{{}}")  # a long name may wrap
    return "".join(out)


def _cell(v, p_value: bool = False) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if p_value:
            return format_p_tex(v)
        text = format_value(v)
        if text in ("inf", "-inf"):
            return r"$\infty$" if text == "inf" else r"$-\infty$"
        if "e" in text:
            mant, exp = text.split("e")
            return rf"${mant}\times10^{{{int(exp)}}}$"
        return text
    return tex_escape(v)


class TexCell(str):
    """Text already written in LaTeX (a caption with math): not escaped."""


WRAP_PT = 110.0  # text wider than this wraps (about a third of a column)


def _width_pt(tex: str, size_pt: float) -> float:
    """A generous estimate of the printed width of a cell (digits and lower case ~0.5 em, upper
    case ~0.72 em), LaTeX markup removed."""
    import re

    t = re.sub(r"\\(times|pm|le|ge|cdot|infty|rho|alpha|approx|to|dagger)", "x", tex)
    t = re.sub(r"\\text(bf|asciitilde|asciicircum|backslash)|\\(scriptsize|footnotesize|small|ldots|allowbreak)", "", t)
    t = re.sub(r"[\\${}^]", "", t)
    t = re.sub(r"--+", "-", t)
    em = size_pt
    return sum(0.8 * em if c.isupper() or c in "@%&mw" else (0.3 * em if c in " .,:;|il" else 0.53 * em)
               for c in t)


def _layout(header: list[str], rows: list[list[str]]) -> tuple[list[float], str, float, bool]:
    """Font size command, column padding, each column's width in pt, and whether the table
    needs both columns: one column at \\small, else at \\footnotesize, else the text width."""
    options = [(r"\small", 9.0, 6.0), (r"\footnotesize", 8.0, 3.0)]
    measured = [([max(_width_pt(c, size_pt) for c in col) + 2 * sep for col in zip(header, *rows, strict=True)],
                 size, sep) for size, size_pt, sep in options]
    for limit, star in ((COLUMN_PT, False), (TEXT_PT, True)):
        for widths, size, sep in measured:
            if 1.03 * sum(widths) <= limit:  # 3% for what the estimate misses
                return widths, size, sep, star
    widths, size, sep = measured[-1]
    return widths, size, sep, True


def to_latex(df, caption: str | None = None, label: str | None = None, headers: dict | None = None,
             max_rows: int = MAX_ROWS, note: str | None = None, keys: int | None = None,
             raw: tuple[str, ...] = ()) -> str:
    """A booktabs table that fits a two-column page: ``table`` when it fits the column,
    ``table*`` when it fits the text width, else its columns in several tabulars (the first
    ``keys`` columns repeated in each; None: the columns that name a row, :func:`key_columns`).
    Numbers right-aligned (4 decimals, p-values by
    :func:`~analysis_core.number_format.format_p_tex`), text left-aligned, every special
    character escaped except in the ``raw`` columns (cells already in LaTeX: bold, marks, a value
    with its half-width); past ``max_rows`` rows, the first ones and a note that the CSV has all."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    cols = list(df.columns)
    headers = headers or {}
    header = [tex_escape(headers.get(c) or metric_label(c, short=True)) for c in cols]
    align = ["r" if c in raw or (is_numeric_dtype(df[c]) and not is_bool_dtype(df[c])) else "l" for c in cols]
    p_cols = [is_p_column(c) for c in cols]
    shown = df.iloc[:max_rows] if max_rows and len(df) > max_rows else df
    is_raw = [c in raw for c in cols]
    rows = [[str(v) if r else _cell(v, p) for v, p, r in zip(row, p_cols, is_raw, strict=True)]
            for row in shown.itertuples(index=False)]
    widths, size, sep, star = _layout(header, rows)
    # long text (a note on why a statistic is undefined) wraps in a paragraph column instead of running off
    for i, w in enumerate(widths):
        if align[i] == "l" and w > WRAP_PT + 2 * sep:
            align[i], widths[i] = f"p{{{WRAP_PT:g}pt}}", WRAP_PT + 2 * sep
            star = star and 1.03 * sum(widths) > COLUMN_PT
    # column groups that fit the text width, the key columns repeated in each
    key_cols = key_columns(df) if keys is None else list(range(min(keys, len(cols))))
    groups, current = [], list(key_cols)
    for j in (j for j in range(len(cols)) if j not in key_cols):
        # 6 % for what the estimate misses in a wide table (bold values with marks and half-widths
        # beside a wrapped name column: 5 % over the estimate, measured)
        if len(current) > len(key_cols) and 1.06 * (sum(widths[i] for i in current) + widths[j]) > TEXT_PT:
            groups.append(sorted(current))  # the table's own column order in every group
            current = list(key_cols)
        current.append(j)
    groups.append(sorted(current))
    # the printed lines (a wrapped cell takes several, every column group repeats the rows) stay
    # within max_rows, so the float fits a page ("Float too large" otherwise)
    if max_rows:
        size_pt = {r"\small": 9.0, r"\footnotesize": 8.0}.get(size, 8.0)
        heights = [max([math.ceil(_width_pt(r[i], size_pt) / WRAP_PT) for i, a in enumerate(align)
                        if a.startswith("p{")] + [1]) for r in rows]
        fit = int(np.searchsorted(np.cumsum(heights) * len(groups), max_rows, side="right"))
        rows = rows[:max(fit, 1)]
    notes = [note] if note else []
    if len(rows) < len(df):
        notes.append(f"First {len(rows)} of {len(df)} rows; the CSV file holds every row.")
    env = "table*" if star else "table"
    lines = [rf"\begin{{{env}}}[htbp]", r"\centering", size]
    if sep != 6.0:
        lines.append(rf"\setlength{{\tabcolsep}}{{{sep:g}pt}}")
    if caption:
        lines.append(rf"\caption{{{caption if isinstance(caption, TexCell) else tex_escape(caption)}}}")
    if label:
        lines.append(rf"\label{{{label}}}")
    for g, idx in enumerate(groups):
        if g:
            lines.append(r"\par\medskip")
        lines += [rf"\begin{{tabular}}{{{''.join(align[i] for i in idx)}}}", r"\toprule",
                  " & ".join(header[i] for i in idx) + r" \\", r"\midrule"]
        lines += [" & ".join(r[i] for i in idx) + r" \\" for r in rows]
        lines += [r"\bottomrule", r"\end{tabular}"]
    if notes:
        lines.append(r"\par\smallskip{\footnotesize " + tex_escape(" ".join(notes)) + "}")
    lines += [rf"\end{{{env}}}", ""]
    return "\n".join(lines)


def key_columns(df, most: int = 6) -> list[int]:
    """The positions of the columns that name a row (repeated in every column group of a wide
    table): among the leading columns that are not floats (text, integers: split, family, method,
    step, metric), in order, each that tells more rows apart than those before it, until every row
    is told apart (a column implied by the others, such as a checkpoint's step, is left out); at
    most ``most`` are looked at; at least the first column."""
    from pandas.api.types import is_float_dtype

    run = 0
    while run < min(most, len(df.columns) - 1) and not is_float_dtype(df[df.columns[run]]):
        run += 1
    chosen: list[int] = []
    distinct = 1
    for i in range(run):
        if distinct == len(df):
            break
        n = len(df.iloc[:, chosen + [i]].drop_duplicates())
        if n > distinct:
            chosen, distinct = chosen + [i], n
    return chosen or [0]


def file_stem(name: str) -> str:
    """``name`` as one file name: characters no file system takes in a name (the ``/`` of a
    ``<file stem>/<method>`` method name, ``\\ : * ? " < > |``, control characters) become ``-``,
    and a name so changed gets 6 hex digits of its digest, so two names never share a file."""
    import hashlib
    import re

    safe = re.sub(r'[/\\:*?"<>|\x00-\x1f]', "-", name)
    if safe.strip(".") == "":
        safe = "-" + safe
    return safe if safe == name else f"{safe}-{hashlib.sha1(name.encode()).hexdigest()[:6]}"


def write_table(df, out: Path, name: str, caption: str | None = None, tex: str | None = None) -> list[Path]:
    """``out/<name>.csv`` (every row, full floats, p-values floored) and its LaTeX twin
    ``out/<name>.tex`` (``tex`` if given: a compact version for the page); ``name`` made a file
    name by :func:`file_stem`."""
    out.mkdir(parents=True, exist_ok=True)
    csv, tex_path = out / f"{file_stem(name)}.csv", out / f"{file_stem(name)}.tex"
    floor_p_columns(df).to_csv(csv, index=False)
    label = f"tab:{name.replace('_', '-')}"
    tex_path.write_text(tex if tex is not None else to_latex(df, caption=caption, label=label))
    return [csv, tex_path]
