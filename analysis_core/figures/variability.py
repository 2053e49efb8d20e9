"""Plotly figure builders for the variability statistics: data in, ``go.Figure`` out."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..number_format import format_p
from ..stats.bands import ALL, describe
from ..stats.posthoc import PostHocResult
from .style import (
    PALETTE,
    apply_layout,
    base_layout,
    box_fill,
    figure,
    plot_text,
    rgba,
    series_look,
    text_lines,
    wrapped_text,
)


def pr_bands_figure(bands: pd.DataFrame, methods: list[str] | None = None, classes: list[str] | None = None,
                    split: str = ALL, title: str | None = None, kind: str = "t", alpha: float = 0.05) -> go.Figure:
    """Mean precision-recall curves with their confidence bands, one colour per (method, class);
    the title names the band (``kind``: ``t`` pointwise or ``bootstrap`` simultaneous, its level
    ``1 - alpha``) and the unit it is over (the shown bands' unit and n_units columns)."""
    b = bands
    if "split" in b.columns:
        b = b[b["split"] == split]
    methods = methods or list(dict.fromkeys(b["method"]))
    classes = classes or [ALL]
    traces: list[go.Scatter] = []
    shown: list[pd.DataFrame] = []
    for m in methods:
        for c in classes:
            part = b[(b["method"] == m) & (b["class"] == c)].sort_values("recall")
            shown.append(part)
            if part.empty:
                continue
            col, dash, symbol, _ = series_look(len(traces) // 2)
            name = plot_text(m if len(classes) == 1 else (c if len(methods) == 1 else f"{m} · {c}"))
            recall = part["recall"].to_numpy()
            traces.append(go.Scatter(x=np.r_[recall, recall[::-1]],
                                     y=np.r_[part["high"].to_numpy(), part["low"].to_numpy()[::-1]], fill="toself",
                                     fillcolor=rgba(col, 0.18), line=dict(width=0), hoverinfo="skip",
                                     showlegend=False, legendgroup=name))
            traces.append(go.Scatter(x=recall, y=part["mean"].to_numpy(), mode="lines+markers", name=name,
                                     line=dict(color=col, width=2, dash=dash), marker=dict(size=4, symbol=symbol),
                                     legendgroup=name,
                                     customdata=np.c_[part["low"], part["high"], part["n"]],
                                     hovertemplate="recall %{x:.2f}<br>precision %{y:.3f}"
                                                   "<br>band [%{customdata[0]:.3f}, %{customdata[1]:.3f}]"
                                                   "<br>n = %{customdata[2]}<extra>" + name + "</extra>"))
    band = describe(pd.concat(shown) if shown else b.iloc[:0], alpha, kind)
    return figure(traces, base_layout(title or f"Precision-recall: mean and {band}", aspect=0.8),
                  xaxis=dict(title="recall", range=[0, 1]), yaxis=dict(title="precision", range=[0, 1.02]))


def ap_by_class_figure(ap: pd.DataFrame, title: str | None = None, max_classes: int = 60) -> go.Figure:
    """Per-query AP by class (box plus points), one colour per method. With more than
    ``max_classes`` classes, the ``max_classes`` with the lowest mean AP are shown."""
    labels = ap["label"].astype(str)
    df = ap.assign(label=labels.map({c: plot_text(c) for c in labels.unique()}))  # each class escaped once
    order = df.groupby("label")["ap"].mean().sort_values()
    shown = order.index[:max_classes].tolist()
    df = df[df["label"].isin(shown)]
    traces = []
    for i, (m, part) in enumerate(df.groupby("method", sort=False)):
        col, _, symbol, _ = series_look(i)
        traces.append(go.Box(x=part["label"].to_numpy(), y=part["ap"].to_numpy(), name=plot_text(m), marker_color=col,
                             fillcolor=box_fill(i), boxpoints="all", jitter=0.4, pointpos=0,
                             marker=dict(size=3, opacity=0.5, symbol=symbol), line=dict(width=1.2)))
    sub = f" ({len(shown)} of {len(order)} classes, lowest mean AP)" if len(order) > len(shown) else ""
    return figure(traces, base_layout(title or f"Average precision by query class{sub}", aspect=0.55),
                  boxmode="group", xaxis=dict(title="class", categoryorder="array", categoryarray=shown,
                                              type="category"),
                  yaxis=dict(title="AP", range=[-0.02, 1.02]))


def tukey_figure(posthoc: PostHocResult, title: str | None = None) -> go.Figure:
    """Simultaneous intervals (Tukey) per group: groups whose intervals do not overlap differ
    significantly at the family-wise level alpha. For Games-Howell, the pairwise differences."""
    fig = go.Figure()
    if posthoc.intervals is not None:
        iv = posthoc.intervals.sort_values("mean")
        fig.add_trace(go.Scatter(x=iv["mean"], y=iv["group"].astype(str).map(wrapped_text), mode="markers",
                                 error_x=dict(type="data", symmetric=False, array=iv["high"] - iv["mean"],
                                              arrayminus=iv["mean"] - iv["low"], thickness=1.5, width=4),
                                 marker=dict(color=PALETTE[0], size=7), name="mean AP",
                                 hovertemplate="%{y}: %{x:.3f}<extra></extra>"))
        fig.update_xaxes(title=f"mean AP, {100 * (1 - posthoc.alpha):g}% simultaneous interval")
        fig.update_yaxes(type="category")
        default = "Tukey HSD: disjoint intervals differ significantly"
    else:
        t = posthoc.table.assign(pair=(posthoc.table["group2"].astype(str) + " − "
                                       + posthoc.table["group1"].astype(str)).map(wrapped_text))
        fig.add_trace(go.Scatter(x=t["meandiff"], y=t["pair"], mode="markers",
                                 error_x=dict(type="data", symmetric=False, array=t["upper"] - t["meandiff"],
                                              arrayminus=t["meandiff"] - t["lower"]),
                                 marker=dict(color=np.where(t["reject"], PALETTE[1], PALETTE[7]), size=7)))
        fig.add_vline(x=0, line=dict(color="#888", dash="dot"))
        fig.update_xaxes(title=f"difference in mean AP, {100 * (1 - posthoc.alpha):g}% interval")
        fig.update_yaxes(type="category")
        default = f"{posthoc.method}: intervals excluding 0 differ significantly"
    rows = len(fig.data[0].y)
    chars = max((len(line) for y in fig.data[0].y for line in text_lines(y)), default=0)
    lines = max((len(text_lines(y)) for y in fig.data[0].y), default=1)
    if posthoc.intervals is not None and posthoc.intervals[["low", "high"]].isna().all().all():
        default = "Tukey HSD: group means (intervals undefined, see the table's notes)"
    apply_layout(fig, base_layout(title or default, rows=rows * lines, label_chars=chars), showlegend=False,
                 height=max(360, 22 * rows * lines + 140))
    fig.update_yaxes(dtick=1, range=[-0.7, rows - 0.3])  # no empty rows above and below
    return fig


def paired_differences_figure(paired: pd.DataFrame, title: str | None = None) -> go.Figure:
    """Mean per-query AP difference of each method pair with its t interval (forest plot)."""
    a, b = paired["method_a"].astype(str), paired["method_b"].astype(str)
    la, lb = a.str.len(), b.str.len()
    # long names: "a −" and "b" on two lines, so the plot keeps its width at column width
    long = len(paired) > 0 and int((la + lb).max()) > 30
    sep = " −<br>" if long else " − "
    t = paired.assign(pair=[plot_text(x) + sep + plot_text(y) for x, y in zip(a, b, strict=True)])
    chars = 0 if not len(paired) else int(max(la.max(), lb.max()) + 2 if long else (la + lb).max() + 3)
    if {"wins", "ties", "losses"} <= set(t.columns):  # per-query counts: tests over queries
        hover = [f"wins {w} / ties {ti} / losses {lo}<br>p (Holm) = {format_p(p)}"
                 for w, ti, lo, p in zip(t["wins"], t["ties"], t["losses"], t["p_holm"], strict=True)]
    else:
        hover = [f"p (Holm) = {format_p(p)}" for p in t["p_holm"]]
    if "unit" in t.columns and len(t):
        hover = [f"{h}<br>unit: {u} ({n})" for h, u, n in zip(hover, t["unit"], t["n_units"], strict=True)]
    traces = [go.Scatter(x=t["mean_diff"].to_numpy(), y=t["pair"].to_numpy(), mode="markers", text=hover,
                         error_x=dict(type="data", symmetric=False, array=(t["ci_high"] - t["mean_diff"]).to_numpy(),
                                      arrayminus=(t["mean_diff"] - t["ci_low"]).to_numpy()),
                         marker=dict(color=np.where(t["reject"], PALETTE[1], PALETTE[7]), size=8),
                         hovertemplate="%{y}: %{x:.4f}<br>%{text}<extra></extra>", showlegend=False)]
    # what the two colours mean: legend entries without data
    for name, col in (("significant (Holm)", PALETTE[1]), ("not significant", PALETTE[7])):
        traces.append(go.Scatter(x=[None], y=[None], mode="markers", name=name, marker=dict(color=col, size=8)))
    if title is None:  # what the intervals generalise over, and over how many units
        title = "AP differences with t intervals"
        if "unit" in t.columns and len(t):
            title += f" over {int(t['n_units'].max()):,} {'classes' if t['unit'].iloc[0] == 'class' else 'queries'}"
    fig = figure(traces, base_layout(title,
                                     rows=len(t) * (1.5 if long else 1), label_chars=chars),
                 xaxis=dict(title="mean AP difference a − b"),
                 yaxis=dict(type="category", range=[-0.7, len(t) - 0.3], dtick=1))  # every pair labelled
    return fig.add_vline(x=0, line=dict(color="#888", dash="dot"))
