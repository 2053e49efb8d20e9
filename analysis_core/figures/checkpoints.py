"""Figures for checkpoints over training: metrics against checkpoint (one line per family, one
panel per metric), a class x checkpoint heat map of mean AP, and pair-similarity histograms as
small multiples over checkpoints."""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .style import PALETTE, base_layout, rgba

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
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[labels[m] for m in shown], horizontal_spacing=0.12,
                        vertical_spacing=0.18)
    families = list(dict.fromkeys(t["family"]))
    for i, m in enumerate(shown):
        r, c = i // cols + 1, i % cols + 1
        for j, fam in enumerate(families):
            part = t[(t["metric"] == m) & (t["family"] == fam)].sort_values("step")
            col = PALETTE[j % len(PALETTE)]
            name = fam or "checkpoints"
            fig.add_trace(go.Scatter(
                x=part["step"], y=part["value"], mode="lines+markers", name=name, legendgroup=name,
                showlegend=i == 0, line=dict(color=col, width=2, dash=["solid", "dash", "dot", "dashdot"][j // 8 % 4]),
                marker=dict(size=[11 if b else 6 for b in part["is_best"]],
                            symbol=["star" if b else "circle" for b in part["is_best"]]),
                error_y=dict(type="data", symmetric=False, array=part["ci_high"] - part["value"],
                             arrayminus=part["value"] - part["ci_low"], color=rgba(col, 0.6)),
                customdata=part["method"], hovertemplate="%{customdata}: %{y:.4f}<extra>" + name + "</extra>"),
                row=r, col=c)
        fig.update_xaxes(title_text="step" if r == rows else None, row=r, col=c)
    fig.update_layout(**base_layout(title or f"Metrics over training ({split}); star = best checkpoint"))
    return fig


def checkpoint_heatmap(class_ap: pd.DataFrame, split: str, family: str, title: str | None = None) -> go.Figure:
    """Mean AP per class (rows) and checkpoint (columns, in step order)."""
    part = class_ap[(class_ap["split"] == split) & (class_ap["family"] == family)]
    order = part.drop_duplicates("method").sort_values("step")["method"].tolist()
    grid = part.pivot_table(index="class", columns="method", values="mean_ap")[order]
    fig = go.Figure(go.Heatmap(z=grid.to_numpy(), x=order, y=[str(c) for c in grid.index], zmin=0, zmax=1,
                               colorscale="Viridis", colorbar=dict(title="mean AP"),
                               hovertemplate="class %{y}, %{x}: %{z:.3f}<extra></extra>"))
    fam = f"{family}, " if family else ""
    fig.update_layout(**base_layout(title or f"Mean AP per class over training ({fam}{split})"))
    fig.update_xaxes(title="checkpoint", type="category")
    fig.update_yaxes(title="class", type="category")
    return fig


def histogram_small_multiples(hist: pd.DataFrame, methods: list[str], jsd: dict[str, float], split: str = "all",
                              title: str | None = None) -> go.Figure:
    """Positive- and negative-pair similarity densities, one panel per checkpoint (in order), JSD
    in each panel's title."""
    cols = min(3, len(methods)) or 1
    rows = math.ceil(len(methods) / cols) or 1
    fig = make_subplots(rows=rows, cols=cols, shared_yaxes=True,
                        subplot_titles=[f"{m} (JSD {jsd[m]:.3f})" for m in methods])
    for i, m in enumerate(methods):
        part = hist[(hist["method"] == m) & (hist["split"] == split)]
        for kind, col in (("negative", PALETTE[0]), ("positive", PALETTE[1])):
            h = part[part["kind"] == kind]
            fig.add_trace(go.Scatter(x=0.5 * (h["bin_left"] + h["bin_right"]), y=h["density"], mode="lines",
                                     fill="tozeroy", fillcolor=rgba(col, 0.3), line=dict(color=col, width=1),
                                     name=f"{kind} pairs", legendgroup=kind, showlegend=i == 0),
                          row=i // cols + 1, col=i % cols + 1)
    fig.update_layout(**base_layout(title or f"Pair similarities over training ({split})"))
    return fig
