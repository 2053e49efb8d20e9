"""Metrics against the number of classes (the class-count sweep).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..metrics.registry import label
from .style import base_layout, figure, series_look

SWEEP_METRICS = ("recall_at_1", "map_at_r", "map", "grouped_recall_at_1", "jsd")


def sweep_figure(sweep: pd.DataFrame, metrics: list[str] | None = None, title: str | None = None) -> go.Figure:
    """Metric against the number of classes sampled: mean over repeats with min-max whiskers."""
    metrics = metrics or list(SWEEP_METRICS)
    g = sweep.groupby("n_classes")
    traces = []
    for i, m in enumerate(metrics):
        mean, lo, hi = g[m].mean(), g[m].min(), g[m].max()
        col, dash, symbol, _ = series_look(i)
        traces.append(go.Scatter(x=mean.index.to_numpy(), y=mean.to_numpy(), mode="lines+markers", name=label(m),
                                 line=dict(color=col, width=2, dash=dash), marker=dict(symbol=symbol),
                                 error_y=dict(type="data", symmetric=False, array=(hi - mean).to_numpy(),
                                              arrayminus=(mean - lo).to_numpy())))
    return figure(traces, base_layout(title or "Metrics against the number of classes"),
                  xaxis=dict(title="number of classes (log scale)", type="log"),
                  yaxis=dict(title="value", range=[0, 1.02]))
