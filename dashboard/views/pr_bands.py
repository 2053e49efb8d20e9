"""PR bands: mean precision-recall curves with confidence bands, overall, per class, per method."""

from __future__ import annotations

import streamlit as st

from analysis_core.figures.variability import pr_bands_figure
from dashboard import cache, components
from dashboard.views.common import alpha, current


@st.fragment
def shown_bands(b, all_methods: list[str], kind: str) -> None:
    """Which methods and classes the figure shows: choosing them reruns this section only."""
    methods = st.multiselect("Methods", all_methods, default=all_methods)
    classes = sorted(c for c in b["class"].unique() if c != "all")
    chosen = st.multiselect("Classes (empty = all queries together)", classes, max_selections=8)
    fig = pr_bands_figure(b, methods or all_methods, chosen or ["all"], kind=kind)
    shown = b[b["method"].isin(methods or all_methods) & b["class"].isin(chosen or ["all"])]
    components.figure(fig, "pr_bands", shown)
    n_all = int(b.loc[b["class"] == "all", "n"].max())
    st.caption(f"{100 * (1 - alpha()):g}% {'pointwise' if kind == 't' else 'simultaneous'} band; n = queries "
               f"averaged at each recall level (all queries together: n = {n_all:,}).")


st.title("Precision-recall bands")
c1, c2 = st.columns(2)
n_recall = c1.slider("Recall points N_P", 3, 51, 11, help="recall grid r_j = j/(N_P − 1)")
kind = c2.radio("Band", ["t", "bootstrap"], horizontal=True,
                format_func={"t": "pointwise t interval", "bootstrap": "simultaneous (bootstrap)"}.get)
got = current(n_recall)
if got is not None:
    key, ev = got
    b = cache.bands(key, ev, kind)
    shown_bands(b, ev.methods, kind)
