"""Reusable page pieces: a figure with its exports, a table with its exports."""

from __future__ import annotations

import io
import logging
import re
import tempfile
import uuid
import zipfile
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis_core.evaluation import Evaluation
from analysis_core.export.figures import (
    FORMATS,
    INSTALL_COMMAND,
    FigureStyle,
    Prerender,
    chromium_path,
    figure_bytes,
)
from analysis_core.export.tables import csv_text, to_latex
from analysis_core.figures.style import plot_text as _plot_text
from analysis_core.number_format import display_formats, format_p, is_p_column
from analysis_core.report import build_report, write_report
from analysis_core_dashboard import state

ARCHIVE = "_report_archive"  # session state: (settings, ZIP bytes) of the last archive built
LOG = logging.getLogger("dashboard")
STYLED_CELLS = 50_000  # larger tables (a 30 000-query per-query table) are shown without a Styler
MIME = {"pdf": "application/pdf", "svg": "image/svg+xml", "png": "image/png"}


def export_style() -> FigureStyle:
    """The sidebar's export settings as a FigureStyle (the preset's width, fonts in points)."""
    preset = st.session_state.get(state.EXPORT_PRESET, "double")
    kw = {}
    for key, name, convert in ((state.EXPORT_FONT, "font_family", str), (state.EXPORT_FONT_SIZE, "font_size", float),
                               (state.EXPORT_LINE, "line_width", float)):
        if st.session_state.get(key) is not None:
            kw[name] = convert(st.session_state[key])
    width = float(st.session_state.get(state.EXPORT_WIDTH, 5.0)) if preset == "custom" else None
    return FigureStyle.preset(preset if preset in ("single", "double", "custom") else "double", width_in=width, **kw)


def _no_chromium() -> bool:
    """True (and the install command shown) when figures cannot be exported on this machine."""
    if chromium_path() is not None:
        return False
    st.info(f"Figure export needs Chromium, which is not installed here: run `{INSTALL_COMMAND}` (as root), "
            "then reload. Tables and CSV data download as usual.", icon=":material/info:")
    return True


def figure(fig: go.Figure, name: str, data: pd.DataFrame | None = None, split_in_title: bool = False,
           select: bool = False):
    """Show ``fig`` and offer it as PDF / SVG / PNG (rendered on click, at the sidebar's paper
    size) and the data behind it as CSV. With a split chosen in the sidebar, its name is in the
    title (``split_in_title``: the figure's own title names it already) and in every exported
    file name. With ``select``, a box or lasso selection (or a click) on the chart reruns the page
    and the chart's selection event is returned (else None)."""
    split = st.session_state.get(state.SPLIT) or ""
    if split:
        if not split_in_title:
            fig = go.Figure(fig).update_layout(title_text=f"{fig.layout.title.text or ''} [split: {plot_text(split)}]")
        name = f"{name}__{split}"
    event = st.plotly_chart(fig, width="stretch", key=f"chart-{name}",
                            **({"on_select": "rerun", "selection_mode": ("points", "box", "lasso")} if select else {}))
    missing = _no_chromium()
    cols = st.columns(len(FORMATS) + 1, gap="small")
    style = export_style()
    for col, fmt in zip(cols, FORMATS, strict=False):
        if not missing:
            col.download_button(fmt.upper(), data=lambda fmt=fmt: figure_bytes(fig, fmt, style),
                                file_name=f"{name}.{fmt}", mime=MIME[fmt], key=f"dl-{name}-{fmt}", on_click="ignore",
                                width="stretch")
    if data is not None:
        cols[-1].download_button("CSV data", data=csv_text(data).encode(),
                                 file_name=f"{name}.csv", mime="text/csv", key=f"dl-{name}-csv", on_click="ignore",
                                 width="stretch")
    return event if select else None


def report_archive(ev: Evaluation, key: str, alpha: float) -> None:
    """"Export everything": the ``report`` command's tables and figures as one ZIP, built on
    request with the sidebar's export settings and rebuilt when any of them changes."""
    style = export_style()
    formats = () if _no_chromium() else ("pdf", "svg", "png")
    zkey = ("zip", key, ev.similarity, ev.ks, alpha, style, formats)
    if st.button("Prepare the archive"):
        with st.spinner("Computing every analysis and rendering figures…"):
            st.session_state[ARCHIVE] = (zkey, archive_bytes(ev, alpha, formats, style))  # the latest settings
    made = st.session_state.get(ARCHIVE)
    if made is not None and made[0] == zkey:
        st.download_button("Download all (ZIP)", made[1], "retrieval_report.zip", "application/zip",
                           on_click="ignore", type="primary")
    else:
        st.caption(f"Figures at {style.width_in:g} in wide, {style.font_size:g} pt, PNG at {style.dpi} dpi.")


def archive_bytes(ev: Evaluation, alpha: float, formats: tuple[str, ...], style: FigureStyle) -> bytes:
    """The report's files (:func:`~analysis_core.report.build_report` of ``ev``) as one ZIP."""
    prerender = Prerender(formats, style)  # figures rendered while the rest is computed
    rep = build_report(ev, alpha=alpha, on_figure=prerender)
    buf = io.BytesIO()
    with tempfile.TemporaryDirectory() as tmp:
        written = write_report(ev, rep, Path(tmp), formats, style, prerender)
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for p in written:
                z.write(p, p.relative_to(tmp))
    return buf.getvalue()


def table(df: pd.DataFrame, name: str, caption: str | None = None, height: int | None = None) -> None:
    """Show ``df`` (p-values and statistics printed as everywhere, :mod:`number_format`) with
    CSV and LaTeX (booktabs) downloads."""
    size = {"height": height} if height else {}
    if df.size <= STYLED_CELLS:
        st.dataframe(df.style.format(display_formats(df)), width="stretch", hide_index=True, **size)
    else:  # a Styler renders every cell in Python (seconds, refused over 262 144): numbers as they are
        shown = df.assign(**{c: df[c].map(format_p) for c in df.columns if is_p_column(c)})
        st.dataframe(shown, width="stretch", hide_index=True, **size)
    c1, c2, _ = st.columns([1, 1, 4])
    # built on click, not on every rerun (LaTeX of a 1 200-row table is a tenth of a second)
    c1.download_button("CSV", lambda: csv_text(df).encode(), f"{name}.csv", "text/csv",
                       key=f"dl-{name}-tcsv", on_click="ignore", width="stretch")
    c2.download_button("LaTeX", lambda: to_latex(df, caption=caption).encode(), f"{name}.tex", "application/x-tex",
                       key=f"dl-{name}-tex", on_click="ignore", width="stretch")


def int_slider(label: str, lo: int, hi: int, value: int, *, where=st, **kwargs) -> int:
    """An integer slider, or a caption when only one value is possible (Streamlit refuses a
    slider whose minimum equals its maximum)."""
    hi = max(lo, hi)
    if hi == lo:
        where.caption(f"{label}: {lo} (the only possible value)")
        return lo
    return where.slider(label, lo, hi, min(max(value, lo), hi), **kwargs)


def literal(text: object) -> str:
    """``text`` for a Markdown context (captions, alerts), shown exactly as written: an inline
    code span, whose content CommonMark never reads as Markdown or HTML, and which Streamlit's
    text transforms (links made from bare URLs, emoji, colours, maths) leave alone. Backslash
    escapes would not do: bare URLs are still turned into links after parsing. The fence is
    longer than any run of backticks in the text."""
    s = " ".join(str(text).splitlines())
    fence = "`" * (1 + max((len(run) for run in re.findall(r"`+", s)), default=0))
    return f"{fence} {s} {fence}"


def plot_text(text: object) -> str:
    """``text`` for a plotly title: plotly reads a subset of HTML (links, <b>, <br>) in titles,
    and decodes entities, so escaping shows user text as written."""
    return _plot_text(text)


def error(head: str, detail: object) -> None:
    """An error box: ``head`` (ours, Markdown) and ``detail`` (user text, shown literally)."""
    st.error(f"**{head}** {literal(detail)}")


def unexpected(where: str) -> str:
    """Log the exception being handled under a short id, with its traceback (server paths and
    internals stay in the server log), and return the message users see instead."""
    eid = uuid.uuid4().hex[:8]
    LOG.exception("unexpected error %s in %s", eid, where)
    return (f"Something went wrong in {where}. This is a bug; the details are in the server log under error id "
            f"{eid}. Please report the id.")


def warnings(messages: list[str]) -> None:
    for m in messages:
        st.warning(literal(m), icon=":material/warning:")
