"""Figures to PDF / SVG / PNG bytes through kaleido (which drives Debian's chromium).

Every export goes through one lock, so concurrent callers (dashboard sessions) never interleave
on the shared kaleido/chromium process and never receive each other's images.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from pathlib import Path

import plotly.graph_objects as go

FORMATS = ("pdf", "svg", "png")
_LOCK = threading.Lock()


@dataclass(frozen=True)
class FigureStyle:
    """Paper presets: width in inches (single column ~3.5, double ~7.2), font, line width."""

    width_in: float = 7.2
    height_in: float = 4.2
    font_family: str = "Liberation Sans, Arial, sans-serif"
    font_size: int = 10
    line_width: float = 1.5
    png_scale: float = 3.0

    @classmethod
    def preset(cls, name: str) -> FigureStyle:
        presets = {"single": cls(width_in=3.5, height_in=2.6, font_size=8),
                   "double": cls(width_in=7.2, height_in=4.2, font_size=10)}
        if name not in presets:
            raise ValueError(f"unknown style preset {name!r}; use one of {sorted(presets)}")
        return presets[name]


def styled(fig: go.Figure, style: FigureStyle) -> go.Figure:
    """A copy of ``fig`` sized in CSS pixels (96 per inch) with the style's font and lines."""
    f = go.Figure(copy.deepcopy(fig.to_dict()))
    height_in = style.height_in
    meta = f.layout.meta if isinstance(f.layout.meta, dict) else {}
    if "rows" in meta:  # one labelled row per category (interval plots): keep every label legible
        height_in = max(height_in, 1.2 + meta["rows"] * style.font_size * 1.9 / 72)
    f.update_layout(width=round(style.width_in * 96), height=round(height_in * 96),
                    font=dict(family=style.font_family, size=style.font_size))
    for tr in f.data:
        if getattr(tr, "line", None) is not None and tr.type == "scatter" and tr.fill is None:
            tr.line.width = style.line_width
    return f


def figure_bytes(fig: go.Figure, fmt: str, style: FigureStyle | None = None) -> bytes:
    """The figure as ``pdf`` (vector, real text), ``svg`` or ``png`` bytes."""
    import plotly.io as pio

    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
    style = style or FigureStyle()
    f = styled(fig, style)
    with _LOCK:
        return pio.to_image(f, format=fmt, scale=style.png_scale if fmt == "png" else 1)


def write_figures(figs: dict[str, go.Figure], out: Path, formats: tuple[str, ...],
                  style: FigureStyle | None = None) -> list[Path]:
    """Write ``out/<name>.<fmt>`` for every figure and format in one kaleido session."""
    import plotly.io as pio

    style = style or FigureStyle()
    out.mkdir(parents=True, exist_ok=True)
    items, paths = [], []
    for name, fig in figs.items():
        f = styled(fig, style)
        for fmt in formats:
            if fmt not in FORMATS:
                raise ValueError(f"format must be one of {FORMATS}, not {fmt!r}")
            items.append(f)
            paths.append(out / f"{name}.{fmt}")
    with _LOCK:
        pio.write_images(items, paths, scale=style.png_scale)
    return paths
