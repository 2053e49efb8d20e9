"""Generalization: every metric per split and the gaps, with an interval for grouped recall."""

from __future__ import annotations

import numpy as np
import streamlit as st

from analysis_core.figures.generalization import generalization_figure
from analysis_core.stats.generalization import split_generalization
from analysis_core.stats.grouped_recall import split_group_size
from analysis_core_dashboard import components
from analysis_core_dashboard.views.common import alpha, current, split_evaluations, unit

st.title("Generalization across splits")
got = current(scored=False)  # compares the splits: the sidebar's split may be any
if got is not None:
    key, ev = got
    ds = ev.dataset
    counts = [np.unique(ds.label_codes[ds.split == sp]).size for sp in set(ds.split.tolist())] \
        if ds.split is not None else []
    largest = split_group_size(counts, 50)  # S at most the smallest split's class count: comparable
    group_size = components.int_slider("Group size S (classes per group)", 2, largest, split_group_size(counts, 10))
    evs = split_evaluations(key, ev, group_size, every_split=True)
    splits = list(evs)
    method = st.selectbox("Method (checkpoint)", ev.methods)
    if len(splits) < 2:
        st.info("Fewer than two splits where retrieval is possible: nothing to compare.")
        st.stop()
    ref = st.selectbox("Reference split", splits, index=splits.index("train") if "train" in splits else 0)
    gen = split_generalization(evs, method, ref, alpha(), unit())
    rough = [sp for sp, e in evs.items() if e.jsd_is_rough(method)]
    if rough:
        components.warnings([f"JSD of split(s) {', '.join(rough)} rests on few pairs per histogram bin and is biased "
                             "towards 1 (disjoint): read its gap with care, or compare the mean positive and negative "
                             "similarities."])
    title = f"Metrics per split ({components.plot_text(method)})"
    components.figure(generalization_figure(gen, splits, title=title), "generalization", gen)
    components.table(gen, "generalization")
    grouped = gen[gen["metric"] == "grouped_recall_at_1"].filter(like="_ci_low")
    undefined = [c[len(f"gap_{ref}_minus_"):-len("_ci_low")] for c in grouped.columns if grouped[c].isna().all()]
    if undefined:
        components.warnings([f"grouped Recall@1 gap to {', '.join(undefined)}: interval undefined (NaN): in neither "
                             "split do the groups' recalls vary (or a split has fewer than two groups), so there is "
                             "no spread to judge the gap by."])
    st.caption("Recall@1 and MAP@R depend on each split's number of classes; grouped Recall@1 and JSD do not, so "
               "their gaps measure over-fitting.")
