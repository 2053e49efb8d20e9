"""Training: with replicate runs, each family's metrics over checkpoints averaged over runs with a band
over runs; every summary metric against checkpoint (natural order) for the sidebar's split, with
intervals, the best checkpoint per metric and a paired test of the best against the last; class x
checkpoint heat map; pair-similarity histograms over checkpoints."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis_core.figures.checkpoints import checkpoint_figure, checkpoint_heatmap, histogram_small_multiples
from analysis_core.figures.runs import run_curves_figure
from analysis_core.metrics.registry import summary_metrics
from analysis_core.stats.checkpoints import without_step
from analysis_core.stats.histograms import histogram_table
from analysis_core_dashboard import cache, components
from analysis_core_dashboard.views.common import alpha, current, run_counts, runs, unit

st.title("Checkpoints over training")
got = current()
if got is not None:
    key, ev = got
    split = key.split or "all"
    if not ev.design.has_steps:
        st.info("No method has a checkpoint step — none in its name (e3, epoch_10, step_500, …) nor in the "
                "sidebar's design table: these methods are no training run, so there is no curve to draw. Name "
                "checkpoints like `model_e3`, `model_e10`, or give their steps in the design table, to see them here.")
        st.stop()
    if lone := without_step(ev.design):
        st.caption(f"No step for {', '.join(lone)}: each is shown as its own family of one point "
                   "(at step 0), with nothing to compare it to over training.")
    a = alpha()
    labels = {m.name: m.label for m in summary_metrics(ev.ks)} | {"jsd": "JSD"}
    chosen = st.multiselect("Metrics", list(labels), default=["map", "map_at_r", "precision_at_1", "jsd"],
                            format_func=labels.get) or ["map"]
    if ev.design.has_runs:
        ra = runs(key, ev)
        st.subheader(f"Mean over runs — unit: run ({run_counts(ev.design)})")
        st.caption(f"Each family's metric at each checkpoint: the mean over its runs and a {100 * (1 - a):g}% t band "
                   "over runs (the spread from one training to the next)" + (
                       "; each split as its own retrieval problem." if ra.curves["split"].nunique() > 1 else "."))
        for sp in dict.fromkeys(ra.curves["split"]):
            curves = ra.curves[(ra.curves["split"] == sp) & ra.curves["metric"].isin(chosen)]
            components.figure(run_curves_figure(ra.curves, sp, tuple(chosen)), f"checkpoint_runs_{sp}", curves,
                              split_in_title=True)
        with st.expander("The mean over runs per checkpoint (table)"):
            components.table(ra.curves[ra.curves["metric"].isin(chosen)], "checkpoint_runs")
        st.subheader("Every run's curve")
    res = cache.checkpoints(key, ev, unit())
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
