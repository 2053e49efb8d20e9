"""Per query & class: AP by class, the worst classes and queries, a query's nearest neighbours."""

from __future__ import annotations

import numpy as np
import streamlit as st

from analysis_core.figures.variability import ap_by_class_figure
from analysis_core.stats.variability import ap_frame, class_summary
from analysis_core_dashboard import components, url_state
from analysis_core_dashboard.views.common import current, neighbours


@st.fragment
def drill_down(key, ev) -> None:
    """The worst queries of one method and one query's nearest neighbours: changing the method or
    the query reruns this section only; the neighbours are one row of scores (the method's
    prepared vectors are kept), not a search index."""
    ds = ev.dataset
    st.subheader("Worst queries")
    m = url_state.picker(st.selectbox, "Method", ev.methods, key="pq-method", default=ev.methods[0])
    pq = ev.per_query(m)
    worst = pq[pq["n_positives"] > 0].nsmallest(50, ["ap", "query"])
    components.table(worst, f"worst_queries_{m}", height=300)  # common.current: some query has a positive

    st.subheader("Drill-down: a query's nearest neighbours")
    first = int(worst["query"].iloc[0]) if not worst.empty else int(ev.rows[0])
    q = st.number_input("Query (row index in the input)", 0, ds.n_items - 1, first)
    nn = neighbours(key, ev, m, q)
    if nn is None:
        st.info(f"Row {q} is not among the evaluated items (split '{ev.split}'): pick one of them.")
        return
    ids = ds.ids if ds.ids is not None else np.arange(ds.n_items).astype(str)
    match = pq[pq["query"] == q]
    if match.empty:
        about = "not evaluated (not a query of this evaluation, e.g. outside the query sample)"
    elif int(match.iloc[0]["n_positives"]) == 0:
        about = ("a lone query: no other item of its class in the gallery, so it has no AP and is left out of "
                 "every metric")
    else:
        row = match.iloc[0]
        about = (f"AP {row['ap']:.4f} [{row['ap_lower']:.4f}, {row['ap_upper']:.4f}], "
                 f"{int(row['n_positives'])} positives")
    st.caption(f"Query {q} (id {components.literal(ids[q])}, class {components.literal(ds.labels[q])}): {about}. "
               "Top 10 by exact scores; tied scores are shown by row index (metrics average over tie orders).")
    st.dataframe(nn, width="stretch", hide_index=True)


st.title("Per query & per class")
got = current()
if got is not None:
    key, ev = got
    methods = st.multiselect("Methods", ev.methods, default=ev.methods[:2], key="pq_methods", bind="query-params")
    ap = ap_frame(ev, methods or ev.methods)
    n_labels = ap["label"].nunique()
    n_cls = components.int_slider("Classes shown (lowest mean AP first)", min(5, n_labels), min(100, n_labels), 30)
    components.figure(ap_by_class_figure(ap, max_classes=n_cls), "ap_by_class", ap)

    st.subheader("Worst classes")
    sampled = ev.query_sample is not None
    if sampled:
        st.caption(f"Query sample: {ev.query_sample.n} of {ev.query_sample.N} queries. n_queries = sampled queries "
                   "of the class, of_queries = its queries in the data.")
    components.table(class_summary(ap, ev.class_query_counts() if sampled else None), "classes_by_mean_ap",
                     height=300)

    drill_down(key, ev)
