"""Generalization gaps: each metric per split.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..metrics.registry import label
from .style import base_layout, figure, plot_text, series_look


def generalization_figure(gen: pd.DataFrame, splits: list[str], title: str | None = None) -> go.Figure:
    """Each metric per split, side by side."""
    x = [label(m, short=True) for m in gen["metric"]]
    traces = []
    for i, s in enumerate(splits):
        col, _, _, pattern = series_look(i)
        traces.append(go.Bar(x=x, y=gen[s].to_numpy(), name=plot_text(s),
                             marker=dict(color=col, pattern_shape=pattern)))
    return figure(traces, base_layout(title or "Metrics per split"), barmode="group", yaxis=dict(title="value"))
