"""Figures for replicate runs: each family's runs as dots with the mean and its interval over runs
(one panel per metric), and metrics over training averaged over runs with a band over runs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import PALETTE, base_layout, figure, plot_text, rgba

DEFAULT_METRICS = ("map", "map_at_r", "r_precision", "precision_at_1")


def _panels(metrics: list[str], labels: dict[str, str], title: str) -> tuple[go.Figure, int]:
    cols = min(2, len(metrics)) or 1
    rows = math.ceil(len(metrics) / cols) or 1
    layout = base_layout(title, aspect=0.5 * rows + 0.1)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[labels[m] for m in metrics], horizontal_spacing=0.14,
                        vertical_spacing=0.2 if rows > 1 else 0.1, figure=figure([], layout))
    return fig, cols


def run_dots_figure(values: pd.DataFrame, summary: pd.DataFrame, split: str,
                    metrics: tuple[str, ...] = DEFAULT_METRICS, title: str | None = None) -> go.Figure:
    """Per metric: every run of every family as a dot, the family's mean over runs as a bar
    marker with its interval over runs (``summary``'s ci_low / ci_high)."""
    v = values[(values["split"] == split) & values["metric"].isin(metrics)]
    s = summary[(summary["split"] == split) & summary["metric"].isin(metrics)]
    shown = [m for m in metrics if m in set(v["metric"])]
    labels = {m: v.loc[v["metric"] == m, "label"].iloc[0] for m in shown}
    fig, cols = _panels(shown, labels, title or f"Runs per family ({plot_text(split)}): dots = runs, "
                                                 "bar = mean with its interval over runs")
    families = list(dict.fromkeys(v["family"]))
    ticks = [plot_text(f or "(no family)") for f in families]
    traces, cells = [], []
    for i, m in enumerate(shown):
        cell = (i // cols + 1, i % cols + 1)
        for j, fam in enumerate(families):
            col = PALETTE[j % len(PALETTE)]
            runs = v[(v["metric"] == m) & (v["family"] == fam)]
            n = len(runs)
            # runs spread sideways so equal values stay visible
            offsets = (np.arange(n) - (n - 1) / 2) * (0.12 / max(n - 1, 1)) if n > 1 else np.zeros(n)
            traces.append(go.Scatter(x=j + offsets, y=runs["value"].to_numpy(), mode="markers",
                                     marker=dict(size=7, color=rgba(col, 0.75), line=dict(width=0.5, color=col)),
                                     name=ticks[j], legendgroup=ticks[j], showlegend=False,
                                     customdata=runs["run"].map(plot_text).to_numpy(),
                                     hovertemplate="run %{customdata}: %{y:.4f}<extra>" + ticks[j] + "</extra>"))
            row = s[(s["metric"] == m) & (s["family"] == fam)]
            if len(row):
                r = row.iloc[0]
                hi = r["ci_high"] - r["mean"] if math.isfinite(r["ci_high"]) else 0.0
                lo = r["mean"] - r["ci_low"] if math.isfinite(r["ci_low"]) else 0.0
                traces.append(go.Scatter(x=[j + 0.25], y=[r["mean"]], mode="markers", showlegend=False,
                                         marker=dict(size=12, symbol="line-ew-open", color=col, line=dict(width=2)),
                                         error_y=dict(type="data", symmetric=False, array=[hi], arrayminus=[lo],
                                                      color=col, width=4),
                                         hovertemplate=f"{ticks[j]} mean over {int(r['n_runs'])} runs: "
                                                       "%{y:.4f}<extra></extra>"))
            cells += [cell] * (1 + bool(len(row)))
    fig.add_traces(traces, rows=[r for r, _ in cells], cols=[c for _, c in cells])
    return fig.update_xaxes(tickmode="array", tickvals=list(range(len(families))), ticktext=ticks,
                            range=[-0.5, len(families) - 0.4])


def run_curves_figure(curves: pd.DataFrame, split: str, metrics: tuple[str, ...] = DEFAULT_METRICS,
                      title: str | None = None) -> go.Figure:
    """Each metric against the training step, one line per family: the mean over runs with a
    band over runs (``ci_low`` / ``ci_high``; a family of one run has a line without band)."""
    t = curves[(curves["split"] == split) & curves["metric"].isin(metrics)]
    shown = [m for m in metrics if m in set(t["metric"])]
    labels = {m: t.loc[t["metric"] == m, "label"].iloc[0] for m in shown}
    fig, cols = _panels(shown, labels, title or f"Metrics over training, mean over runs with a band over runs "
                                                 f"({plot_text(split)})")
    families = list(dict.fromkeys(t["family"]))
    traces, cells = [], []
    for i, m in enumerate(shown):
        cell = (i // cols + 1, i % cols + 1)
        for j, fam in enumerate(families):
            part = t[(t["metric"] == m) & (t["family"] == fam)].sort_values("step")
            col = PALETTE[j % len(PALETTE)]
            name = plot_text(fam or "(no family)")
            banded = part[np.isfinite(part["ci_low"].to_numpy(float))]
            if len(banded):
                x = banded["step"].to_numpy()
                traces.append(go.Scatter(x=np.concatenate([x, x[::-1]]),
                                         y=np.concatenate([banded["ci_high"].to_numpy(),
                                                           banded["ci_low"].to_numpy()[::-1]]),
                                         fill="toself", fillcolor=rgba(col, 0.18), line=dict(width=0), mode="lines",
                                         legendgroup=name, showlegend=False, hoverinfo="skip"))
                cells.append(cell)
            traces.append(go.Scatter(x=part["step"].to_numpy(), y=part["mean"].to_numpy(), mode="lines+markers",
                                     name=name, legendgroup=name, showlegend=i == 0,
                                     line=dict(color=col, width=2), marker=dict(size=5),
                                     customdata=part["n_runs"].to_numpy(),
                                     hovertemplate="step %{x}: %{y:.4f} (mean of %{customdata} runs)<extra>"
                                                   + name + "</extra>"))
            cells.append(cell)
    fig.add_traces(traces, rows=[r for r, _ in cells], cols=[c for _, c in cells])
    steps = sorted(set(t["step"].tolist()))
    if len(steps) <= 12:
        fig.update_xaxes(tickmode="array", tickvals=steps, ticktext=[str(int(s)) for s in steps])
    return fig


def variance_components_figure(components: pd.DataFrame, split: str, title: str | None = None) -> go.Figure:
    """Per metric, the share of each variance component as a stacked horizontal bar."""
    from ..metrics.registry import label as metric_label

    part = components[components["split"] == split]
    metrics = list(dict.fromkeys(part["metric"]))
    names = list(dict.fromkeys(part["component"]))
    traces = []
    for j, comp in enumerate(names):
        rows = part[part["component"] == comp].set_index("metric").reindex(metrics)
        traces.append(go.Bar(y=[metric_label(m, short=True) for m in metrics],
                             x=rows["share"].fillna(0).to_numpy(), orientation="h", name=plot_text(comp),
                             marker=dict(color=PALETTE[j % len(PALETTE)]),
                             customdata=rows["sd"].to_numpy(),
                             hovertemplate=f"{plot_text(comp)}: %{{x:.1%}} of the variance (sd %{{customdata:.4f}})"
                                           "<extra></extra>"))
    layout = base_layout(title or f"Where the variance comes from ({plot_text(split)})",
                         aspect=0.15 + 0.1 * len(metrics))
    return figure(traces, layout, barmode="stack", xaxis=dict(title="share of the variance", range=[0, 1],
                                                                 tickformat=".0%"))
