"""Shared look: the Okabe-Ito colour-blind-safe palette, a clean screen layout, and the page
layout of an exported figure (sizes in points, legend and title clear of each other).

Beyond the palette's 8 colours, series 9-16 reuse the colours dashed with open markers, 17-24
dotted with crosses, and so on (:func:`series_look`); boxes, which have no dash, are filled
lighter, hollow, darker (:func:`box_fill`): every series stays distinguishable.

Plotly reads a subset of HTML (``<b>``, ``<br>``, links) in titles, trace names, tick labels and
annotations and decodes entities: every user-provided name (method, class, split) goes through
:func:`plot_text` before it is drawn, so it shows as written.
"""

from __future__ import annotations

import copy
import html
import math
import re
import textwrap

import plotly.graph_objects as go

PALETTE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"]
DASHES = ["solid", "dash", "dot", "dashdot"]
SYMBOLS = ["circle", "square-open", "x", "diamond-open"]
PATTERNS = ["", "/", ".", "x"]  # bar fill patterns, the bars' counterpart of the dashes
DEFAULT_ASPECT = 0.62  # plot-area height / width when a figure kind sets none
_SYMBOL_PX = 40  # a legend entry's symbol and gap, in plotly


def rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[i:i + 2], 16) for i in (0, 2, 4))
    return f"rgba({r},{g},{b},{alpha})"


def series_look(i: int) -> tuple[str, str, str, str]:
    """(colour, line dash, marker symbol, bar pattern) of the ``i``-th series: the 8 Okabe-Ito
    colours, then the same colours with the next dash / marker / pattern."""
    cycle = (i // len(PALETTE)) % len(DASHES)
    return PALETTE[i % len(PALETTE)], DASHES[cycle], SYMBOLS[cycle], PATTERNS[cycle]


def plot_text(text: object) -> str:
    """``text`` (a method, class or split name) for a plotly title, trace name, category or
    annotation: HTML escaped, so plotly shows it as written instead of reading it as markup."""
    return html.escape(str(text), quote=False)


LABEL_WIDTH = 28  # characters per line of a wrapped name (about a third of a 3.5 in column at 8 pt)
_BREAK_AFTER = "_-./ :|·,;"


def wrapped_text(text: object, width: int = LABEL_WIDTH) -> str:
    """``text`` as :func:`plot_text`, on lines of at most ``width`` characters (``<br>``), broken
    after a separator (``_ - . / :`` …) where one falls in the line's last third: long method
    names (``resnet50_arcface_lr0.001_bs256_e10``) no longer squeeze the plot into a strip or
    run over titles, and the whole name stays readable (no two names become one)."""
    raw, lines = str(text), []
    while len(raw) > width:
        cut = max((i + 1 for i in range(width * 2 // 3, width) if raw[i] in _BREAK_AFTER), default=width)
        lines.append(raw[:cut])
        raw = raw[cut:]
    lines.append(raw)
    return "<br>".join(plot_text(line) for line in lines)


def text_lines(label: str) -> list[str]:
    """The lines of a (wrapped) label."""
    return str(label).split("<br>")


def box_fill(i: int) -> str:
    """The fill of the ``i``-th box series: the colour of :func:`series_look`, translucent for
    the first 8, hollow for the next 8, nearly opaque for the 8 after."""
    cycle = (i // len(PALETTE)) % len(DASHES)
    return rgba(PALETTE[i % len(PALETTE)], (0.5, 0.0, 0.9, 0.25)[cycle])


def base_layout(title: str, font_family: str = "Liberation Sans, Arial, sans-serif", font_size: int = 12,
                aspect: float = DEFAULT_ASPECT, rows: float | None = None, label_chars: int = 0) -> dict:
    """The screen layout; ``aspect`` (plot-area height / width) and ``rows`` (one labelled row
    per category) tell the export how tall the figure kind is (:func:`page_layout`);
    ``label_chars``, the longest category label on the y axis, how much of the width it takes."""
    return dict(
        title=dict(text=title, x=0.0, xanchor="left", font=dict(size=font_size + 2)),
        template="simple_white",
        font=dict(family=font_family, size=font_size),
        colorway=PALETTE,
        margin=dict(l=60, r=20, t=50, b=50),
        # on screen the legend sits right of the plot (room enough, never over the title)
        legend=dict(orientation="v", yanchor="top", y=1.0, xanchor="left", x=1.02),
        meta={"aspect": aspect, **({"rows": rows} if rows else {}),
              **({"label_chars": label_chars} if label_chars else {})},
    )


def figure(data: list, layout: dict, **extra) -> go.Figure:
    """``go.Figure(data, layout)`` with ``layout`` (from :func:`base_layout`) updated by ``extra``
    (nested dicts merged, as by ``update_layout``): the same figure as adding the traces and
    calling ``update_layout`` and ``update_xaxes`` / ``update_yaxes`` (single axes: ``xaxis=``,
    ``yaxis=``) after, in one validation; each update call runs plotly's batch-update machinery
    (5-30 ms). The template is set by :func:`apply_layout`'s shortcut."""
    layout = copy.deepcopy(layout)
    _merge(layout, extra)
    name = layout.pop("template", None)
    return apply_layout(go.Figure(data=data, layout=layout), {} if name is None else {"template": name})


def apply_layout(fig: go.Figure, layout: dict, **extra) -> go.Figure:
    """``fig.update_layout(**layout, **extra)`` (``layout`` from :func:`base_layout`), with the
    template, a registered template's name, set as plotly sets its default template: the
    registered template is already validated, so its JSON is stored without validating and
    copying it again (25 ms a figure, the larger part of building most figures). The figure's
    JSON is the same as through ``update_layout``."""
    import plotly.io as pio

    layout = {**layout, **extra}
    name = layout.pop("template", None)
    if isinstance(name, str) and name in pio.templates:
        lay = fig.layout
        lay._validate = False
        try:
            lay.template = pio.templates[name]  # unvalidated: stored as its JSON, a copy
        finally:
            lay._validate = fig._validate
    elif name is not None:
        layout["template"] = name
    return fig.update_layout(**layout) if layout else fig


def legend_entries(fig: go.Figure) -> list[str]:
    """The names the legend of ``fig`` shows (none when its legend is off)."""
    if fig.layout.showlegend is False:
        return []
    return [str(t.name) for t in fig.data if t.showlegend is not False and t.name]


def _merge(into: dict, update: dict) -> None:
    """Merge ``update`` into ``into`` as plotly's ``update_layout`` does (nested dicts merged)."""
    for k, v in update.items():
        if isinstance(v, dict) and isinstance(into.get(k), dict):
            _merge(into[k], v)
        else:
            into[k] = copy.deepcopy(v)


def page_layout(layout: dict, entries: list[str], width_px: float, font_family: str, font_px: float,
                height_px: float | None = None) -> dict:
    """A copy of the plotly layout JSON ``layout`` laid out for a page ``width_px`` CSS pixels
    wide: fonts of ``font_px``, the title wrapped to the width at the top, the legend (of
    ``entries``) in rows of equal columns between title and plot (so it never covers either),
    the plot area of the figure kind's aspect. Plain dicts: plotly's validation of a layout
    update costs more than rendering the figure."""
    lay = copy.deepcopy(layout)
    meta = lay["meta"] if isinstance(lay.get("meta"), dict) else {}
    title_px = font_px * 1.15
    line = 1.3
    left, right, bottom, pad = 4.0 * font_px, 1.0 * font_px, 3.2 * font_px, 0.5 * font_px
    plot_w = width_px - left - right
    # long category labels on the y axis (pairs of method names) narrow the plot: axis titles
    # wrap to what is left
    data_w = max(plot_w - 0.55 * font_px * float(meta.get("label_chars", 0)), 0.3 * width_px)
    # axis titles wrapped to the plot's width (a long one would run off the page)
    xtitle = (lay.get("xaxis") or {}).get("title") or {}
    if xtitle.get("text"):
        # wrap at 85% of the estimate
        lines = textwrap.wrap(str(xtitle["text"]), max(10, int(0.85 * data_w / (0.5 * font_px))))
        xtitle["text"] = "<br>".join(lines)
        bottom += (len(lines) - 1) * font_px * line * 1.6

    text = str((lay.get("title") or {}).get("text") or "")
    per_line = max(10, int((width_px - 2 * pad) / (0.5 * title_px)))
    title_lines = textwrap.wrap(text, per_line) if text else []
    title_h = len(title_lines) * title_px * line + (pad if title_lines else 0)

    show_legend = len(entries) >= 2
    legend_h, legend = 0.0, {}
    if show_legend:
        # columns of equal width, each wide enough for the longest name (symbol 40 px + text);
        # plotly wraps a legend inside the page at the plot area's width, which long tick
        # labels may narrow: 75% of it leaves room
        usable = 0.75 * plot_w
        text_px = 0.52 * font_px * max(len(e) for e in entries) + 0.5 * font_px
        cols = max(1, min(len(entries), int(usable // (text_px + _SYMBOL_PX))))
        n_rows = math.ceil(len(entries) / cols)
        legend_h = n_rows * font_px * 1.6 + pad
        legend = dict(orientation="h", xref="container", x=pad / width_px, xanchor="left", yref="container",
                      yanchor="top", entrywidthmode="pixels", entrywidth=usable / cols - _SYMBOL_PX - 1,
                      font=dict(size=font_px), tracegroupgap=0, itemwidth=30, bgcolor="rgba(0,0,0,0)",
                      title=dict(text=""))  # a legend title would take a column the estimate has not
    top = pad + title_h + legend_h + 0.6 * font_px  # the top tick label pokes half a line up
    # subplot titles of the top row stand above the plot area: room for them under the legend
    annotations = lay.get("annotations") or []
    for a in annotations:
        a.setdefault("font", {})["size"] = font_px  # plotly draws subplot titles at 16 px whatever the font
    top_titles = [a for a in annotations if a.get("yref") == "paper" and (a.get("y") or 0) >= 0.99]
    if top_titles:
        top += max(str(a.get("text", "")).count("<br>") + 1 for a in top_titles) * font_px * line

    if height_px is None:
        rows = meta.get("rows")
        # one labelled row per category: closer rows when there are many, so 45 pairs fit a page
        plot_h = rows * font_px * (1.9 if rows <= 15 else 1.5) if rows else plot_w * float(meta.get("aspect",
                                                                                                   DEFAULT_ASPECT))
        # whole CSS pixels: Chromium sizes the PDF page and the PNG from them alike
        height_px = float(math.ceil(top + max(plot_h, 6 * font_px) + bottom))
    if show_legend:
        legend["y"] = 1 - (pad + title_h) / height_px
    _merge(lay, dict(
        width=width_px, height=height_px, autosize=False,
        # plotly keeps a plot area of at least 64 px, pushing the axis title off a small page
        # when a margin grows: let the plot area shrink instead
        minreducedheight=20, minreducedwidth=20,
        font=dict(family=font_family, size=font_px),
        title=dict(text="<br>".join(title_lines), font=dict(size=title_px), xref="container", x=0.0,
                   xanchor="left", yref="container", yanchor="top",
                   # plotly anchors a multi-line title by its first line
                   y=1 - (pad + (len(title_lines) - 1) * title_px * line) / height_px,
                   pad=dict(l=pad, t=0, b=0, r=0)),
        margin=dict(l=left, r=right, t=top, b=bottom, pad=0, autoexpand=True),
        showlegend=show_legend, legend=legend,
    ))
    axes = {k for k in lay if re.fullmatch(r"[xy]axis\d*", k)} | {"xaxis", "yaxis"}
    for k in axes:
        if not isinstance(lay.get(k), dict):
            lay[k] = {}
        _merge(lay[k], dict(automargin=True, title=dict(font=dict(size=font_px), standoff=4),
                            tickfont=dict(size=font_px)))
    return lay
