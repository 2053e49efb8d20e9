"""Reusable page pieces: a figure with its exports, a table with its exports."""

from __future__ import annotations

import html
import logging
import re
import uuid

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis_core.export.figures import FORMATS, FigureStyle, figure_bytes
from analysis_core.export.tables import to_latex
from dashboard import state

LOG = logging.getLogger("dashboard")
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
    return html.escape(str(text), quote=False)


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
