"""Figures for the class-count-invariant measures: histograms, sweeps, ERC, generalization."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from ..metrics.registry import label
from .style import PALETTE, base_layout, plot_text, rgba, series_look

SWEEP_METRICS = ("recall_at_1", "map_at_r", "map", "grouped_recall_at_1", "jsd")


def histogram_figure(hist: pd.DataFrame, normalized: bool = True, title: str | None = None) -> go.Figure:
    """Positive- and negative-pair similarity histograms (one method, one split) from a
    :func:`~analysis_core.stats.histograms.histogram_table` slice."""
    fig = go.Figure()
    for i, (kind, part) in enumerate(hist.groupby("kind", sort=False)):
        y = part["density"] if normalized else part["count"]
        centre = 0.5 * (part["bin_left"] + part["bin_right"])
        col = PALETTE[1] if kind == "positive" else PALETTE[0]
        fig.add_trace(go.Bar(x=centre, y=y, width=part["bin_right"] - part["bin_left"], name=f"{kind} pairs",
                             marker=dict(color=rgba(col, 0.55), line=dict(width=0)), offsetgroup=i))
    fig.update_layout(**base_layout(title or "Similarity of positive and negative pairs"), barmode="overlay",
                      bargap=0)
    fig.update_xaxes(title="similarity")
    fig.update_yaxes(title="density (area 1)" if normalized else "pairs")
    return fig


def sweep_figure(sweep: pd.DataFrame, metrics: list[str] | None = None, title: str | None = None) -> go.Figure:
    """Metric against the number of classes sampled: mean over repeats with min-max whiskers."""
    metrics = metrics or list(SWEEP_METRICS)
    g = sweep.groupby("n_classes")
    fig = go.Figure()
    for i, m in enumerate(metrics):
        mean, lo, hi = g[m].mean(), g[m].min(), g[m].max()
        col, dash, symbol, _ = series_look(i)
        fig.add_trace(go.Scatter(x=mean.index, y=mean, mode="lines+markers", name=label(m),
                                 line=dict(color=col, width=2, dash=dash), marker=dict(symbol=symbol),
                                 error_y=dict(type="data", symmetric=False, array=hi - mean, arrayminus=mean - lo)))
    fig.update_layout(**base_layout(title or "Metrics against the number of classes"))
    fig.update_xaxes(title="number of classes (log scale)", type="log")
    fig.update_yaxes(title="value", range=[0, 1.02])
    return fig


def erc_figure(curves: dict[str, pd.DataFrame], title: str | None = None) -> go.Figure:
    """Error-vs-reject curves per method, with each method's oracle dotted."""
    fig = go.Figure()
    for i, (name, c) in enumerate(curves.items()):
        col, dash, _, _ = series_look(i)
        name = plot_text(name)
        fig.add_trace(go.Scatter(x=c["fraction_rejected"], y=c["error"], mode="lines", name=name,
                                 line=dict(color=col, width=2, dash=dash)))
        fig.add_trace(go.Scatter(x=c["fraction_rejected"], y=c["oracle_error"], mode="lines",
                                 name=f"{name} (oracle)", line=dict(color=col, width=1.0, dash="dot"),
                                 opacity=0.7, showlegend=False))
    # one legend entry for every oracle: the legend stays one row per method at column width
    fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name="oracles",
                             line=dict(color="#777", width=1.0, dash="dot")))
    fig.update_layout(**base_layout(title or "Error against rejected fraction (least confident first)", aspect=0.7))
    fig.update_xaxes(title="fraction of queries rejected", range=[0, 1])
    fig.update_yaxes(title="error of the kept queries", rangemode="tozero")
    return fig


def generalization_figure(gen: pd.DataFrame, splits: list[str], title: str | None = None) -> go.Figure:
    """Each metric per split, side by side."""
    fig = go.Figure()
    for i, s in enumerate(splits):
        col, _, _, pattern = series_look(i)
        fig.add_trace(go.Bar(x=[label(m, short=True) for m in gen["metric"]], y=gen[s], name=plot_text(s),
                             marker=dict(color=col, pattern_shape=pattern)))
    fig.update_layout(**base_layout(title or "Metrics per split"), barmode="group")
    fig.update_yaxes(title="value")
    return fig


def grouped_recall_by_size_figure(rows: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Grouped Recall@K against the group size S, with its interval."""
    fig = go.Figure()
    for i, (m, part) in enumerate(rows.groupby("method", sort=False)):
        col, dash, symbol, _ = series_look(i)
        fig.add_trace(go.Scatter(x=part["group_size"], y=part["mean"], mode="lines+markers", name=plot_text(m),
                                 line=dict(color=col, dash=dash), marker=dict(symbol=symbol),
                                 error_y=dict(type="data", symmetric=False, array=part["ci_high"] - part["mean"],
                                              arrayminus=part["mean"] - part["ci_low"])))
    fig.update_layout(**base_layout(title or "Grouped Recall@1 against group size S"))
    fig.update_xaxes(title="classes per group S", type="log")
    fig.update_yaxes(title="Grouped Recall@1", range=[0, 1.02])
    return fig
