"""Error-vs-reject curves with their oracles and random baseline.
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from .style import base_layout, figure, plot_text, series_look


def erc_figure(curves: dict[str, pd.DataFrame], title: str | None = None) -> go.Figure:
    """Error-vs-reject curves per method, with each method's oracle dotted."""
    traces = []
    for i, (name, c) in enumerate(curves.items()):
        col, dash, _, _ = series_look(i)
        name = plot_text(name)
        x = c["fraction_rejected"].to_numpy()
        traces.append(go.Scatter(x=x, y=c["error"].to_numpy(), mode="lines", name=name,
                                 line=dict(color=col, width=2, dash=dash)))
        traces.append(go.Scatter(x=x, y=c["oracle_error"].to_numpy(), mode="lines", name=f"{name} (oracle)",
                                 line=dict(color=col, width=1.0, dash="dot"), opacity=0.7, showlegend=False))
    # one legend entry for every oracle: the legend stays one row per method at column width
    traces.append(go.Scatter(x=[None], y=[None], mode="lines", name="oracles",
                             line=dict(color="#777", width=1.0, dash="dot")))
    return figure(traces, base_layout(title or "Error against rejected fraction (least confident first)", aspect=0.7),
                  xaxis=dict(title="fraction of queries rejected", range=[0, 1]),
                  yaxis=dict(title="error of the kept queries", rangemode="tozero"))
