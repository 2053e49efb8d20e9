"""Tables to files: CSV and Parquet through pyarrow (several times faster than pandas' CSV
writer on large tables, and no pandas import on the command line's path), and LaTeX tables with
booktabs rules that compile as they are in a plain article (``\\usepackage{booktabs}``)."""

from __future__ import annotations

import math
import re
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


# Spreadsheet-safe CSV (OWASP, "CSV Injection", https://owasp.org/www-community/attacks/CSV_Injection):
# a spreadsheet reads a cell that begins with one of these as a formula (=HYPERLINK(...) sends data
# away, =cmd|... runs a program); a single quote in front makes it text.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_BYTES = np.frombuffer("".join(FORMULA_START).encode(), np.uint8)
# ... except a plain decimal number (-0.5, +3, 1e-5), which no spreadsheet reads as a formula
_PLAIN_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def spreadsheet_text(text: str) -> str:
    """``text`` as a CSV cell a spreadsheet shows as text: a cell that begins with ``= + - @``,
    a tab or a carriage return gets a single quote in front (``=1+2`` -> ``'=1+2``), as OWASP
    recommends against CSV (formula) injection, unless it is a plain decimal number (``-0.5``).
    The one rule every CSV the product writes follows (:func:`csv_text`, :func:`write_per_query`,
    the dashboard's downloads); numeric columns are never touched, and Parquet keeps the raw text.

    >>> spreadsheet_text("=SUM(A1:A9)"), spreadsheet_text("@cmd"), spreadsheet_text("-0.5"), spreadsheet_text("a-b")
    ("'=SUM(A1:A9)", "'@cmd", '-0.5', 'a-b')
    """
    if text.startswith(FORMULA_START) and not _PLAIN_NUMBER.fullmatch(text):
        return "'" + text
    return text


def _formula_rows(col) -> np.ndarray:
    """Which cells of an Arrow string column begin with a formula character, read from its
    buffers (the first byte of each non-empty value: the characters are ASCII, one byte in UTF-8)
    instead of a Python loop over a million labels."""
    import pyarrow as pa

    width = np.int64 if pa.types.is_large_string(col.type) else np.int32
    offsets = np.frombuffer(col.buffers()[1], width)[col.offset:col.offset + len(col) + 1].astype(np.int64)
    starts, nonempty = offsets[:-1], offsets[1:] > offsets[:-1]
    rows = np.zeros(len(col), bool)
    if nonempty.any():
        data = np.frombuffer(col.buffers()[2], np.uint8)
        rows[nonempty] = np.isin(data[starts[nonempty]], _FORMULA_BYTES)
    return rows


def csv_text(df) -> str:
    """``df`` as the text of a CSV file, the way every table the product writes is: no index,
    p-values floored (:func:`~analysis_core.number_format.floor_p_columns`), text cells and
    column names made safe for spreadsheets by :func:`spreadsheet_text`, every text cell quoted
    (quotes inside doubled; a carriage return stays inside its cell), numbers bare."""
    import csv

    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out = floor_p_columns(df)
    for c in out.columns:
        if not (is_numeric_dtype(out[c]) or is_bool_dtype(out[c])):
            out[c] = out[c].map(lambda v: spreadsheet_text(v) if isinstance(v, str) else v)
    out.columns = [spreadsheet_text(c) if isinstance(c, str) else c for c in out.columns]
    return out.to_csv(index=False, quoting=csv.QUOTE_NONNUMERIC)


def write_per_query(columns: dict[str, np.ndarray], out: Path) -> None:
    """``per_query.parquet`` (the values as they are) and ``per_query.csv`` (text cells safe for
    spreadsheets, :func:`spreadsheet_text`; pyarrow quotes every text cell) in ``out``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = _arrow(columns)
    pq.write_table(table, out / "per_query.parquet")
    for i, (name, a) in enumerate(columns.items()):
        col = table.column(i).chunk(0)
        if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
            continue
        rows = _formula_rows(col)
        if rows.any():  # rare: only these cells are rewritten
            safe = np.array(a, dtype=object)
            safe[rows] = [spreadsheet_text(str(v)) for v in safe[rows].tolist()]
            table = table.set_column(i, name, _arrow_column(safe))
    pacsv.write_csv(table, out / "per_query.csv")


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
MAX_ROWS = 40  # printed lines per float: a longer table continues in the next float
MAX_FLOATS = 8  # floats per table; past them, the first rows and a note (the CSV twin has every row)
GROUP_LINES = 4  # lines a column group adds besides its rows (header, rules, the skip before it)
MIN_GROUP_ROWS = 5  # rows a column group shows at least in one float (else its groups go to several floats)


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

    # stacked bounds (a superscript over a subscript: an asymmetric interval) are as wide as the wider
    t = re.sub(r"\$\^\{([^{}]*)\}_\{([^{}]*)\}\$", lambda m: max(m.group(1), m.group(2), key=len), tex)
    t = re.sub(r"\\(times|pm|le|ge|cdot|infty|rho|alpha|approx|to|dagger)", "x", t)
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
    with its half-width); past ``max_rows`` printed lines the table continues in another float
    ("(continued)"), up to :data:`MAX_FLOATS` floats; past those, a note that the CSV has every row."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    cols = list(df.columns)
    headers = headers or {}
    header = [tex_escape(headers.get(c) or metric_label(c, short=True)) for c in cols]
    align = ["r" if c in raw or (is_numeric_dtype(df[c]) and not is_bool_dtype(df[c])) else "l" for c in cols]
    p_cols = [is_p_column(c) for c in cols]
    shown = df.iloc[:max_rows * MAX_FLOATS] if max_rows and len(df) > max_rows * MAX_FLOATS else df
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
    # the printed lines (a wrapped cell takes several, every column group repeats the rows, each
    # group adds its header and rules) stay within max_rows per float, so each fits a page ("Float
    # too large" otherwise): a longer table continues in further floats — rows, and for a table of
    # many column groups the groups too — up to MAX_FLOATS (LaTeX holds at most 18 unplaced floats)
    per_float = len(groups)  # column groups in one float
    pages: list[list[list[str]]] = [rows]
    if max_rows:
        per_float = max(1, min(len(groups), max_rows // (GROUP_LINES + MIN_GROUP_ROWS)))
        budget = max(1, max_rows // per_float - GROUP_LINES)  # printed lines of rows per group and float
        size_pt = {r"\small": 9.0, r"\footnotesize": 8.0}.get(size, 8.0)
        heights = [max([math.ceil(_width_pt(r[i], size_pt) / WRAP_PT) for i, a in enumerate(align)
                        if a.startswith("p{")] + [1]) for r in rows]
        n_group_floats = -(-len(groups) // per_float)
        page: list[list[str]] = []
        pages, used = [], 0
        for r, h in zip(rows, heights, strict=True):
            if page and used + h > budget:
                pages.append(page)
                page, used = [], 0
                if (len(pages) + 1) * n_group_floats > MAX_FLOATS:
                    break
            page.append(r)
            used += h
        if page and (len(pages) + 1) * n_group_floats <= MAX_FLOATS:
            pages.append(page)
    notes = [note] if note else []
    shown_rows = sum(len(p) for p in pages)
    if shown_rows < len(df):
        notes.append(f"First {shown_rows} of {len(df)} rows; the CSV file holds every row.")
    env = "table*" if star else "table"
    floats = [(page, groups[g:g + per_float]) for page in pages for g in range(0, len(groups), per_float)]
    lines: list[str] = []
    for k, (page, float_groups) in enumerate(floats):
        lines += [rf"\begin{{{env}}}[htbp]", r"\centering", size]
        if sep != 6.0:
            lines.append(rf"\setlength{{\tabcolsep}}{{{sep:g}pt}}")
        if caption:
            text = caption if isinstance(caption, TexCell) else tex_escape(caption)
            lines.append(rf"\caption{{{text}{'' if k == 0 else ' (continued)'}}}")
        if label and k == 0:
            lines.append(rf"\label{{{label}}}")
        for g, idx in enumerate(float_groups):
            if g:
                lines.append(r"\par\medskip")
            lines += [rf"\begin{{tabular}}{{{''.join(align[i] for i in idx)}}}", r"\toprule",
                      " & ".join(header[i] for i in idx) + r" \\", r"\midrule"]
            lines += [" & ".join(r[i] for i in idx) + r" \\" for r in page]
            lines += [r"\bottomrule", r"\end{tabular}"]
        if notes and k == len(floats) - 1:
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
    """``out/<name>.csv`` (every row, full floats, :func:`csv_text`) and its LaTeX twin
    ``out/<name>.tex`` (``tex`` if given: a compact version for the page); ``name`` made a file
    name by :func:`file_stem`."""
    out.mkdir(parents=True, exist_ok=True)
    csv, tex_path = out / f"{file_stem(name)}.csv", out / f"{file_stem(name)}.tex"
    # newline="": a line break inside a quoted cell is written as it is, on every platform
    with open(csv, "w", encoding="utf-8", newline="") as f:
        f.write(csv_text(df))
    label = f"tab:{name.replace('_', '-')}"
    tex_path.write_text(tex if tex is not None else to_latex(df, caption=caption, label=label))
    return [csv, tex_path]
