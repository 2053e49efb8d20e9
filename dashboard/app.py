"""Entry point: page config, navigation, and the shared sidebar (dataset, similarity, cutoffs)."""

from __future__ import annotations

import streamlit as st

from analysis_core import InputError
from dashboard import cache, state

st.set_page_config(page_title="Embedding retrieval evaluation", page_icon="📈", layout="wide")


def sidebar() -> None:
    with st.sidebar:
        st.header("Data")
        options = [*state.DEMO_SETS, "upload"]
        labels = {**state.DEMO_SETS, "upload": "Upload files"}
        src = st.radio("Dataset", options, format_func=labels.get, key=state.SOURCE)
        files: list[tuple[str, bytes]] = []
        if src == "upload":
            ups = st.file_uploader("Embeddings (.npz, .npy + labels, .csv, .parquet); several files = several methods",
                                   type=["npz", "npy", "csv", "parquet", "txt"], accept_multiple_files=True,
                                   key=state.UPLOADS)
            files = [(u.name, u.getvalue()) for u in ups or []]
        else:
            files = cache.demo_files(src)
        st.selectbox("Similarity", ["cosine", "dot", "euclidean"], key=state.SIMILARITY)
        st.multiselect("Cutoffs K", [1, 2, 4, 8, 16, 32], default=[1, 2, 4, 8], key=state.KS)
    st.session_state["_files"] = files
    st.session_state["_error"] = None
    st.session_state["_dataset"] = None
    if not files:
        return
    try:
        key = cache.digest(files)
        st.session_state["_dataset"] = (key, cache.load(key, tuple(files)))
    except InputError as exc:
        st.session_state["_error"] = exc


sidebar()
nav = st.navigation([st.Page("views/overview.py", title="Overview", icon="📊", default=True)])
nav.run()
