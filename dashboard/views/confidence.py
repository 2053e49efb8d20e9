"""Confidence: error-vs-reject curves, their area, Spearman correlation of confidence with AP."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis_core.figures.error_reject import erc_figure
from analysis_core.stats.error_reject import error_reject_curve
from dashboard import components
from dashboard.views.common import current

st.title("Confidence: error against rejection")
got = current()
if got is not None:
    key, ev = got
    error = st.radio("Error", ["p@1", "ap"], horizontal=True, format_func={"p@1": "1 − P@1", "ap": "1 − AP"}.get)
    curves, rows, notes = {}, [], []
    for m in ev.methods:
        pq = ev.per_query(m)
        pq = pq[pq["n_positives"] > 0]
        erc = error_reject_curve(pq["confidence"].to_numpy(), pq["ap"].to_numpy(), pq["precision_at_1"].to_numpy(),
                                 error=error)
        curves[m] = erc.curve
        if erc.note:
            notes.append(f"{m}: {erc.note}")
        rows.append({"method": m, "AUERC": erc.auc, "oracle AUERC": erc.oracle_auc, "Spearman ρ (conf., AP)":
                     erc.spearman, "p-value": erc.spearman_p})
    components.figure(erc_figure(curves), "erc", pd.concat([c.assign(method=m) for m, c in curves.items()]))
    components.table(pd.DataFrame(rows), "erc_summary")
    components.warnings(notes)
    st.caption("Reject the least confident queries first; lower curves and areas are better. The dotted oracle "
               "rejects the largest errors first: the best any confidence could do.")
