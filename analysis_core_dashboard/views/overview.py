"""Overview: what was loaded, every method's summary metrics, with replicate runs each family's mean ±
sd over runs and its runs as dots, the per-query table, export all."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from analysis_core.export.paper_tables import summary_frame
from analysis_core.export.tables import csv_text
from analysis_core.figures.runs import run_dots_figure
from analysis_core.metrics.registry import label, metric_table
from analysis_core.stats.runs import GENERALISES as RUN_GENERALISES
from analysis_core_dashboard import cache, components
from analysis_core_dashboard.views.common import alpha, current, run_counts, runs, unit

st.title("Retrieval evaluation")
got = current()
if got is not None:
    key, ev = got
    ds = ev.dataset
    s = ev.summary(alpha())  # with a query sample, the intervals at the sidebar's level
    d = s["dataset"]
    sizes = np.bincount(ds.label_codes)
    cols = st.columns(5)
    cols[0].metric("Items", f"{d['n_items']:,}")
    cols[1].metric("Classes", f"{d['n_classes']:,}", help=f"class sizes {sizes.min()}–{sizes.max()}")
    cols[2].metric("Queries scored", f"{d['n_queries']:,}", help=(
        f"a stratified sample of the {d['query_sample']['of']:,} queries" if d.get("query_sample") else None))
    cols[3].metric("Lone queries", f"{d['n_lone_queries']:,}", help="no other item of their class: excluded, counted")
    cols[4].metric("Methods", len(ev.methods))
    extras = []
    for c in ("split", "role"):
        if getattr(ds, c) is not None:
            u, n = np.unique(getattr(ds, c), return_counts=True)
            extras.append(f"{c}: " + ", ".join(f"{components.literal(a)} ({b})" for a, b in zip(u, n, strict=True)))
    st.caption(f"Source: {components.literal(ds.source)} · similarity: {d['similarity']} · "
               + ("in float64 · " if d["precision"] == "float64" else "")
               + ("roles given" if ds.role is not None else "leave-one-out")
               + "".join(f" · {e}" for e in extras) + (" · confidences given" if ds.confidence is not None else ""))
    components.warnings(ev.warnings())
    with st.expander("Class sizes"):
        st.bar_chart(pd.Series(sizes).value_counts().sort_index().rename("classes"), x_label="items per class")

    frame = ev.summary_frame().set_index("method")
    shown = [m.name for m in metric_table(ev.ks) if m.name in frame.columns] + ["share_queries_with_mixed_ties"]
    table = frame[shown].rename(columns=lambda c: "queries with mixed ties" if c == "share_queries_with_mixed_ties"
                                else label(c, short=True)).reset_index()
    st.subheader("Summary")
    st.caption("Expected values over tie orders; mAP− / mAP+ are the worst / best tie orders.")
    st.dataframe(table.set_index("method").style.format("{:.4f}"), width="stretch")
    st.download_button("Summary (CSV)", csv_text(table).encode(), "summary.csv", "text/csv",
                       on_click="ignore")
    if not d.get("query_sample") and len(frame):
        u = unit()
        if u == "class":
            cache.class_jackknife(key, ev)  # its passes with their progress; summary_frame reads it from ev
        main = summary_frame({ev.split or "all": ev}, alpha(), unit=u)
        n = int(main["n_units"].max()) if len(main) else 0
        units = "classes" if u == "class" else "queries"
        st.subheader(f"{100 * (1 - alpha()):g}% intervals — unit: {u} ({n:,} {units})")
        st.caption("Each metric with its interval, [low, high] (asymmetric for hit rates and means near 0 or 1). " + (
            "Over classes: what a new set of items of new classes would give (each class deleted from the queries "
            "and the gallery in turn)." if u == "class" else
            "Over queries: these models and this gallery only (queries that share a gallery are dependent)."))
        lows = [c for c in main.columns if c.endswith("_ci_low")]
        shown_iv = main[["method"] + [c for b in lows for c in (b[: -len("_ci_low")], b, b[:-3] + "high")]]
        components.table(shown_iv, "summary_intervals", height=200)
    if d.get("query_sample"):
        qs = d["query_sample"]
        st.subheader(f"Intervals from the query sample ({qs['n']:,} of {qs['of']:,} queries, seed {qs['seed']})")
        st.caption(f"{100 * (1 - alpha()):g}% intervals: {qs['method']}. Above, the estimates; "
                   f"{qs['pair_statistics']}.")
        iv = pd.DataFrame([{"method": m, "metric": name, **x} for m, v in s["methods"].items()
                           for name, x in v["intervals"].items()])
        cols = ["method", "metric", "estimate", "low", "high", "se", "df", "interval"]
        components.table(iv[cols], "sample_intervals", height=300)

    if ev.design.has_runs:
        ra = runs(key, ev)
        st.subheader(f"Runs — unit: run ({run_counts(ev.design)})")
        per_split = ra.summary["split"].nunique() > 1
        st.caption("Each family's runs (trainings, e.g. seeds), each at its last checkpoint: mean ± sd over runs of "
                   f"every summary metric; it generalises to {RUN_GENERALISES}. The intervals above are over "
                   "the classes or queries of single trained models."
                   + (" Each split as its own retrieval problem, as `report` does." if per_split else ""))
        mean_sd = ra.mean_sd_frame()
        components.table(mean_sd, "run_summary_mean_sd", height=min(35 * (len(mean_sd) + 1) + 3, 600))  # every row
        splits = list(dict.fromkeys(ra.summary["split"]))
        sp = st.radio("Split of the figure", splits, horizontal=True, key="overview_runs_split") if len(splits) > 1 \
            else splits[0]
        components.figure(run_dots_figure(ra.values, ra.summary, sp), f"runs_{sp}",
                          ra.values[ra.values["split"] == sp], split_in_title=True)
        with st.expander(f"Means with their {100 * (1 - alpha()):g}% t intervals over runs, and every run's values"):
            components.table(ra.summary, "run_summary")
            components.table(ra.values, "runs")

    st.subheader("Per query")
    method = st.selectbox("Method", ev.methods)
    components.table(ev.per_query(method), f"per_query_{method}", height=360)

    st.subheader("Export everything")
    st.caption("Every table (CSV + LaTeX) and figure (PDF, SVG, PNG) of the `report` command for this dataset, "
               "with the export settings of the sidebar.")
    components.report_archive(ev, key, alpha())
