"""CSV files are safe to open in a spreadsheet (OWASP, "CSV Injection",
https://owasp.org/www-community/attacks/CSV_Injection): no text cell of any CSV the command line
writes begins with ``= + - @``, a tab or a carriage return, numbers stay numbers, and
``per_query.parquet`` keeps the raw values."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_core.export.tables import csv_text, spreadsheet_text
from tests.helpers import run_cli

# the characters OWASP lists, written out here rather than imported: the test's own oracle
OWASP = ("=", "+", "-", "@", "\t", "\r")
LABELS = ['=HYPERLINK("http://x","y")', "+SUM(1,2)", "-2+3", "@cmd", "\tx", "\rx"]
METHODS = ["=1+2", "@m", "-m"]
SPLITS = ["=train", "@test"]


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _cells(path: Path) -> list[list[str]]:
    """The file read as text, as a spreadsheet would split it (RFC 4180 quoting)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _formula_cells(rows: list[list[str]]) -> list[str]:
    return [c for row in rows for c in row if c.startswith(OWASP) and not _number(c)]


def _expected(text: str) -> str:
    return "'" + text if text.startswith(OWASP) else text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from([*OWASP, "'", "1", ".", "e", "a", " ", '"', "\n"]), max_size=8) | st.text())
def test_a_cell_never_begins_with_a_formula_character_unless_it_is_a_number(text):
    out = spreadsheet_text(text)
    assert out in (text, "'" + text)
    if not text.startswith(OWASP):
        assert out == text  # nothing else is touched
    if out.startswith(OWASP):
        assert out == text and _number(text)  # only a plain number keeps its sign


@pytest.mark.parametrize("text", LABELS + ["-inf", "+nan", "-1+1", "--1", "-", "@"])
def test_formula_like_text_gets_a_quote_in_front(text):
    assert spreadsheet_text(text) == "'" + text


@pytest.mark.parametrize("text", ["-0.5", "+3", "-1e-5", "-.5", "a=b", "x@y", "", "'=1"])
def test_numbers_and_other_text_stay_as_they_are(text):
    assert spreadsheet_text(text) == text


def test_csv_text_keeps_numbers_and_quotes_text():
    df = pd.DataFrame({"=name": ["=a", "-0.5", "\rx", 'q"uote'], "value": [-0.5, np.nan, -1e-300, 2.0],
                       "n": [-1, 0, 3, -7], "ok": [True, False, True, False],
                       "mixed": [-2.5, "@x", None, "b"]})
    rows = list(csv.reader(io.StringIO(csv_text(df), newline="")))
    assert len(rows) == 1 + len(df)  # a carriage return stays inside its cell
    assert rows[0] == ["'=name", "value", "n", "ok", "mixed"]
    assert [r[0] for r in rows[1:]] == ["'=a", "-0.5", "'\rx", 'q"uote']
    assert not _formula_cells(rows)
    back = pd.read_csv(io.StringIO(csv_text(df)))
    np.testing.assert_array_equal(back["value"].to_numpy(), df["value"].to_numpy())  # NaN and -1e-300 exact
    assert back["n"].tolist() == df["n"].tolist() and back["ok"].tolist() == df["ok"].tolist()
    assert [r[4] for r in rows[1:]] == ["-2.5", "'@x", "", "b"]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """``evaluate --out`` and ``report --by-split`` (no figures) on a data set whose labels, ids,
    split names and method names look like formulas, with negative confidences."""
    tmp = tmp_path_factory.mktemp("formulas")
    rng = np.random.default_rng(5)
    codes = np.repeat(np.arange(len(LABELS)), 8)
    centres = rng.standard_normal((len(LABELS), 5))
    n = codes.size
    ids = np.array([f"=id{i}" if i % 2 else f"@{i}" for i in range(n)])
    data = {"labels": np.array(LABELS)[codes], "id": ids, "split": np.array(SPLITS)[np.arange(n) % 2],
            "confidence": rng.standard_normal(n)}
    for m, spread in zip(METHODS, (1.0, 0.5, 2.0), strict=True):
        data[f"embeddings_{m}"] = (centres[codes] * spread + rng.standard_normal((n, 5))).astype(np.float32)
    path = tmp / "formulas.npz"
    np.savez(path, **data)
    for args in (("evaluate", path, "--out", tmp / "evaluate", "--quiet"),
                 ("report", path, "--out", tmp / "report", "--format", "", "--by-split")):
        r = run_cli(*args)
        assert r.returncode == 0, r.stderr
    return tmp, data


def test_no_csv_the_command_line_writes_has_a_formula_cell(written):
    tmp, _ = written
    files = sorted(tmp.rglob("*.csv"))
    names = {p.relative_to(tmp).as_posix() for p in files}
    assert {"evaluate/per_query.csv", "report/per_query.csv", "report/tables/summary.csv",
            "report/tables/paired_tests.csv", "report/tables/classes.csv"} <= names, names
    assert any(p.parent.parent.name == "splits" for p in files), names  # the per-split per_query files too
    negatives = 0
    for p in files:
        rows = _cells(p)
        assert not _formula_cells(rows), (p, _formula_cells(rows)[:5])
        negatives += sum(c.startswith("-") and _number(c) for row in rows for c in row)
    assert negatives > 0  # negative numbers were written as numbers, not quoted away


@pytest.mark.parametrize("folder", ["evaluate", "report"])
def test_per_query_csv_holds_the_quoted_text_and_parquet_the_raw(written, folder):
    tmp, data = written
    rows = _cells(tmp / folder / "per_query.csv")
    header, body = rows[0], rows[1:]
    col = {c: [r[header.index(c)] for r in body] for c in ("method", "label", "id", "split")}
    raw = pd.read_parquet(tmp / folder / "per_query.parquet")
    assert len(raw) == len(body) == len(METHODS) * data["labels"].size
    for c in col:
        assert col[c] == [_expected(v) for v in raw[c].astype(str)]
    assert set(raw["method"]) == set(METHODS) and set(raw["label"]) == set(LABELS)
    assert set(raw["split"]) == set(SPLITS) and set(raw["id"]) == set(data["id"])
    # numbers untouched: the negative confidences and the metrics read back equal
    back = pd.read_csv(tmp / folder / "per_query.csv")
    assert (back["confidence"] < 0).any()
    for c in ("confidence", "ap", "ap_lower", "n_positives"):
        np.testing.assert_allclose(back[c].to_numpy(float), raw[c].to_numpy(float), rtol=1e-15, atol=0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from([*OWASP, "é", "中", "a", "1", ".", '"', ",", "\n"]), max_size=5),
                min_size=1, max_size=12))
def test_per_query_csv_cells_are_the_raw_text_made_safe(tmp_path_factory, texts):
    """Any text column (empty cells, multi-byte first characters, quotes, line breaks): the CSV
    holds each cell as OWASP's rule makes it, the Parquet file the raw text."""
    from analysis_core.export.tables import write_per_query

    out = tmp_path_factory.mktemp("pq")
    raw = np.array(texts, dtype=object)
    write_per_query({"label": raw, "ap": -np.arange(raw.size) / 7.0}, out)
    rows = _cells(out / "per_query.csv")
    # a number as text (float() reads it, no surrounding white space) keeps its sign
    assert [r[0] for r in rows[1:]] == [t if _number(t) and t == t.strip() else _expected(t) for t in texts]
    assert [float(r[1]) for r in rows[1:]] == (-np.arange(raw.size) / 7.0).tolist()
    assert pd.read_parquet(out / "per_query.parquet")["label"].tolist() == texts
