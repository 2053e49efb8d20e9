"""Reusable page pieces: a figure with its exports, a table with its exports."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis_core.evaluation import Evaluation
from analysis_core.export.figures import FORMATS, INSTALL_COMMAND, FigureStyle, chromium_path, figure_bytes
from analysis_core.export.number_format import display_formats, floor_p_columns
from analysis_core.export.tables import to_latex
from analysis_core.report import build_report, write_report
from dashboard import state

ARCHIVE = "_report_archive"  # session state: (settings, ZIP bytes) of the last archive built
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


def figure(fig: go.Figure, name: str, data: pd.DataFrame | None = None) -> None:
    """Show ``fig`` and offer it as PDF / SVG / PNG (rendered on click, at the sidebar's paper
    size) and the data behind it as CSV."""
    st.plotly_chart(fig, width="stretch", key=f"chart-{name}")
    missing = _no_chromium()
    cols = st.columns(len(FORMATS) + 1, gap="small")
    style = export_style()
    for col, fmt in zip(cols, FORMATS, strict=False):
        if not missing:
            col.download_button(fmt.upper(), data=lambda fmt=fmt: figure_bytes(fig, fmt, style),
                                file_name=f"{name}.{fmt}", mime=MIME[fmt], key=f"dl-{name}-{fmt}", on_click="ignore",
                                width="stretch")
    if data is not None:
        cols[-1].download_button("CSV data", data=floor_p_columns(data).to_csv(index=False).encode(),
                                 file_name=f"{name}.csv", mime="text/csv", key=f"dl-{name}-csv", on_click="ignore",
                                 width="stretch")


def report_archive(ev: Evaluation, key: str, alpha: float) -> None:
    """"Export everything": the ``report`` command's tables and figures as one ZIP, built on
    request with the sidebar's export settings and rebuilt when any of them changes."""
    style = export_style()
    formats = () if _no_chromium() else ("pdf", "svg", "png")
    zkey = ("zip", key, ev.similarity, ev.ks, alpha, style, formats)
    if st.button("Prepare the archive"):
        with st.spinner("Computing every analysis and rendering figures…"):
            rep = build_report(ev, alpha=alpha)
            buf = io.BytesIO()
            with tempfile.TemporaryDirectory() as tmp:
                written = write_report(ev, rep, Path(tmp), formats, style)
                with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
                    for p in written:
                        z.write(p, p.relative_to(tmp))
            st.session_state[ARCHIVE] = (zkey, buf.getvalue())  # one archive kept: the latest settings
    made = st.session_state.get(ARCHIVE)
    if made is not None and made[0] == zkey:
        st.download_button("Download all (ZIP)", made[1], "retrieval_report.zip", "application/zip",
                           on_click="ignore", type="primary")
    else:
        st.caption(f"Figures at {style.width_in:g} in wide, {style.font_size:g} pt, PNG at {style.dpi} dpi.")


def table(df: pd.DataFrame, name: str, caption: str | None = None, height: int | None = None) -> None:
    """Show ``df`` (p-values and statistics printed as everywhere, :mod:`number_format`) with
    CSV and LaTeX (booktabs) downloads."""
    st.dataframe(df.style.format(display_formats(df)), width="stretch", hide_index=True,
                 **({"height": height} if height else {}))
    c1, c2, _ = st.columns([1, 1, 4])
    c1.download_button("CSV", floor_p_columns(df).to_csv(index=False).encode(), f"{name}.csv", "text/csv",
                       key=f"dl-{name}-tcsv", on_click="ignore", width="stretch")
    c2.download_button("LaTeX", to_latex(df, caption=caption).encode(), f"{name}.tex", "application/x-tex",
                       key=f"dl-{name}-tex", on_click="ignore", width="stretch")


def warnings(messages: list[str]) -> None:
    for m in messages:
        st.warning(m, icon=":material/warning:")
