"""Similarity histograms: positive vs negative pairs, JSD, per method and per split."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis_core.figures.histograms import histogram_figure
from analysis_core.stats.histograms import histogram_table
from analysis_core_dashboard import components
from analysis_core_dashboard.views.common import current, split_evaluations

st.title("Positive and negative pair similarities")
got = current()
if got is not None:
    key, ev = got
    split_evals = split_evaluations(key, ev)
    hist = histogram_table(ev, split_evals)
    c1, c2, c3 = st.columns(3)
    method = c1.selectbox("Method", ev.methods)
    split = c2.selectbox("Split", ["all", *split_evals]) if split_evals else "all"
    normalized = c3.toggle("Area-normalised", value=True)
    part = hist[(hist["method"] == method) & (hist["split"] == split)]
    e = ev if split == "all" else split_evals[split]
    summ = e.method_summary(method)
    title = f"{components.plot_text(method)} · {components.plot_text(split)}: JSD = {summ['jsd']:.3f}"
    components.figure(histogram_figure(part, normalized, title=title),
                      f"histograms_{method}_{split}", part)
    keys = ("jsd", "mean_pos_similarity", "mean_neg_similarity", "n_pos_pairs", "n_neg_pairs")
    rows = []
    for sp, ee in [("all", ev), *split_evals.items()]:
        for m in ev.methods:
            summary = ee.method_summary(m)
            rows.append({"method": m, "split": sp, **{k: summary[k] for k in keys}})
    st.subheader("Per method (checkpoint) and split")
    components.table(pd.DataFrame(rows), "jsd_by_method_split")
