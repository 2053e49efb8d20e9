"""PR bands: mean precision-recall curves with confidence bands, overall, per class, per method."""

from __future__ import annotations

import streamlit as st

from analysis_core.figures.variability import pr_bands_figure
from analysis_core.stats.bands import band_notes, describe
from analysis_core_dashboard import cache, components, url_state
from analysis_core_dashboard.views.common import RECALL_GRID, alpha, current, unit

GRIDS = [n for n in range(3, RECALL_GRID + 1) if (RECALL_GRID - 1) % (n - 1) == 0]


def band_unit() -> str | None:
    """The sidebar's unit for the bands: the query unit when chosen; else the bands' own default
    (classes when there are at least three, else queries, with a note saying so)."""
    return "query" if unit() == "query" else None


@st.fragment
def shown_bands(key, ev, kind: str, n_recall: int) -> None:
    """Which methods and classes the figure shows: choosing them reruns this section only, and
    computes the bands of the chosen classes only."""
    methods = url_state.picker(st.multiselect, "Methods", ev.methods, key="bands_methods", default=ev.methods)
    classes = sorted({str(c) for c in ev.dataset.labels[ev.pr_curves(ev.methods[0])[0]].tolist()})
    chosen = url_state.picker(st.multiselect, "Classes (empty = all queries together)", classes, key="bands_classes",
                              default=[], max_selections=8)
    b = cache.bands(key, ev, kind, n_recall, tuple(chosen), band_unit())
    fig = pr_bands_figure(b, methods or ev.methods, chosen or ["all"], kind=kind, alpha=alpha())
    shown = b[b["method"].isin(methods or ev.methods) & b["class"].isin(chosen or ["all"])]
    components.figure(fig, "pr_bands", shown)
    n_all = int(b.loc[b["class"] == "all", "n"].max())
    st.caption(f"{describe(shown, alpha(), kind)}; n = queries averaged at each recall level (all queries "
               f"together: n = {n_all:,})." + "".join(f" {n}." for n in band_notes(shown)))


st.title("Precision-recall bands")
c1, c2 = st.columns(2)
n_recall = c1.select_slider("Recall points N_P", GRIDS, 11, key="np", bind="query-params",
                            help=f"recall grid r_j = j/(N_P − 1); N_P − 1 divides {RECALL_GRID - 1}")
kind = c2.radio("Band", ["t", "bootstrap"], horizontal=True,
                format_func={"t": "pointwise t interval", "bootstrap": "simultaneous (bootstrap)"}.get)
got = current()
if got is not None:
    key, ev = got
    shown_bands(key, ev, kind, n_recall)
    cache.prefetch_bands(key, ev, kind, n_recall, band_unit())
