"""Paper exports: every figure of `report` at the preset's physical size (pdfinfo, pdffonts, the
SVG's root size, the PNG's pixels), on a small 3-method, 10-class data set with splits and
confidences."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from analysis_core import evaluate, load_files
from analysis_core.export.figures import FORMATS, INSTALL_COMMAND, FigureStyle, chromium_path, figure_bytes
from analysis_core.export.main_table import summary_frame
from analysis_core.export.tables import tex_escape, to_latex
from analysis_core.number_format import P_FLOOR, floor_p_columns, format_p, is_p_column
from analysis_core.report import build_report, write_report

from ..helpers import P_CELL, ROOT, compile_two_column, p_cells, run_cli

METHODS = ["model_e1", "model_e2", "model_e3"]  # checkpoints of one run, of increasing quality
FIGURES = ({"pr_bands", "ap_by_class", "tukey_hsd", "paired_differences", "grouped_recall_by_size", "erc",
            "histograms_over_checkpoints"} | {f"histograms_{m}" for m in METHODS}
           | {f"generalization_{m}" for m in METHODS}
           | {f"checkpoints__{split}" for split in ("train", "test")}
           | {f"checkpoint_classes__{split}__model" for split in ("train", "test")})  # family "model"
HAVE_TOOLS = chromium_path() is not None and shutil.which("pdfinfo") and shutil.which("pdffonts")
_poppler = pytest.mark.skipif(not HAVE_TOOLS, reason="Chromium or poppler-utils missing (make test installs them)")


def needs_tools(test):
    """Chromium (marker ``browser``) and poppler-utils."""
    return pytest.mark.browser(_poppler(test))


def small_dataset(path: Path) -> Path:
    """3 methods of increasing quality, 10 classes of 12 items, a train/test split by class, and
    confidences."""
    rng = np.random.default_rng(1)
    labels = np.repeat(np.arange(10), 12)
    centres = rng.standard_normal((10, 8))
    emb = {f"embeddings_{m}": (centres[labels] * (0.6 + 0.4 * i) + rng.standard_normal((labels.size, 8)))
           .astype(np.float32) for i, m in enumerate(METHODS)}
    np.savez(path, labels=labels, split=np.where(labels < 6, "train", "test"), confidence=rng.random(labels.size),
             **emb)
    return path


@pytest.fixture(scope="module")
def small_npz(tmp_path_factory) -> Path:
    return small_dataset(tmp_path_factory.mktemp("data") / "small.npz")


@pytest.fixture(scope="module")
def built(small_npz):
    ev = evaluate(load_files([small_npz]))
    return ev, build_report(ev, sweep_repeats=1)


def _pdf_size_in(path: Path) -> tuple[float, float]:
    out = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True).stdout
    w, h = re.search(r"Page size:\s+([\d.]+) x ([\d.]+) pts", out).groups()
    return float(w) / 72, float(h) / 72


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def check_figures(folder: Path, style: FigureStyle, names: set[str] = FIGURES) -> None:
    """Every figure in ``folder`` at ``style``'s size in all three formats, fonts embedded."""
    assert {p.stem for p in folder.glob("*.pdf")} == names
    for name in names:
        w, h = _pdf_size_in(folder / f"{name}.pdf")
        assert abs(w - style.width_in) * 72 <= 0.01, (name, w)  # to pdfinfo's 0.01 pt
        assert 0.2 * style.width_in < h < 4 * style.width_in, (name, h)
        fonts = subprocess.run(["pdffonts", str(folder / f"{name}.pdf")], capture_output=True, text=True,
                               check=True).stdout.splitlines()[2:]
        assert fonts and all(re.search(r"\byes\s+(yes|no)\s+(yes|no)\s+\d+\s+\d+\s*$", f) for f in fonts), fonts
        svg = (folder / f"{name}.svg").read_text()
        root = svg[svg.index("<svg"):svg.index(">", svg.index("<svg"))]
        assert abs(float(re.search(r'\bwidth="([\d.]+)in"', root).group(1)) - style.width_in) <= 0.01
        assert abs(float(re.search(r'\bheight="([\d.]+)in"', root).group(1)) - h) <= 0.01
        # every text at the set size or larger (titles): CSS px = pt * 96 / 72
        sizes = [float(s) for s in re.findall(r"font-size: ?([\d.]+)px", svg)]
        assert sizes and min(sizes) == pytest.approx(style.font_size * 96 / 72, abs=0.01), (name, min(sizes))
        pw, ph = _png_size(folder / f"{name}.png")
        assert pw == round(style.width_in * style.dpi), (name, pw)
        with Image.open(folder / f"{name}.png") as im:  # the resolution a word processor places it at
            assert im.info["dpi"] == pytest.approx((style.dpi, style.dpi), abs=0.01), (name, im.info)
        assert abs(ph - h * style.dpi) <= 3, (name, ph, h)  # pdfinfo rounds to 0.01 pt


@pytest.fixture(scope="module")
def cli_report(small_npz, tmp_path_factory) -> Path:
    """`report` on the small data set: figures (when Chromium is there) at a custom 5 in, 200 dpi."""
    out = tmp_path_factory.mktemp("cli") / "rep"
    r = run_cli("report", small_npz, "--out", out, "--format", "pdf,svg,png" if HAVE_TOOLS else "", "--style", "custom",
                "--width", "5", "--dpi", "200", "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    return out


@pytest.mark.slow
@needs_tools
def test_report_cli_figures_have_the_custom_width_and_dpi(cli_report):
    check_figures(cli_report / "figures", FigureStyle.preset("custom", width_in=5.0, dpi=200))


@pytest.mark.slow
@needs_tools
@pytest.mark.parametrize("preset", ["single", "double"])
def test_report_figures_have_the_presets_physical_size(built, preset, tmp_path):
    ev, rep = built
    style = FigureStyle.preset(preset)
    assert style.width_in == {"single": 3.5, "double": 7.2}[preset]
    write_report(ev, rep, tmp_path, ("pdf", "svg", "png"), style)
    check_figures(tmp_path / "figures", style)


def test_custom_style_needs_its_width_and_bad_sizes_are_refused(small_npz, tmp_path):
    r = run_cli("report", small_npz, "--out", tmp_path / "x", "--style", "custom")
    assert r.returncode == 2 and "--width" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("report", small_npz, "--out", tmp_path / "x", "--style", "custom", "--width", "0.2")
    assert r.returncode == 2 and "Traceback" not in r.stderr


@pytest.mark.slow
def test_report_without_chromium_exits_2_with_the_install_command_before_computing(tmp_path, monkeypatch):
    monkeypatch.setenv("BROWSER_PATH", str(tmp_path / "no-chromium"))  # kaleido's own override
    assert chromium_path() is None
    out = tmp_path / "rep"
    # without --quiet every pass shows its progress on stderr: none shown means none computed (a
    # condition, not a time limit, so it holds on a loaded machine)
    r = run_cli("report", ROOT / "demo_data" / "many_classes.npz", "--out", out, "--format", "pdf")
    assert "%" not in r.stderr and "positives" not in r.stderr, r.stderr
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert INSTALL_COMMAND in r.stderr and "Chromium" in r.stderr
    assert not out.exists()
    # without figures, no Chromium is needed
    r = run_cli("report", small_dataset(tmp_path / "s.npz"), "--out", out, "--format", "", "--quiet",
                "--sweep-repeats", "1")
    assert r.returncode == 0, r.stderr


# ---- tables ------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.latex
def test_every_report_table_compiles_in_two_columns_without_overfull_boxes(cli_report, tmp_path):
    texs = sorted((cli_report / "tables").glob("*.tex"))
    names = {t.stem for t in texs}
    assert {"summary", "summary_column", "classes", "tukey_hsd", "games_howell", "pr_band", "erc", "histograms",
            "paired_tests", "generalization", "checkpoints", "checkpoint_tests", "checkpoint_classes"} <= names
    log = compile_two_column(texs, tmp_path)
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)
    for t in texs:  # nothing unescaped that pdflatex would choke on in another class
        assert all(ord(c) < 128 for c in t.read_text()), t.name


@pytest.mark.slow
def test_p_values_are_never_zero_nor_long_in_the_reports_tables(cli_report):
    seen = 0
    for t in (cli_report / "tables").glob("*.tex"):
        for c in p_cells(t.read_text()):
            seen += 1
            assert P_CELL.match(c), (t.name, c)
            if c.startswith("0."):
                assert len(c.lstrip("0.")) <= 3, (t.name, c)  # at most 3 significant digits
    assert seen >= 10
    for t in (cli_report / "tables").glob("*.csv"):
        df = pd.read_csv(t)
        for c in df.columns:
            if is_p_column(c):
                v = df[c].dropna()
                assert (v > 0).all() and (v <= 1).all(), (t.name, c)


@pytest.mark.slow
def test_summary_table_values_intervals_and_bold_best(cli_report, small_npz):
    from statsmodels.stats.weightstats import DescrStatsW

    ev = evaluate(load_files([small_npz]))
    frame = pd.read_csv(cli_report / "tables" / "summary.csv")
    assert set(frame["split"]) == {"all", "train", "test"}
    part = frame[frame["split"] == "all"].set_index("method")
    # the default unit is the class: the jackknife interval over the 10 classes
    jk = ev.class_jackknife().intervals(0.05).set_index(["method", "metric"])
    assert (part["unit"] == "class").all() and (part["n_units"] == 10).all()
    by_query = summary_frame({"all": ev}, 0.05, unit="query").set_index("method")
    assert (by_query["unit"] == "query").all()
    for m in METHODS:
        ap = ev.per_query(m)
        ap = ap[ap["n_positives"] > 0]["ap"].to_numpy()
        assert part.loc[m, "map"] == pytest.approx(ap.mean(), abs=1e-12)
        iv = jk.loc[(m, "map")]
        assert part.loc[m, "map_ci_low"] == pytest.approx(iv["ci_low"], rel=1e-9)
        assert part.loc[m, "map_ci_high"] == pytest.approx(iv["ci_high"], rel=1e-9)
        lo, hi = DescrStatsW(ap).tconfint_mean(alpha=0.05)  # the query unit: Student t over the queries
        assert by_query.loc[m, "map_ci_low"] == pytest.approx(max(lo, 0.0), rel=1e-9)
        assert by_query.loc[m, "map_ci_high"] == pytest.approx(min(hi, 1.0), rel=1e-9)
        assert by_query.loc[m, "n_units"] == ap.size
    tex = (cli_report / "tables" / "summary.tex").read_text()
    assert r"\begin{table*}" in tex and r"\begin{table}" in (cli_report / "tables" / "summary_column.tex").read_text()
    for split, g in frame.groupby("split"):
        best = g.loc[g["map"].idxmax(), "method"]
        name = tex_escape(best)
        row = next(line for line in tex.splitlines() if line.startswith(f"{split} & {name} "))
        assert row.split(" & ")[2].startswith(r"\textbf{"), row
        others = [line for line in tex.splitlines() if line.startswith(f"{split} & ") and line != row]
        assert others and not any(line.split(" & ")[2].startswith(r"\textbf") for line in others)
    # the best mAP differs from the runner-up by the paired AP test here: marked
    assert r"$^\dagger$" in tex


def test_p_value_format_never_prints_zero_nor_many_digits():
    from hypothesis import given
    from hypothesis import strategies as st

    @given(st.floats(min_value=0, max_value=1, allow_nan=False))
    def check(p):
        text = format_p(p)
        if p < P_FLOOR:
            assert text == "< 1e-12"
            return
        assert float(text) == pytest.approx(p, rel=5e-3)
        mant = text.split("e")[0].replace(".", "").lstrip("0")
        assert 1 <= len(mant) <= 3
        assert float(text) > 0

    check()
    frame = pd.DataFrame({"p_value": [0.0, 1e-97, 1e-13, 3.2e-5, 0.0123456, 1.0, float("nan")]})
    assert p_cells(to_latex(frame)) == ["$<10^{-12}$", "$<10^{-12}$", "$<10^{-12}$", r"$3.20\times10^{-5}$",
                                        "0.0123", "1", "--"]
    assert floor_p_columns(frame)["p_value"].iloc[0] == P_FLOOR


@pytest.mark.latex
def test_long_wide_and_unicode_tables_fit_a_column_or_the_page(tmp_path):
    rng = np.random.default_rng(0)
    long = pd.DataFrame({"query": np.arange(2000), "label": rng.integers(0, 9, 2000), "ap": rng.random(2000)})
    wide = pd.DataFrame({"method": [f"model_{i}_finetuned" for i in range(5)]}
                        | {f"metric_with_a_long_name_{i}": rng.random(5) for i in range(14)})
    uni = pd.DataFrame({"Spearman ρ": [0.5], "α × β – γ": ["a−b ≥ c · d"], "p_value": [0.0]})
    texs = []
    for name, df in (("long", long), ("wide", wide), ("uni", uni)):
        (tmp_path / f"{name}.tex").write_text(to_latex(df, caption=f"{name} ρ table", keys=1))
        texs.append(tmp_path / f"{name}.tex")
    # a long table continues in further floats of 40 printed lines each, up to 8; past them the note
    long_tex = (tmp_path / "long.tex").read_text()
    assert "First 288 of 2000 rows" in long_tex and long_tex.count(r"\begin{table}") == 8  # 36 rows + 4 lines each
    assert long_tex.count("(continued)") == 7 and long_tex.count(r"\label{") == 0
    # 100 rows: every row kept (3 floats), no note
    hundred = to_latex(long.iloc[:100], caption="hundred", label="tab:hundred", keys=1)
    assert "First" not in hundred and hundred.count(r"\begin{table}") == 3 and hundred.count(r"\label{") == 1
    assert sum(line.endswith(r"\\") for line in hundred.splitlines()) == 100 + 3  # rows + a header per float
    (tmp_path / "hundred.tex").write_text(hundred)
    texs.append(tmp_path / "hundred.tex")
    log = compile_two_column(texs, tmp_path)
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)


@pytest.mark.latex
def test_class_names_in_any_script_stay_distinct_in_latex_and_compile(tmp_path):
    """Accented labels keep their accents (as accent commands) and letters pdflatex has no glyph
    for are written as code points: 'café' and 'cafe', '中文' and '日本' stay apart (they were
    'cafe' twice and '??' twice)."""
    labels = ["café", "cafe", "中文", "日本", "한국", "Škoda", "naïve", "Ångström", "Привет", "x_1 & y", "Częstochowa",
              "ḍịç", "Erdős", "ŭ"]
    escaped = [tex_escape(t) for t in labels]
    assert len(set(escaped)) == len(labels)
    df = pd.DataFrame({"class": labels, "mean AP": np.linspace(0, 1, len(labels))})
    (tmp_path / "scripts.tex").write_text(to_latex(df, caption="Classes", keys=1))
    log = compile_two_column([tmp_path / "scripts.tex"], tmp_path)
    assert "Missing character" not in log and log.count("Overfull \\hbox") == 0


@pytest.mark.latex
def test_one_method_three_classes_tables_compile_and_bold_nothing(tmp_path):
    rng = np.random.default_rng(0)
    p = tmp_path / "tiny.npz"
    np.savez(p, embeddings=rng.standard_normal((45, 4)).astype(np.float32), labels=np.repeat([0, 1, 2], 15))
    r = run_cli("report", p, "--out", tmp_path / "rep", "--format", "", "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    texs = sorted((tmp_path / "rep" / "tables").glob("*.tex"))
    assert {"summary", "summary_column", "classes"} <= {t.stem for t in texs}
    assert r"\textbf" not in (tmp_path / "rep" / "tables" / "summary.tex").read_text()
    log = compile_two_column(texs, tmp_path)
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)


TRAINING = ROOT / "demo_data" / "training.npz"


def reduced_training(path: Path, per: int = 8) -> Path:
    """The training demo with its 10 checkpoints (2 families x 5 epochs), 3 splits (train,
    test_seen, test_unseen by class) and per-checkpoint confidences, keeping the first ``per``
    items of every (class, split). ``report --by-split`` on it still takes about a minute of CPU
    (its fixed costs: the paired tests of 45 pairs x metrics x 4 splits; 4-5 min at load 12 on 2
    cores), the whole demo 2.5 min of CPU (15 min at that load): ``benchmarks/check_paper_tables.py``
    runs the same check on the whole demo."""
    d = np.load(TRAINING)
    keep = np.zeros(d["labels"].size, bool)
    for c in np.unique(d["labels"]):
        for s in np.unique(d["split"]):
            keep[np.flatnonzero((d["labels"] == c) & (d["split"] == s))[:per]] = True
    np.savez(path, **{k: d[k][keep] for k in d.files})
    return path


@pytest.mark.slow
@pytest.mark.latex
def test_training_demo_by_split_tables_compile_in_two_columns_with_bold_best_and_marks(tmp_path):
    data = np.load(reduced_training(tmp_path / "training_small.npz"))
    assert sum(k.startswith("embeddings_") for k in data.files) == 10
    assert sum(k.startswith("confidence_") for k in data.files) == 10
    assert set(data["split"]) == {"train", "test_seen", "test_unseen"}
    out = tmp_path / "rep"
    # ~1 min of CPU (the paired tests of 10 checkpoints x 3 splits), more on a busy machine
    r = subprocess.run([sys.executable, "-m", "analysis_core", "report", str(tmp_path / "training_small.npz"),
                        "--by-split", "--out", str(out), "--format", "", "--sweep-repeats", "1", "--quiet"],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=1200)
    assert r.returncode == 0, r.stderr
    texs = sorted((out / "tables").glob("*.tex"))
    assert {"summary", "summary_column", "classes", "checkpoints", "checkpoint_tests", "checkpoint_classes", "erc",
            "generalization", "paired_tests", "pr_band", "histograms"} <= {t.stem for t in texs}
    uses_longtable = any(r"\begin{longtable}" in t.read_text() for t in texs)
    log = compile_two_column(texs, tmp_path, ("booktabs", "longtable") if uses_longtable else ("booktabs",))
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)
    assert "LaTeX Warning: Float too large" not in log
    for t in texs:
        assert all(ord(c) < 128 for c in t.read_text()), t.name
    tex = (out / "tables" / "summary.tex").read_text()
    for split in map(tex_escape, ("all", "train", "test_seen", "test_unseen")):  # every split, its 10 checkpoints
        assert sum(line.startswith(f"{split} & ") for line in tex.splitlines()) == 10, split
    # best values bold; at the class unit 7 (and 3) classes of this reduced run support no significance mark, and
    # the caption says over which units the intervals are
    assert r"\textbf{" in tex and "classes (jackknife" in tex
    assert r"\textbf{" in (out / "tables" / "summary_column.tex").read_text()


def test_pr_band_title_names_the_band_and_ten_methods_stay_distinguishable():
    from analysis_core.figures.style import PALETTE, series_look
    from analysis_core.figures.variability import pr_bands_figure

    r = np.linspace(0, 1, 5)
    bands = pd.concat([pd.DataFrame({"method": f"m{i}", "class": "all", "recall": r, "mean": 0.5, "low": 0.4,
                                     "high": 0.6, "n": 10}) for i in range(10)])
    assert "simultaneous" in pr_bands_figure(bands, kind="bootstrap").layout.title.text
    assert "pointwise" in pr_bands_figure(bands, kind="t").layout.title.text
    fig = pr_bands_figure(bands)
    looks = [(t.line.color, t.line.dash, t.marker.symbol) for t in fig.data if t.showlegend is not False]
    assert len(looks) == 10 and len(set(looks)) == 10  # beyond the 8 colours, dashes and markers differ
    assert {c for c, _, _ in looks} == set(PALETTE)
    assert series_look(8)[0] == series_look(0)[0] and series_look(8)[1:] != series_look(0)[1:]


HTML_NAMES = ["<b>base", "con<br>trast", "tri&lt;plet"]  # a tag, a line break, an entity


def _strings(obj) -> list[str]:
    """Every string in a plotly JSON tree (names, categories, titles, annotations, hover)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings(v)]
    if isinstance(obj, list | tuple):
        return [s for v in obj for s in _strings(v)]
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "OUS":
        return [str(v) for v in obj.ravel()]
    return []


def test_user_names_are_html_escaped_in_every_report_figure(tmp_path):
    """Plotly reads HTML in trace names, categories, titles and annotations: method, class and
    split names given by the user show as written (escaped), in every figure ``report`` makes."""
    rng = np.random.default_rng(2)
    labels = np.repeat(np.arange(6), 10)
    centres = rng.standard_normal((6, 8))
    classes = np.array(["<i>cat", "dog&amp;", "c2", "c3", "c4", "c5"])[labels]
    emb = {f"embeddings_{m}_e{s}": (centres[labels] * (1 + i) + rng.standard_normal((60, 8))).astype(np.float32)
           for i, (m, s) in enumerate([(HTML_NAMES[0], 1), (HTML_NAMES[0], 3), (HTML_NAMES[1], 1), (HTML_NAMES[2], 2)])}
    p = tmp_path / "html.npz"
    np.savez(p, labels=classes, split=np.where(labels < 3, "<u>seen", "unseen"), confidence=rng.random(60), **emb)
    ev = evaluate(load_files([p]))
    rep = build_report(ev, sweep_repeats=1, by_split=True)
    assert {"pr_bands", "ap_by_class", "paired_differences", "erc", "histograms_over_checkpoints"} <= set(rep.figures)
    seen = set()
    for name, fig in rep.figures.items():
        text = " ".join(s for s in _strings(fig.to_plotly_json()) if not s.startswith(("#", "rgb")))
        for raw in ("<b>base", "con<br>trast", "<i>cat", "<u>seen"):
            assert raw not in text, (name, raw)
        assert "tri&lt;plet" not in text.replace("&amp;lt;", ""), name  # the entity itself is escaped
        seen |= {w for w in ("&lt;b&gt;base", "con&lt;br&gt;trast", "tri&amp;lt;plet", "&lt;i&gt;cat",
                             "&lt;u&gt;seen") if w in text}
    assert seen == {"&lt;b&gt;base", "con&lt;br&gt;trast", "tri&amp;lt;plet", "&lt;i&gt;cat", "&lt;u&gt;seen"}


@pytest.mark.slow
@needs_tools
def test_a_figure_renders_the_same_on_the_reused_page_as_on_a_fresh_one(built, monkeypatch):
    """The page is not reloaded between renders (0.4 s each on a busy machine): a figure drawn
    after another is the same as on a freshly loaded page (SVG up to plotly's random ids, PDF up
    to its dates)."""
    import xml.etree.ElementTree as ET

    import analysis_core.export.figures as export

    ev, rep = built
    first, second = rep.figures["ap_by_class"], rep.figures["pr_bands"]
    style = FigureStyle.preset("single")

    def norm(fmt: str, data: bytes) -> bytes:
        if fmt == "pdf":
            return re.sub(rb"/(CreationDate|ModDate) ?\(D:[^)]*\)", b"", data)
        if fmt == "svg":
            uid = re.search(rb"defs-([0-9a-f]{6})", data).group(1)  # plotly's random ids: the drawing's
            data = re.sub(rb"trace[0-9a-f]{6}", b"trace", data.replace(uid, b"uid"))  # and each trace's
            # attributes in a canonical order (a fresh page writes the legend box's size after its style)
            data = ET.canonicalize(xml_data=data.decode()).encode()
        return data

    out = {}
    for every in (1, 1000):  # a reload after each figure (kaleido's default) / none
        monkeypatch.setattr(export, "RELOAD_EVERY", every)
        export._RENDERER.close()
        for fmt in FORMATS:
            figure_bytes(first, fmt, style)
            out[every, fmt] = norm(fmt, figure_bytes(second, fmt, style))
    export._RENDERER.close()
    for fmt in FORMATS:
        assert out[1, fmt] == out[1000, fmt], fmt


@pytest.mark.slow
@needs_tools
def test_figures_rendered_together_or_in_the_background_are_those_rendered_one_by_one(built, tmp_path, monkeypatch):
    """Several pages render at once (figures_bytes), and report / the archive render each figure
    while the rest is computed (Prerender): the files are those of one figure at a time (PDF up
    to its dates, SVG up to plotly's random ids)."""
    import xml.etree.ElementTree as ET

    import analysis_core.export.figures as export
    from analysis_core.export.figures import Prerender, figures_bytes, write_figures

    ev, rep = built
    style = FigureStyle.preset("single")
    names = ["pr_bands", "ap_by_class", "grouped_recall_by_size", "erc"]

    def norm(fmt: str, data: bytes) -> bytes:
        if fmt == "pdf":
            return re.sub(rb"/(CreationDate|ModDate) ?\(D:[^)]*\)", b"", data)
        if fmt == "svg":
            uid = re.search(rb"defs-([0-9a-f]{6})", data).group(1)
            data = re.sub(rb"trace[0-9a-f]{6}", b"trace", data.replace(uid, b"uid"))
            data = ET.canonicalize(xml_data=data.decode()).encode()
        return data

    one = {(n, f): norm(f, figure_bytes(rep.figures[n], f, style)) for n in names for f in FORMATS}
    items = [(n, f) for n in names for f in FORMATS]
    together = figures_bytes([(rep.figures[n], f) for n, f in items], style)
    assert {k: norm(k[1], d) for k, d in zip(items, together, strict=True)} == one
    pre = Prerender(FORMATS, style)
    for n in names:
        pre(n, rep.figures[n])
    rendered_after = []
    monkeypatch.setattr(export, "figures_bytes", lambda items, style=None: rendered_after.extend(items) or [])
    written = write_figures({n: rep.figures[n] for n in names}, tmp_path, FORMATS, style, pre)
    assert {(p.stem, p.suffix[1:]): norm(p.suffix[1:], p.read_bytes()) for p in written} == one
    assert rendered_after == []  # every file came from the background renders


def test_per_query_files_read_back_as_written(tmp_path):
    """CSV and Parquet built from Arrow buffers (no pandas, no pyarrow.compute) read back by pandas
    as the columns given: unicode and empty strings, booleans, integers, floats with NaN."""
    from analysis_core.export.tables import write_per_query

    cols = {"method": np.array(["β-model", "", "a,b \"quoted\"", "x"]), "query": np.arange(4, dtype=np.int64),
            "excluded": np.array([False, True, False, True]), "ap": np.array([0.5, np.nan, 1.0, 1 / 3])}
    write_per_query(cols, tmp_path)
    pq = pd.read_parquet(tmp_path / "per_query.parquet")
    csv = pd.read_csv(tmp_path / "per_query.csv", keep_default_na=False, na_values={"ap": ["nan"]})
    assert pq["method"].tolist() == cols["method"].tolist()
    assert pq["excluded"].tolist() == cols["excluded"].tolist()
    np.testing.assert_array_equal(pq["query"].to_numpy(), cols["query"])
    np.testing.assert_array_equal(pq["ap"].to_numpy(), cols["ap"])
    np.testing.assert_array_equal(csv["ap"].to_numpy(), cols["ap"])
    assert csv["method"].fillna("").tolist() == cols["method"].tolist()


@needs_tools
@pytest.mark.parametrize("width_in", [7.2, 5.1, 3.5, 2.42, 4.17, 5.08, 2.005])
def test_pdf_page_is_the_exact_width_where_chromium_quantises_it_and_the_file_stays_valid(width_in, tmp_path):
    """Chromium prints a page that is not a whole number of CSS pixels a little narrow (7.2 in gave
    517.92 pt, 2.42 in gave 174 where 174.24 does not fit the 3 bytes Chromium wrote): the page
    box is rewritten and the cross-reference table with it. pdfinfo reads the exact width (and
    reports no error), every cross-reference offset points at its object, and pdftoppm renders
    the page. (92 widths from 2 to 8 in, measured once: all exact.)"""
    import plotly.graph_objects as go

    fig = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    path = tmp_path / "f.pdf"
    path.write_bytes(figure_bytes(fig, "pdf", FigureStyle(width_in=width_in)))
    info = subprocess.run(["pdfinfo", str(path)], capture_output=True, text=True, check=True)
    assert info.stderr == "", info.stderr  # no "xref table broken, reconstructing"
    w, _ = _pdf_size_in(path)
    assert abs(w * 72 - width_in * 72) <= 0.01
    data = path.read_bytes()
    table = data[data.rindex(b"\nxref") + 1:data.rindex(b"trailer")].split(b"\n")
    first, count = map(int, table[1].split())
    offsets = [(first + k, int(line.split()[0])) for k, line in enumerate(table[2:2 + count])
               if line.split()[2:3] == [b"n"]]
    assert offsets and all(data[off:].startswith(f"{num} 0 obj".encode()) for num, off in offsets)
    assert int(data[data.rindex(b"startxref") + 9:].split()[0]) == data.rindex(b"\nxref") + 1
    subprocess.run(["pdftoppm", "-r", "20", "-png", str(path), str(tmp_path / "page")], check=True,
                   capture_output=True)
    with Image.open(next(tmp_path.glob("page*.png"))) as im:
        assert abs(im.size[0] - width_in * 20) <= 1  # pdftoppm rounds the pixel count up


def test_png_resolution_chunk_is_valid_and_replaces_an_old_one():
    """The pHYs chunk a PNG gets is read back by Pillow (which checks every chunk's CRC), the
    pixels are untouched, and a second pass replaces the first chunk instead of adding one."""
    import io

    from analysis_core.export.physical_size import png_with_dpi

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, (7, 11, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "PNG")
    once = png_with_dpi(buf.getvalue(), 300)
    twice = png_with_dpi(once, 600)
    for data, dpi in ((once, 300), (twice, 600)):
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            assert im.info["dpi"] == pytest.approx((dpi, dpi), abs=0.01)
            assert np.array_equal(np.asarray(im), pixels)
        assert data.count(b"pHYs") == 1
    assert png_with_dpi(b"not a png", 300) == b"not a png"


@pytest.mark.latex
def test_a_wide_table_repeats_the_columns_that_name_a_row_in_every_column_group(tmp_path):
    """The best-vs-last tests table (split, family, metric, ..., a long note) is too wide for the
    page: each column group repeated only ``split``, so a note in the second group did not say
    which family and metric it was about. Every group now starts with split, family, metric (the
    leading columns that together tell the rows apart), and the table compiles without overfull
    lines."""
    from analysis_core.export.tables import key_columns

    rng = np.random.default_rng(2)
    rows = [dict(split=sp, family=f, metric=m, best=f"{f}_checkpoint_epoch_{e}", last=f"{f}_checkpoint_epoch_30",
                 mean_diff=rng.normal(), ci_low=rng.normal(), ci_high=rng.normal(), test="paired t",
                 p_value=rng.random(), note="undefined: one of the two checkpoints has no scored query at all")
            for sp in ("train", "test") for f in ("mlp32", "mlp64") for e, m in enumerate(("map", "map_at_r", "p1"))]
    df = pd.DataFrame(rows)
    assert key_columns(df) == [0, 1, 2]
    assert key_columns(df.drop(columns=["family"]).drop_duplicates(["split", "metric"])) == [0, 1]
    assert key_columns(pd.DataFrame({"method": ["a", "b"], "map": [0.1, 0.2]})) == [0]
    assert key_columns(pd.DataFrame({"x": [0.5, 0.5], "y": [1.0, 2.0]})) == [0]  # floats never name rows
    # the checkpoints table: split, family, method, step (implied by the method), metric
    ck = pd.DataFrame([dict(split="test", family="mlp64", method=f"mlp64_epoch_{e}", step=e, metric=m, label=m,
                            value=0.5) for e in (1, 3) for m in ("map", "jsd")])
    assert [ck.columns[i] for i in key_columns(ck)] == ["method", "metric"]  # one split, one family: no help
    two = pd.concat([ck, ck.assign(split="train")])
    assert [two.columns[i] for i in key_columns(two)] == ["split", "method", "metric"]
    tex = to_latex(df, caption="best against last")
    tabulars = tex.split(r"\begin{tabular}")[1:]
    assert len(tabulars) >= 2
    for block in tabulars:
        header = block.split(r"\toprule")[1].split(r"\\")[0]
        assert [h.strip() for h in header.split("&")][:3] == ["split", "family", "metric"], header
    (tmp_path / "t.tex").write_text(tex)
    log = compile_two_column([tmp_path / "t.tex"], tmp_path)
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)


@pytest.mark.latex
@pytest.mark.skipif(shutil.which("pdftotext") is None,
                    reason="pdflatex or pdftotext missing (make test installs texlive and poppler-utils)")
def test_angle_brackets_and_bars_print_as_themselves(tmp_path):
    """pdflatex's default font printed '<b>' as '¡b¿' and the ' | ' of method x class groups as
    an em dash."""
    df = pd.DataFrame({"group": ["<b>model</b> | cat", "a>b | c<d"], "mean": [0.5, 0.25]})
    (tmp_path / "t.tex").write_text(to_latex(df, caption="names with < > |"))
    compile_two_column([tmp_path / "t.tex"], tmp_path)
    text = subprocess.run(["pdftotext", str(tmp_path / "doc.pdf"), "-"], capture_output=True, text=True,
                          check=True).stdout
    assert "<b>model</b> | cat" in text and "a>b | c<d" in text and "names with < > |" in text, text
    assert "¡" not in text and "¿" not in text


@pytest.mark.browser
def test_paired_differences_figure_labels_every_pair_at_column_width():
    """Plotly thins category tick labels that it thinks crowd each other: at single-column width
    the middle of three pairs lost its label. The rendered SVG must name every pair."""
    from analysis_core.figures.variability import paired_differences_figure

    pairs = pd.DataFrame({"method_a": ["lda9", "lda9", "pca16"], "method_b": ["pca16", "pixels", "pixels"],
                          "mean_diff": [0.197, 0.224, 0.026], "ci_low": [0.12, 0.14, 0.02],
                          "ci_high": [0.27, 0.30, 0.03], "p_holm": [0.001, 0.001, 0.001], "reject": True,
                          "unit": "class", "n_units": 10})
    svg = figure_bytes(paired_differences_figure(pairs), "svg", FigureStyle.preset("single")).decode()
    for a, b in zip(pairs["method_a"], pairs["method_b"], strict=True):
        assert f"{a} − {b}" in svg, (a, b)
    assert "over 10 classes" in svg
