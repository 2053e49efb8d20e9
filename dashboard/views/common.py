"""What every page starts from: the sidebar's dataset and its evaluation, or a message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from analysis_core import Evaluation, InputError
from analysis_core.engine.topk import query_neighbours
from analysis_core.errors import ComputeError
from analysis_core.evaluation import NO_POSITIVE
from dashboard import cache, components, state


def token(n_recall: int = 11) -> cache.Token | None:
    """The sidebar's dataset and settings as one cache token (None without a loaded dataset)."""
    loaded = st.session_state.get(state.DATASET)
    if loaded is None:
        return None
    n = int(st.session_state.get(state.QUERY_SAMPLE) or 0)
    return cache.Token(data=loaded[0], similarity=similarity(), ks=ks(), n_recall=n_recall,
                       query_sample=n or None, seed=int(st.session_state.get(state.QUERY_SEED) or 0) if n else 0,
                       alpha=alpha(), split=split() or None,
                       precision=st.session_state.get(state.PRECISION, "float32"))


def loaded_token(n_recall: int = 11) -> cache.Token | None:
    """The sidebar's token (:func:`token`), or None after showing why there is none: the input
    was refused, or nothing is loaded. Pages that need the data but not yet its evaluation start
    here (the dataset is ``st.session_state[state.DATASET][1]``)."""
    err = st.session_state.get(state.ERROR)
    if err is not None:
        components.error("This input can't be used.", err)
        return None
    tok = token(n_recall)
    if tok is None:
        st.info("Upload one or more files in the sidebar, or pick a demo set.")
    return tok


def current(n_recall: int = 11, *, scored: bool = True) -> tuple[cache.Token, Evaluation] | None:
    """(token, evaluation) of the sidebar's dataset and settings, or None after showing why there
    is none. Every result a page derives from the evaluation is cached under the token. With
    ``scored``, an evaluation where no query has a positive (a split of singleton classes) is
    None too, with that reason: every page would show blank charts and NaN."""
    tok = loaded_token(n_recall)
    if tok is None:
        return None
    try:
        ev = cache.evaluation(tok, st.session_state[state.DATASET][1], compute())
        if scored and ev.n_queries() == ev.n_lone_queries():
            where = f"Split '{ev.split}'" if ev.split is not None else "This data set"
            st.info(f"{where}: {NO_POSITIVE} Retrieval needs a class of at least two items"
                    + ("; choose another split in the sidebar." if ev.split is not None else "."))
            return None
        return tok, ev
    except InputError as exc:
        components.error("This input can't be evaluated.", exc)
    except ComputeError as exc:
        cache.compute.clear()  # a lost cluster is started afresh on the next run
        components.error("The Dask cluster could not be used.", exc)
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


def unit() -> str:
    """The sidebar's unit of inference: "class" (default) or "query"."""
    return st.session_state.get(state.UNIT) or "class"


def split() -> str:
    """The sidebar's split ("" = every item in one gallery)."""
    return st.session_state.get(state.SPLIT) or ""


def items(ev: Evaluation):
    """The dataset restricted to the evaluated items (the chosen split's, or all)."""
    ds = ev.dataset
    return ds if ev.rows.size == ds.n_items else ds.subset(ev.rows)


def split_evaluations(key: cache.Token, ev: Evaluation, group_size: int = 10, seed: int = 0,
                      *, every_split: bool = False) -> dict[str, Evaluation]:
    """Each split as its own retrieval problem — when every item is evaluated together, or always
    with ``every_split`` (pages that compare splits). A split where retrieval is impossible is
    skipped with a warning naming it."""
    from analysis_core.methods import natural_key

    ds = ev.dataset
    if ds.split is None or (ev.split is not None and not every_split):
        return {}
    out = {}
    for sp in sorted(set(ds.split.tolist()), key=natural_key):
        try:
            e = cache.split_evaluation(key, ds, sp, group_size, seed)
        except InputError as exc:
            components.warnings([f"split '{sp}' skipped: {exc.problem}"])
            continue
        if e.n_queries() == e.n_lone_queries():
            components.warnings([f"split '{sp}' skipped: {NO_POSITIVE}"])
            continue
        out[sp] = e
    return out


def neighbours(key: cache.Token, ev: Evaluation, method: str, q: int, k: int = 10) -> pd.DataFrame | None:
    """The ``k`` nearest neighbours of input row ``q`` by ``method``'s similarity, ranked as the
    engine ranks (within the evaluated items, against their gallery): rank, item (input row), id,
    label, whether it shares ``q``'s class, score. None when ``q`` is not among the evaluated
    items (another split's). One row of scores against the kept prepared vectors, no index."""
    ds = ev.dataset
    rows = ev.rows  # the evaluated items' input rows (a split's), ascending
    at = int(np.searchsorted(rows, q))
    if at >= rows.size or rows[at] != q:
        return None
    sub = items(ev)
    xf, sq = cache.vectors(key, sub, method)
    gallery = None if sub.role is None else np.isin(sub.role, ("gallery", "both"))
    scores, idx = query_neighbours(xf, at, k, similarity=similarity(), sq_norms=sq, candidates=gallery)
    idx = rows[idx]
    ids = ds.ids if ds.ids is not None else np.arange(ds.n_items).astype(str)
    return pd.DataFrame({"rank": np.arange(1, idx.size + 1), "item": idx, "id": ids[idx], "label": ds.labels[idx],
                         "same class": ds.labels[idx] == ds.labels[q], "score": scores})
