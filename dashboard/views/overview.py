"""Overview: what was loaded, the summary metrics of every method, the per-query table."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from dashboard.views.common import current_evaluation

st.title("Retrieval evaluation")
ev = current_evaluation()
if ev is not None:
    ds = ev.dataset
    s = ev.summary()
    d = s["dataset"]
    sizes = np.bincount(ds.label_codes)
    cols = st.columns(5)
    cols[0].metric("Items", f"{d['n_items']:,}")
    cols[1].metric("Classes", f"{d['n_classes']:,}", help=f"class sizes {sizes.min()}–{sizes.max()}")
    cols[2].metric("Queries scored", f"{d['n_queries']:,}")
    cols[3].metric("Lone queries", f"{d['n_lone_queries']:,}", help="no other item of their class: excluded, counted")
    cols[4].metric("Methods", len(ev.methods))
    st.caption(f"Source: {ds.source} · similarity: {d['similarity']} · leave-one-out"
               + (" · roles given" if ds.role is not None else ""))

    rows = []
    for m, v in s["methods"].items():
        row = {"method": m, "mAP": v["map"]["expected"], "mAP−": v["map"]["lower"], "mAP+": v["map"]["upper"],
               "MAP@R": v["map_at_r"], "R-Prec": v["r_precision"], "P@1": v["precision_at_1"], "MRR": v["mrr"]}
        row.update({f"R@{k}": x for k, x in v["recall_at_k"].items()})
        row.update({"JSD": v["jsd"], "mean pos sim": v["mean_pos_similarity"],
                    "mean neg sim": v["mean_neg_similarity"],
                    "queries with mixed ties": v["ties"]["share_queries_with_mixed_ties"]})
        rows.append(row)
    table = pd.DataFrame(rows).set_index("method")
    st.subheader("Summary")
    st.caption("Expected values over tie orders; mAP− / mAP+ are the worst / best tie orders.")
    st.dataframe(table.style.format("{:.4f}"), width="stretch")
    st.download_button("Summary (CSV)", table.to_csv().encode(), "summary.csv", "text/csv")

    st.subheader("Per query")
    method = st.selectbox("Method", ev.methods)
    pq = ev.per_query(method)
    st.dataframe(pq, width="stretch", hide_index=True, height=380)
    st.download_button("Per-query table (CSV)", pq.to_csv(index=False).encode(), f"per_query_{method}.csv", "text/csv")
