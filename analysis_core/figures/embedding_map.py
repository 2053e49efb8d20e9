"""The embedding map: every projected item (:mod:`analysis_core.stats.projection`) as one WebGL
point, coloured by class, by per-query AP or by split."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..methods import natural_key
from .style import base_layout, figure, plot_text, series_look

MAX_CLASS_COLOURS = 20  # classes with a colour of their own; the rest are drawn grey as "other"
GREY = "#BBBBBB"
COLOURINGS = ("class", "ap", "split")


def _marker_size(n: int) -> float:
    """Points shrink as they multiply, so that 50 000 of them do not fuse into a blot."""
    return float(np.clip(9 - 1.3 * np.log10(max(n, 1)), 3, 7))


def _hover(df: pd.DataFrame, with_class: bool, with_ap: bool) -> tuple[np.ndarray, str]:
    """(customdata, hovertemplate): the input row first (a selection reads it back), the item's
    id, its AP as text ("none" for an item without one; left out when no item has an AP: the map
    was drawn without an evaluation) and, when the trace is not one class, its class."""
    ap = df["ap"].to_numpy(np.float64)
    ap_text = np.where(np.isnan(ap), "none", np.char.mod("%.4f", np.nan_to_num(ap)))
    cols = [df["row"].to_numpy(), df["id"].map(plot_text).to_numpy(), ap_text]
    template = "row %{customdata[0]} · id %{customdata[1]}" + ("<br>AP %{customdata[2]}" if with_ap else "")
    if with_class:
        cols.append(df["label"].map(plot_text).to_numpy())
        template += "<br>class %{customdata[3]}"
    return np.column_stack(cols), template


def _trace(df: pd.DataFrame, name: str, size: float, *, colour: object, symbol: str = "circle",
           with_class: bool = False, with_ap: bool = True, **marker) -> go.Scattergl:
    custom, template = _hover(df, with_class, with_ap)
    return go.Scattergl(x=df["x"].to_numpy(), y=df["y"].to_numpy(), mode="markers", name=name,
                        marker=dict(color=colour, size=size, symbol=symbol, opacity=0.75, line=dict(width=0),
                                    **marker),
                        customdata=custom, hovertemplate=template + f"<extra>{name}</extra>")


def class_colours(points: pd.DataFrame, classes: list | None = None,
                  max_classes: int = MAX_CLASS_COLOURS) -> list:
    """The classes drawn in a colour of their own: ``classes`` (at most ``max_classes`` of them), or
    every class when there are at most ``max_classes``, else the ``max_classes`` largest (ties in
    natural order)."""
    counts = points["label"].value_counts()
    order = sorted(counts.index, key=lambda c: (-counts[c], natural_key(str(c))))
    if classes is not None:
        wanted = set(classes)
        return [c for c in sorted(counts.index, key=lambda c: natural_key(str(c))) if c in wanted][:max_classes]
    if len(order) <= max_classes:
        return sorted(order, key=lambda c: natural_key(str(c)))
    return order[:max_classes]


def embedding_map_figure(points: pd.DataFrame, colour: str = "class", *, title: str = "Embedding map",
                         axis_titles: tuple[str, str] = ("1", "2"), classes: list | None = None,
                         max_classes: int = MAX_CLASS_COLOURS) -> go.Figure:
    """One ``Scattergl`` point per row of ``points`` (columns ``x, y, row, id, label, ap`` and, to
    colour by split, ``split``; ``ap`` NaN for items without a per-query AP — lone queries,
    gallery-only items, queries outside a query sample).

    ``colour``: ``class`` — a colour (and, past the palette's 8, a marker shape) per class, for
    :func:`class_colours`'s classes, the others grey as one "other" series; ``ap`` — per-query AP on
    the Viridis scale from 0 to 1 with a colour bar, the lowest drawn on top, items without an AP
    grey (and, with ``classes``, the other classes' items grey too); ``split`` — a colour
    per split. Hovering shows the item's row, id, class and AP. Axes share one scale, so distances
    read the same across and along (a PCA's second axis is as short as its variance)."""
    if colour not in COLOURINGS:
        raise ValueError(f"colour must be one of {COLOURINGS}, not {colour!r}")
    size = _marker_size(len(points))
    with_ap = bool(points["ap"].notna().any())
    traces: list[go.Scattergl] = []
    if colour == "class":
        shown = class_colours(points, classes, max_classes)
        rest = points[~points["label"].isin(shown)]
        if not rest.empty:
            n_other = rest["label"].nunique()
            traces.append(_trace(rest, f"other ({n_other:,} class{'es' if n_other > 1 else ''})", size,
                                 colour=GREY, with_class=True, with_ap=with_ap))
        for i, c in enumerate(shown):
            col, _, symbol, _ = series_look(i)
            traces.append(_trace(points[points["label"] == c], plot_text(c), size, colour=col, symbol=symbol,
                                 with_ap=with_ap))
    elif colour == "split":
        for i, sp in enumerate(sorted(points["split"].unique(), key=lambda s: natural_key(str(s)))):
            col, _, symbol, _ = series_look(i)
            traces.append(_trace(points[points["split"] == sp], plot_text(sp), size, colour=col, symbol=symbol,
                                 with_class=True, with_ap=with_ap))
    else:
        has = points["ap"].notna()
        if (~has).any():
            traces.append(_trace(points[~has], "no AP (lone query or not a query)", size, colour=GREY,
                                 with_class=True))
        if classes is not None:  # the picked classes' queries in colour, the others' grey
            picked = points["label"].isin(classes)
            if (has & ~picked).any():
                traces.append(_trace(points[has & ~picked], "other classes", size, colour=GREY, with_class=True))
            has &= picked
        scored = points[has].sort_values("ap", ascending=False, kind="stable")  # the failing queries on top
        name = "per-query AP" if classes is None else "AP of " + ", ".join(plot_text(c) for c in classes)
        traces.append(_trace(scored, name, size, colour=scored["ap"].to_numpy(), with_class=True,
                             colorscale="Viridis", cmin=0.0, cmax=1.0, showscale=True,
                             colorbar=dict(title=dict(text="AP"), thickness=12, len=0.6)))
    layout = base_layout(title, aspect=0.8)
    # on screen a tall plot (an export takes its height from the aspect); the plot area shrinks to
    # keep one scale on both axes rather than padding an axis with empty range
    return figure(traces, layout, dragmode="lasso", hovermode="closest", height=640,
                  xaxis=dict(title=axis_titles[0], zeroline=False, constrain="domain"),
                  yaxis=dict(title=axis_titles[1], zeroline=False, scaleanchor="x", scaleratio=1,
                             constrain="domain"),
                  legend=dict(itemsizing="constant"))
