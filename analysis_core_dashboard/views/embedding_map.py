"""Embedding map: one method's items in two dimensions (PCA, or UMAP when installed), coloured by
class, per-query AP or split; a selection on the map, or a class, lists its per-query metrics and
one item's nearest neighbours."""

from __future__ import annotations

import numpy as np
import streamlit as st

from analysis_core.extras import install_command
from analysis_core.figures.embedding_map import MAX_CLASS_COLOURS, embedding_map_figure
from analysis_core.methods import natural_key
from analysis_core.stats.projection import map_frame, selection_table, umap_installed
from analysis_core_dashboard import cache, components, state
from analysis_core_dashboard.views.common import current, loaded_token, neighbours

MAX_NEIGHBOUR_CHOICES = 500  # items of a selection offered for the neighbour table
COLOUR_NAMES = {"class": "class", "ap": "per-query AP", "split": "split"}
NO_CLASS = "(the selection on the map)"


def selected_rows(event, fig) -> np.ndarray:
    """Input rows of the points selected on the map, found by their trace and index in ``fig``
    (the browser's copy of a point's customdata arrives in several shapes; its position does not)."""
    points = event.get("selection", {}).get("points", []) if event is not None else []
    rows = [np.asarray(fig.data[p["curve_number"]].customdata)[p["point_index"], 0] for p in points
            if p.get("curve_number") is not None and p.get("point_index") is not None]
    return np.unique(np.array(rows, dtype=np.float64).astype(np.int64))


def of_items(column: np.ndarray | None, rows: np.ndarray | None) -> np.ndarray | None:
    """A per-item column restricted to the mapped items ``rows`` (None: every item)."""
    return column if column is None or rows is None else column[rows]


def details(method: str, rows: np.ndarray, what: str) -> None:
    """The per-query metrics of ``rows`` and one of them's nearest neighbours."""
    got = current()
    if got is None:
        return
    key, ev = got
    ds = ev.dataset
    table = selection_table(ev.per_query(method), rows, ds.labels, ds.ids)
    scored = table["ap"].dropna()
    st.subheader(f"Per-query metrics of {what}")
    st.caption(f"{len(table):,} items, {scored.size:,} of them scored queries"
               + (f"; mean AP {scored.mean():.4f}" if scored.size else "")
               + ". Items without metrics: lone queries (no other item of their class), gallery-only items "
                 "or queries outside the query sample.")
    components.table(table, f"map_selection_{method}", height=300)

    st.subheader("Nearest neighbours")
    choices = table["row"].tolist()[:MAX_NEIGHBOUR_CHOICES]
    label = {r: f"row {r} · id {i} · class {c}" for r, i, c in zip(table["row"], table["id"], table["label"],
                                                                      strict=True)}
    if st.session_state.get("map-nn-query") not in choices:  # a new selection: its first item
        st.session_state["map-nn-query"] = choices[0]
    q = st.selectbox("Neighbours of", choices, format_func=label.get, key="map-nn-query",
                     help=f"One of the selected items (the first {MAX_NEIGHBOUR_CHOICES} when more are selected).")
    nn = neighbours(key, ev, method, int(q))
    if nn is None:
        st.info(f"Row {q} is not among the evaluated items.")
        return
    st.caption(f"The 10 items most similar to row {q} by {components.literal(method)}'s {ev.similarity} similarity, "
               "as the evaluation ranks them (tied scores by row index).")
    st.dataframe(nn, width="stretch", hide_index=True)


st.title("Embedding map")
key = loaded_token()
if key is not None:
    ds = st.session_state[state.DATASET][1]
    rows = None if key.split is None else np.flatnonzero(ds.split == key.split)  # the sidebar split's items
    labels = ds.labels if rows is None else ds.labels[rows]
    has_umap = umap_installed()

    c1, c2, c3 = st.columns([2, 2, 2])
    method = c1.selectbox("Method", list(ds.methods), key="map-method", bind="query-params")
    colourings = ["class", "ap"] + (["split"] if ds.split is not None and key.split is None else [])
    colour = c2.radio("Colour by", colourings, format_func=COLOUR_NAMES.get, horizontal=True, key="map-colour")
    kind = c3.radio("Projection", ["pca", "umap"] if has_umap else ["pca"], horizontal=True, key="map-kind",
                    format_func={"pca": "PCA", "umap": "UMAP"}.get,
                    help="PCA: exact (randomized above 8.4 M values), at once. UMAP (McInnes et al. 2018): "
                         "neighbourhoods kept, distances between clusters not; seeded; a minute or more on large "
                         "data.")
    if not has_umap:
        c3.caption(f"UMAP maps need umap-learn: `{install_command('map')}`, then restart the dashboard.")

    classes = sorted(set(labels.tolist()), key=lambda c: natural_key(str(c)))
    picked = st.selectbox("Class", [NO_CLASS, *classes], key="map-class",
                          help="A class instead of a selection on the map: its items' metrics below, and the class "
                               "alone in colour on the map (by class or by AP).")
    ap = None
    if colour == "ap":
        got = current()
        if got is None:
            st.stop()
        ap = got[1].per_query(method).set_index("query")["ap"]
    proj = cache.projection(key, ds, method, kind, rows)
    points = map_frame(proj, labels, rows=rows, ids=of_items(ds.ids, rows), ap=ap, split=of_items(ds.split, rows))
    highlight = [picked] if picked != NO_CLASS else None
    title = (f"Embedding map: {components.plot_text(method)}, {'PCA' if kind == 'pca' else 'UMAP'}"
             + (f" (sample of {proj.rows.size:,} of {proj.n_items:,} items)" if proj.sampled else ""))
    fig = embedding_map_figure(points, colour, title=title, axis_titles=proj.axis_titles(), classes=highlight)
    st.caption(proj.note() + (f" {len(classes):,} classes: the {MAX_CLASS_COLOURS} largest in colour, the rest grey "
                              "(pick a class to colour it)." if colour == "class" and len(classes) > MAX_CLASS_COLOURS
                              and highlight is None else "")
               + " Select points with the box or lasso tool (or click one) to list their metrics.")
    event = components.figure(fig, f"embedding_map_{method}_{kind}_{colour}", points, select=True)

    chosen = selected_rows(event, fig)
    if picked != NO_CLASS:
        where = np.flatnonzero(labels == picked)
        details(method, where if rows is None else rows[where], f"class {components.literal(picked)}")
    elif chosen.size:
        details(method, chosen, f"the {chosen.size:,} selected items")
    else:
        st.info("Select points on the map (box or lasso in the chart's toolbar, or a click), or pick a class, to "
                "see their per-query metrics and nearest neighbours.", icon=":material/touch_app:")
