"""Grouped Recall@K against the group size.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .style import base_layout, figure, plot_text, series_look


def grouped_recall_by_size_figure(rows: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Grouped Recall@K against the group size S, with its interval."""
    traces = []
    for i, (m, part) in enumerate(rows.groupby("method", sort=False)):
        col, dash, symbol, _ = series_look(i)
        traces.append(go.Scatter(x=part["group_size"].to_numpy(), y=part["mean"].to_numpy(), mode="lines+markers",
                                 name=plot_text(m), line=dict(color=col, dash=dash), marker=dict(symbol=symbol),
                                 error_y=dict(type="data", symmetric=False,
                                              array=(part["ci_high"] - part["mean"]).to_numpy(),
                                              arrayminus=(part["mean"] - part["ci_low"]).to_numpy())))
    return figure(traces, base_layout(title or "Grouped Recall@1 against group size S"),
                  xaxis=dict(title="classes per group S", type="log"),
                  yaxis=dict(title="Grouped Recall@1", range=[0, 1.02]))
