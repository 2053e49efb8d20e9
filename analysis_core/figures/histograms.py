"""Positive- and negative-pair similarity histograms.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .style import PALETTE, base_layout, figure, rgba


def histogram_figure(hist: pd.DataFrame, normalized: bool = True, title: str | None = None) -> go.Figure:
    """Positive- and negative-pair similarity histograms (one method, one split) from a
    :func:`~analysis_core.stats.histograms.histogram_table` slice."""
    traces = []
    for i, (kind, part) in enumerate(hist.groupby("kind", sort=False)):
        y = part["density"] if normalized else part["count"]
        centre = 0.5 * (part["bin_left"] + part["bin_right"])
        col = PALETTE[1] if kind == "positive" else PALETTE[0]
        width = (part["bin_right"] - part["bin_left"]).to_numpy()
        traces.append(go.Bar(x=centre.to_numpy(), y=y.to_numpy(), width=width, name=f"{kind} pairs",
                             marker=dict(color=rgba(col, 0.55), line=dict(width=0)), offsetgroup=i))
    return figure(traces, base_layout(title or "Similarity of positive and negative pairs"), barmode="overlay",
                  bargap=0, xaxis=dict(title="similarity"),
                  yaxis=dict(title="density (area 1)" if normalized else "pairs"))
