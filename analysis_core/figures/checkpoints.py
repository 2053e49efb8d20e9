"""Figures for checkpoints over training: metrics against checkpoint (one line per family, one
panel per metric), a class x checkpoint heat map of mean AP, and pair-similarity histograms as
small multiples over checkpoints."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import DASHES, PALETTE, base_layout, figure, plot_text, rgba, text_lines, wrapped_text

PANEL_TITLE_WIDTH = 24  # characters per line of a panel's title (half the figure's width)

DEFAULT_METRICS = ("map", "map_at_r", "precision_at_1", "jsd")


def checkpoint_figure(table: pd.DataFrame, split: str, metrics: tuple[str, ...] = DEFAULT_METRICS,
                      title: str | None = None) -> go.Figure:
    """Each metric against the training step, one line per family with its ``1 - alpha``
    interval as error bars; the best checkpoint of each family and metric drawn as a star."""
    t = table[(table["split"] == split) & table["metric"].isin(metrics)]
    shown = [m for m in metrics if m in set(t["metric"])]
    labels = {m: t.loc[t["metric"] == m, "label"].iloc[0] for m in shown}
    cols = min(2, len(shown)) or 1
    rows = math.ceil(len(shown) / cols) or 1
    # each panel about as tall as wide: 2 x 2 panels stay readable at column width
    layout = base_layout(title or f"Metrics over training ({plot_text(split)}); star = best checkpoint",
                         aspect=0.5 * rows + 0.1)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[labels[m] for m in shown], horizontal_spacing=0.14,
                        vertical_spacing=0.2 if rows > 1 else 0.1, figure=figure([], layout))
    families = list(dict.fromkeys(t["family"]))
    traces, cells = [], []
    for i, m in enumerate(shown):
        for j, fam in enumerate(families):
            part = t[(t["metric"] == m) & (t["family"] == fam)].sort_values("step")
            col = PALETTE[j % len(PALETTE)]
            name = plot_text(fam or "checkpoints")
            traces.append(go.Scatter(
                x=part["step"].to_numpy(), y=part["value"].to_numpy(), mode="lines+markers", name=name,
                legendgroup=name, showlegend=i == 0,
                line=dict(color=col, width=2, dash=DASHES[j // len(PALETTE) % len(DASHES)]),
                marker=dict(size=6, symbol="circle"),
                error_y=dict(type="data", symmetric=False, array=(part["ci_high"] - part["value"]).to_numpy(),
                             arrayminus=(part["value"] - part["ci_low"]).to_numpy(), color=rgba(col, 0.6)),
                customdata=part["method"].map(plot_text).to_numpy(),
                hovertemplate="%{customdata}: %{y:.4f}<extra>" + name + "</extra>"))
            # the best checkpoint as a star over its circle (its own trace: the legend keeps the circle)
            best = part[part["is_best"].astype(bool)]
            traces.append(go.Scatter(x=best["step"].to_numpy(), y=best["value"].to_numpy(), mode="markers",
                                     legendgroup=name, showlegend=False,
                                     marker=dict(size=11, symbol="star", color=col), hoverinfo="skip"))
            cells += [(i // cols + 1, i % cols + 1)] * 2
    steps = sorted(set(t["step"].tolist()))
    if len(steps) <= 12:  # the steps themselves as ticks: 1, 1.5, 2 on an axis of two checkpoints read as steps
        fig.update_xaxes(tickmode="array", tickvals=steps, ticktext=[str(int(s)) if float(s).is_integer() else str(s)
                                                                      for s in steps])
    # the traces in one call, the bottom row's axis titles in one update (one plotly update each)
    fig.add_traces(traces, rows=[r for r, _ in cells], cols=[c for _, c in cells])
    bottom = [fig.get_subplot(rows, i % cols + 1).xaxis.plotly_name for i in range(len(shown)) if i // cols + 1 == rows]
    return fig.update_layout({axis: dict(title_text="step") for axis in bottom})


def checkpoint_heatmap(class_ap: pd.DataFrame, split: str, family: str, title: str | None = None) -> go.Figure:
    """Mean AP per class (rows) and checkpoint (columns, in step order)."""
    part = class_ap[(class_ap["split"] == split) & (class_ap["family"] == family)]
    order = part.drop_duplicates("method").sort_values("step")["method"].tolist()
    grid = part.pivot_table(index="class", columns="method", values="mean_ap")[order]
    heat = go.Heatmap(z=grid.to_numpy(), x=[wrapped_text(m) for m in order], y=[plot_text(c) for c in grid.index],
                      zmin=0, zmax=1, colorscale="Viridis", colorbar=dict(title="mean AP"),
                      hovertemplate="class %{y}, %{x}: %{z:.3f}<extra></extra>")
    fam = f"{plot_text(family)}, " if family else ""
    return figure([heat], base_layout(title or f"Mean AP per class over training ({fam}{plot_text(split)})"),
                  xaxis=dict(title="checkpoint", type="category"), yaxis=dict(title="class", type="category"))


def histogram_small_multiples(hist: pd.DataFrame, methods: list[str], jsd: dict[str, float], split: str = "all",
                              title: str | None = None) -> go.Figure:
    """Positive- and negative-pair similarity densities, one panel per checkpoint (in order), JSD
    in each panel's title."""
    # two panels a row, the name and the JSD on two lines: legible at column width; panels 0.3
    # and the gaps between rows (ticks, the next titles) 0.22 of the plot width high
    cols = min(2, len(methods)) or 1
    rows = math.ceil(len(methods) / cols) or 1
    names = {m: wrapped_text(m, PANEL_TITLE_WIDTH) for m in methods}
    extra = max((len(text_lines(n)) for n in names.values()), default=1) - 1  # lines beyond one: more room
    panel, gap = 0.3, 0.22 + 0.06 * extra
    aspect = rows * panel + (rows - 1) * gap
    layout = base_layout(title or f"Pair similarities over training ({plot_text(split)})", aspect=aspect)
    layout["margin"] = {**layout["margin"], "t": layout["margin"]["t"] + 16 * extra}
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True, horizontal_spacing=0.08,
                        vertical_spacing=gap / aspect if rows > 1 else 0.0,
                        subplot_titles=[f"{names[m]}<br>JSD {jsd[m]:.3f}" for m in methods],
                        figure=figure([], layout))
    traces, cells = [], []
    for i, m in enumerate(methods):
        part = hist[(hist["method"] == m) & (hist["split"] == split)]
        for kind, col in (("negative", PALETTE[0]), ("positive", PALETTE[1])):
            h = part[part["kind"] == kind]
            traces.append(go.Scatter(x=(0.5 * (h["bin_left"] + h["bin_right"])).to_numpy(), y=h["density"].to_numpy(),
                                     mode="lines", fill="tozeroy", fillcolor=rgba(col, 0.3),
                                     line=dict(color=col, width=1), name=f"{kind} pairs", legendgroup=kind,
                                     showlegend=i == 0))
            cells.append((i // cols + 1, i % cols + 1))
    return fig.add_traces(traces, rows=[r for r, _ in cells], cols=[c for _, c in cells])
