"""Confidence: error-vs-reject curves, their area, Spearman correlation of confidence with AP."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis_core.figures.error_reject import erc_figure
from analysis_core.stats.error_reject import error_reject_table
from analysis_core_dashboard import components
from analysis_core_dashboard.views.common import current

st.title("Confidence: error against rejection")
got = current()
if got is not None:
    key, ev = got
    error = st.radio("Error", ["p@1", "ap"], horizontal=True, format_func={"p@1": "1 − P@1", "ap": "1 − AP"}.get)
    erc = error_reject_table(ev, error)
    components.figure(erc_figure(erc.curves), "erc", pd.concat([c.assign(method=m) for m, c in erc.curves.items()]))
    components.table(erc.summary.rename(columns={"auc": "AUERC", "oracle_auc": "oracle AUERC",
                                                 "spearman": "Spearman ρ (conf., AP)", "spearman_p": "p-value"}),
                     "erc_summary")
    components.warnings(erc.notes)
    st.caption("Reject the least confident queries first; lower curves and areas are better. The dotted oracle "
               "rejects the largest errors first: the best any confidence could do.")
