"""Generalization: every metric per split and the gaps, with an interval for grouped recall."""

from __future__ import annotations

import streamlit as st

from analysis_core.figures.generalization import generalization_figure
from analysis_core.stats.generalization import split_generalization
from dashboard import components
from dashboard.views.common import alpha, current, split_evaluations

st.title("Generalization across splits")
got = current()
if got is not None:
    key, ev = got
    group_size = st.slider("Group size S", 2, 50, 10)
    evs = split_evaluations(key, ev, group_size, every_split=True)
    splits = list(evs)
    method = st.selectbox("Method (checkpoint)", ev.methods)
    if len(splits) < 2:
        st.info("Fewer than two splits where retrieval is possible: nothing to compare.")
        st.stop()
    ref = st.selectbox("Reference split", splits, index=splits.index("train") if "train" in splits else 0)
    gen = split_generalization(evs, method, ref, alpha())
    title = f"Metrics per split ({components.plot_text(method)})"
    components.figure(generalization_figure(gen, splits, title=title), "generalization", gen)
    components.table(gen, "generalization")
    st.caption("Recall@1 and MAP@R depend on each split's number of classes; grouped Recall@1 and JSD do not, so "
               "their gaps measure over-fitting.")
