"""Helpers shared by pages: the current dataset and its evaluation, or a message."""

from __future__ import annotations

import streamlit as st

from analysis_core import InputError
from dashboard import cache, state


def current_evaluation():
    """The evaluation of the sidebar's dataset, or None after showing why there is none."""
    err = st.session_state.get("_error")
    if err is not None:
        st.error(f"**This input can't be used.** {err}")
        return None
    loaded = st.session_state.get("_dataset")
    if loaded is None:
        st.info("Upload one or more files in the sidebar, or pick a demo set.")
        return None
    key, ds = loaded
    ks = tuple(sorted(st.session_state.get(state.KS) or [1]))
    try:
        return cache.evaluation(key, st.session_state.get(state.SIMILARITY, "cosine"), ks, ds)
    except InputError as exc:
        st.error(f"**This input can't be evaluated.** {exc}")
        return None
