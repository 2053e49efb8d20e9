"""Shared look: the Okabe-Ito colour-blind-safe palette and a clean paper layout."""

from __future__ import annotations

PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def base_layout(title: str, font_family: str = "Liberation Sans, Arial, sans-serif", font_size: int = 12) -> dict:
    return dict(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=font_size + 2)),
        template="simple_white",
        font=dict(family=font_family, size=font_size),
        colorway=PALETTE,
        margin=dict(l=60, r=20, t=50, b=50),
        legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0),
    )
