"""Training: every summary metric against checkpoint (natural order) for the sidebar's split, with
intervals, the best checkpoint per metric and a paired test of the best against the last; class x
checkpoint heat map; pair-similarity histograms over checkpoints."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis_core.figures.checkpoints import checkpoint_figure, checkpoint_heatmap, histogram_small_multiples
from analysis_core.methods import checkpoint_families
from analysis_core.metrics.registry import summary_metrics
from analysis_core.stats.checkpoints import without_step
from analysis_core.stats.histograms import histogram_table
from dashboard import cache, components
from dashboard.views.common import alpha, current, unit

st.title("Checkpoints over training")
got = current()
if got is not None:
    key, ev = got
    split = key.split or "all"
    if not checkpoint_families(ev.methods):
        st.info("No method name ends in a step (e3, epoch_10, step_500, …): these methods are no training run, "
                "so there is no curve to draw. Name checkpoints like `model_e3`, `model_e10` to see them here.")
        st.stop()
    if lone := without_step(ev.methods):
        st.caption(f"No step in the name of {', '.join(lone)}: each is shown as its own family of one point "
                   "(at step 0), with nothing to compare it to over training.")
    res = cache.checkpoints(key, ev, unit())
    a = alpha()
    labels = {m.name: m.label for m in summary_metrics(ev.ks)} | {"jsd": "JSD"}
    chosen = st.multiselect("Metrics", list(labels), default=["map", "map_at_r", "precision_at_1", "jsd"],
                            format_func=labels.get) or ["map"]
    # every figure here names the split in its own title
    components.figure(checkpoint_figure(res.table, split, tuple(chosen)), "checkpoints",
                      res.table[res.table["metric"].isin(chosen)], split_in_title=True)
    over = "classes (jackknife)" if unit() == "class" else "queries"
    st.caption(f"{100 * (1 - a):g}% t intervals over {over}; a star marks each family's best checkpoint.")
    wide = res.table.pivot_table(index=["family", "step", "method"], columns="label", values="value",
                                 sort=False).reset_index()
    components.table(wide, "checkpoint_values")
    st.subheader("Best against last checkpoint")
    st.caption("Mean difference (best − last) with its t interval and test: " + (
        "the jackknife over classes (unit: class)." if unit() == "class" else
        "AP-type metrics by the paired sign-flip permutation test, P@1 and Recall@K by the exact McNemar test "
        "(unit: query, these models and this gallery)."))
    components.table(res.tests, "checkpoint_tests")
    st.subheader("Mean AP per class and checkpoint")
    for fam in dict.fromkeys(res.class_ap["family"]):
        components.figure(checkpoint_heatmap(res.class_ap, split, fam), f"checkpoint_classes_{fam}".rstrip("_"),
                          res.class_ap[res.class_ap["family"] == fam], split_in_title=True)
    st.subheader("Pair similarities over checkpoints")
    jsd = {m: ev.method_summary(m)["jsd"] for m in ev.methods}
    components.figure(histogram_small_multiples(histogram_table(ev).assign(split=split), ev.methods, jsd, split=split),
                      "histograms_over_checkpoints", pd.DataFrame({"method": list(jsd), "jsd": list(jsd.values())}),
                      split_in_title=True)
