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


def _hover(df: pd.DataFrame, with_class: bool, with_ap: bool) -> dict:
    """The trace's hover and selection data: ``customdata`` numbers only — the input row first (a
    selection reads it back), then the AP when ``with_ap`` — so that plotly sends them as a typed
    array (50 000 points: a fraction of the bytes and the parsing of a JSON list); ``text`` the
    item's id (when the table has an ``id`` column) and, with ``with_class``, its class."""
    # float32 holds every row index below 2^24 exactly, and halves what the browser receives
    dtype = np.float32 if len(df) == 0 or df["row"].max() < 2**24 else np.float64
    custom = df["row"].to_numpy(dtype)[:, None]
    template = "row %{customdata[0]}"
    if with_ap:
        custom = np.c_[custom, df["ap"].to_numpy(dtype)]
        template += "<br>AP %{customdata[1]:.4f}"
    parts = []
    if "id" in df.columns:
        parts.append("id " + df["id"].map(plot_text))
    if with_class:
        parts.append("class " + df["label"].map(plot_text))
    out: dict = {"customdata": custom}
    if parts:
        out["text"] = (parts[0] if len(parts) == 1 else parts[0] + "<br>" + parts[1]).to_numpy()
        template += "<br>%{text}"
    return {**out, "hovertemplate": template}


def _trace(df: pd.DataFrame, name: str, size: float, *, colour: object, symbol: str = "circle",
           with_class: bool = False, with_ap: bool = False, **marker) -> go.Scattergl:
    # coordinates in float32: a map is drawn to a screen's (or a page's) resolution
    return go.Scattergl(x=df["x"].to_numpy(np.float32), y=df["y"].to_numpy(np.float32), mode="markers", name=name,
                        # an open symbol is only its outline: drawn in the marker's colour, 1 px wide
                        marker=dict(color=colour, size=size, symbol=symbol, opacity=0.75,
                                    line=dict(width=1, color=colour) if symbol.endswith("-open") else dict(width=0),
                                    **marker), **_hover(df, with_class, with_ap))


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
    """One ``Scattergl`` point per row of ``points`` (columns ``x, y, row, label, ap``, ``id`` when
    the items have ids, and ``split`` to colour by split; ``ap`` NaN for items without a per-query AP — lone queries,
    gallery-only items, queries outside a query sample).

    ``colour``: ``class`` — a colour (and, past the palette's 8, a marker shape) per class, for
    :func:`class_colours`'s classes, the others grey as one "other" series; ``ap`` — per-query AP on
    the Viridis scale from 0 to 1 with a colour bar, the lowest drawn on top, items without an AP
    grey (and, with ``classes``, the other classes' items grey too); ``split`` — a colour
    per split. Hovering shows the item's row, id, class and AP. Axes share one scale, so distances
    read the same across and along (a PCA's second axis is as short as its variance). The items'
    hover shows the row, the id and the class (the trace's name where it is one class), and the AP
    under AP colouring."""
    if colour not in COLOURINGS:
        raise ValueError(f"colour must be one of {COLOURINGS}, not {colour!r}")
    size = _marker_size(len(points))
    traces: list[go.Scattergl] = []
    if colour == "class":
        shown = class_colours(points, classes, max_classes)
        rest = points[~points["label"].isin(shown)]
        if not rest.empty:
            n_other = rest["label"].nunique()
            traces.append(_trace(rest, f"other ({n_other:,} class{'es' if n_other > 1 else ''})", size,
                                 colour=GREY, with_class=True))
        for i, c in enumerate(shown):
            col, _, symbol, _ = series_look(i)
            traces.append(_trace(points[points["label"] == c], plot_text(c), size, colour=col, symbol=symbol))
    elif colour == "split":
        for i, sp in enumerate(sorted(points["split"].unique(), key=lambda s: natural_key(str(s)))):
            col, _, symbol, _ = series_look(i)
            traces.append(_trace(points[points["split"] == sp], plot_text(sp), size, colour=col, symbol=symbol,
                                 with_class=True))
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
        traces.append(_trace(scored, name, size, colour=scored["ap"].to_numpy(), with_class=True, with_ap=True,
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
