"""What every page starts from: the sidebar's dataset and its evaluation, or a message."""

from __future__ import annotations

import streamlit as st

from analysis_core import InputError
from dashboard import cache, state


def current(n_recall: int = 11):
    """(digest, evaluation) of the sidebar's dataset, or None after showing why there is none."""
    err = st.session_state.get(state.ERROR)
    if err is not None:
        st.error(f"**This input can't be used.** {err}")
        return None
    loaded = st.session_state.get(state.DATASET)
    if loaded is None:
        st.info("Upload one or more files in the sidebar, or pick a demo set.")
        return None
    key, ds = loaded
    try:
        return key, cache.evaluation(key, similarity(), ks(), n_recall, ds)
    except InputError as exc:
        st.error(f"**This input can't be evaluated.** {exc}")
        return None


def similarity() -> str:
    return st.session_state.get(state.SIMILARITY, "cosine")


def ks() -> tuple[int, ...]:
    return tuple(sorted(st.session_state.get(state.KS) or [1]))


def alpha() -> float:
    return float(st.session_state.get(state.ALPHA, 0.05))
