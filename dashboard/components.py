"""Reusable page pieces: a figure with its exports, a table with its exports."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis_core.export.figures import FORMATS, FigureStyle, figure_bytes
from analysis_core.export.tables import to_latex
from dashboard import state

MIME = {"pdf": "application/pdf", "svg": "image/svg+xml", "png": "image/png"}


def export_style() -> FigureStyle:
    """The sidebar's export settings as a FigureStyle."""
    preset = st.session_state.get(state.EXPORT_PRESET, "double")
    base = FigureStyle.preset(preset) if preset in ("single", "double") else FigureStyle(
        width_in=float(st.session_state.get(state.EXPORT_WIDTH, 5.0)))
    return FigureStyle(width_in=base.width_in, height_in=base.height_in,
                       font_family=st.session_state.get(state.EXPORT_FONT, base.font_family),
                       font_size=int(st.session_state.get(state.EXPORT_FONT_SIZE, base.font_size)),
                       line_width=float(st.session_state.get(state.EXPORT_LINE, base.line_width)))


def figure(fig: go.Figure, name: str, data: pd.DataFrame | None = None) -> None:
    """Show ``fig`` and offer it as PDF / SVG / PNG (rendered by kaleido on click, with the
    sidebar's paper preset) and the data behind it as CSV."""
    st.plotly_chart(fig, width="stretch", key=f"chart-{name}")
    cols = st.columns(len(FORMATS) + 1, gap="small")
    style = export_style()
    for col, fmt in zip(cols, FORMATS, strict=False):
        col.download_button(fmt.upper(), data=lambda fmt=fmt: figure_bytes(fig, fmt, style), file_name=f"{name}.{fmt}",
                            mime=MIME[fmt], key=f"dl-{name}-{fmt}", on_click="ignore", width="stretch")
    if data is not None:
        cols[-1].download_button("CSV data", data=data.to_csv(index=False).encode(), file_name=f"{name}.csv",
                                 mime="text/csv", key=f"dl-{name}-csv", on_click="ignore", width="stretch")


def table(df: pd.DataFrame, name: str, caption: str | None = None, height: int | None = None) -> None:
    """Show ``df`` with CSV and LaTeX (booktabs) downloads."""
    st.dataframe(df, width="stretch", hide_index=True, **({"height": height} if height else {}))
    c1, c2, _ = st.columns([1, 1, 4])
    c1.download_button("CSV", df.to_csv(index=False).encode(), f"{name}.csv", "text/csv", key=f"dl-{name}-tcsv",
                       on_click="ignore", width="stretch")
    c2.download_button("LaTeX", to_latex(df, caption=caption).encode(), f"{name}.tex", "application/x-tex",
                       key=f"dl-{name}-tex", on_click="ignore", width="stretch")


def int_slider(label: str, lo: int, hi: int, value: int, *, where=st, **kwargs) -> int:
    """An integer slider, or a caption when only one value is possible (Streamlit refuses a
    slider whose minimum equals its maximum)."""
    hi = max(lo, hi)
    if hi == lo:
        where.caption(f"{label}: {lo} (the only possible value)")
        return lo
    return where.slider(label, lo, hi, min(max(value, lo), hi), **kwargs)


def warnings(messages: list[str]) -> None:
    for m in messages:
        st.warning(m, icon=":material/warning:")
