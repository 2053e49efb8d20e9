"""What every page starts from: the sidebar's dataset and its evaluation, or a message."""

from __future__ import annotations

import streamlit as st

from analysis_core import InputError
from analysis_core.errors import ComputeError
from dashboard import cache, components, state


def current(n_recall: int = 11):
    """(digest, evaluation) of the sidebar's dataset, or None after showing why there is none."""
    err = st.session_state.get(state.ERROR)
    if err is not None:
        components.error("This input can't be used.", err)
        return None
    loaded = st.session_state.get(state.DATASET)
    if loaded is None:
        st.info("Upload one or more files in the sidebar, or pick a demo set.")
        return None
    key, ds = loaded
    n = int(st.session_state.get(state.QUERY_SAMPLE) or 0)
    sample = (n, int(st.session_state.get(state.QUERY_SEED) or 0), alpha()) if n else (None, 0, 0.05)
    try:
        return key, cache.evaluation(key, similarity(), ks(), n_recall, *sample, _ds=ds, _compute=compute())
    except InputError as exc:
        components.error("This input can't be evaluated.", exc)
    except ComputeError as exc:
        cache.compute.clear()  # a lost cluster is started afresh on the next run
        components.error("The Dask cluster could not finish.", exc)
    return None


def compute():
    """The sidebar's compute backend: None (this process) or a started Dask cluster."""
    mode = st.session_state.get(state.COMPUTE_MODE, "process")
    if mode == "process":
        return None
    return cache.compute(mode, int(st.session_state.get(state.COMPUTE_WORKERS) or 2),
                         str(st.session_state.get(state.COMPUTE_ADDRESS) or ""))


def similarity() -> str:
    return st.session_state.get(state.SIMILARITY, "cosine")


def ks() -> tuple[int, ...]:
    return tuple(sorted(st.session_state.get(state.KS) or [1]))


def alpha() -> float:
    return float(st.session_state.get(state.ALPHA, 0.05))
