"""Ties: how ambiguous each method's rankings are, and what ties do to mAP."""

from __future__ import annotations

import pandas as pd
import plotly.express as px
import streamlit as st

from analysis_core.figures.style import PALETTE, apply_layout, base_layout, plot_text, series_look
from analysis_core_dashboard import components
from analysis_core_dashboard.views.common import current

st.title("Ties")
st.caption("A tie block mixing positives and negatives makes a ranking ambiguous; every metric here is the "
           "expected value over tie orders, between the worst (mAP−) and best (mAP+) orders (Nicolaou et al.).")
got = current()
if got is not None:
    key, ev = got
    rows = []
    for m in ev.methods:
        v = ev.method_summary(m)
        rows.append({"method": m, "mAP−": v["map"]["lower"], "E[mAP]": v["map"]["expected"], "mAP+": v["map"]["upper"],
                     "mAP+ − mAP−": v["map"]["upper"] - v["map"]["lower"],
                     "queries with mixed ties": v["ties"]["share_queries_with_mixed_ties"],
                     "distinct vectors": v["ties"]["n_unique_vectors"]})
    components.table(pd.DataFrame(rows), "ties")
    pq = ev.per_query()
    pq = pq[pq["n_positives"] > 0].assign(spread=lambda d: d["ap_upper"] - d["ap_lower"])
    tied = pq[pq["spread"] > 0]
    if tied.empty:
        st.success("No query of any method has a tie between a positive and a negative: every ranking is exact.")
    else:
        # method names as trace names: escaped, plotly would read HTML in them
        fig = px.histogram(tied.assign(method=tied["method"].map(plot_text)), x="spread", color="method", nbins=40,
                           barmode="overlay",
                           color_discrete_sequence=PALETTE)
        for i, tr in enumerate(fig.data):  # beyond the 8 colours, hatched bars (as everywhere)
            col, _, _, pattern = series_look(i)
            tr.marker.color, tr.marker.pattern.shape = col, pattern
        apply_layout(fig, base_layout("AP+ − AP− of the queries with mixed ties"))
        fig.update_xaxes(title="AP+ − AP−", exponentformat="power")  # not "50μ"
        fig.update_yaxes(title="queries")
        components.figure(fig, "tie_spread", tied[["method", "query", "label", "ap", "ap_lower", "ap_upper", "spread",
                                                  "n_mixed_tie_blocks", "n_tied_negatives"]])
