"""What every page starts from: the sidebar's dataset and its evaluation, or a message."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from analysis_core import Evaluation, InputError
from analysis_core.engine.topk import query_neighbours
from analysis_core.errors import ComputeError
from analysis_core.evaluation import NO_POSITIVE
from analysis_core_dashboard import cache, components, state

# Every page evaluates on this recall grid, so that the PR bands page reads the curves of the pass
# the Overview made (a page asking for another grid would repeat the pass: 230 s at 100 000 x 768
# with 3 methods). A coarser grid whose step divides it is a subset of its columns, exactly (a
# curve's value at r depends on r alone): the bands' N_P slider recomputes bands, never a pass.
RECALL_GRID = 61


def token(n_recall: int = RECALL_GRID) -> cache.Token | None:
    """The sidebar's dataset and settings as one cache token (None without a loaded dataset)."""
    loaded = st.session_state.get(state.DATASET)
    if loaded is None:
        return None
    n = int(st.session_state.get(state.QUERY_SAMPLE) or 0)
    return cache.Token(data=loaded[0], similarity=similarity(), ks=ks(), n_recall=n_recall,
                       query_sample=n or None, seed=int(st.session_state.get(state.QUERY_SEED) or 0) if n else 0,
                       alpha=alpha(), split=split() or None,
                       precision=st.session_state.get(state.PRECISION, "float32"),
                       design=st.session_state.get(state.DESIGN) or ())


def loaded_token(n_recall: int = RECALL_GRID) -> cache.Token | None:
    """The sidebar's token (:func:`token`), or None after showing why there is none: the input
    was refused, or nothing is loaded. Pages that need the data but not yet its evaluation start
    here (the dataset is ``st.session_state[state.DATASET][1]``)."""
    err = st.session_state.get(state.ERROR)
    if err is not None:
        components.error("This input can't be used.", err)
        return None
    if (err := st.session_state.get(state.DESIGN_ERROR)) is not None:
        components.error("The design table can't be used (sidebar, Design):", err)
        return None
    tok = token(n_recall)
    if tok is None:
        st.info("Upload one or more files in the sidebar, or pick a demo set.")
    return tok


def current(n_recall: int = RECALL_GRID, *, scored: bool = True) -> tuple[cache.Token, Evaluation] | None:
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


def split_evaluations(key: cache.Token, ev: Evaluation, group_size: int = 10, seed: int = 0,
                      *, every_split: bool = False) -> dict[str, Evaluation]:
    """Each split as its own retrieval problem — when every item is evaluated together, or always
    with ``every_split`` (pages that compare splits) — by the report's orchestration
    (:func:`analysis_core.splits.evaluate_splits`), each split's evaluation cached. A split where
    retrieval is impossible is skipped with a warning naming it."""
    from analysis_core.splits import evaluate_splits

    splits = evaluate_splits(ev, group_size, seed, every_split=every_split,
                             evaluate_one=lambda sp, size: cache.split_evaluation(key, ev.dataset, sp, size, seed))
    if splits.skipped:
        components.warnings(splits.messages())
    return splits.evaluations


def runs(key: cache.Token, ev: Evaluation, select_on: str | None = None, report_on: str | None = None):
    """The run-level analysis (:class:`~analysis_core.stats.runs.RunAnalysis`) the pages show, as
    the report makes it: of the sidebar's evaluation and, when it holds every item of data with
    splits, of each split as its own retrieval problem; with ``select_on`` and ``report_on``, each
    run's checkpoint chosen on one split and reported on the other."""
    if select_on is not None and report_on is not None:
        evals = {sp: ev if ev.split == sp else cache.split_evaluation(key, ev.dataset, sp, 10, 0)
                 for sp in dict.fromkeys((select_on, report_on))}
    else:
        evals = {ev.split or "all": ev, **split_evaluations(key, ev)}
    return cache.runs(key, evals, select_on, report_on)


def run_counts(design) -> str:
    """"3 families, 3 runs each" (or "2–5 runs") of a design (:class:`~analysis_core.design.Design`)."""
    per = [len(r) for r in design.runs_of().values()]
    counts = (f"{per[0]} run{'s' if per[0] != 1 else ''} each" if min(per) == max(per)
              else f"{min(per)}–{max(per)} runs")
    return f"{len(per)} famil{'y' if len(per) == 1 else 'ies'}, {counts}"


def first_methods(ev: Evaluation) -> list[str]:
    """The two methods a comparison page opens on: the first two — or, with replicate runs, the last
    checkpoint of the first run of each of the first two families (two seeds of one loss would
    compare a procedure with itself)."""
    if ev.design.has_runs:
        final = ev.design.final_methods().drop_duplicates("family")["method"].tolist()
        if len(final) >= 2:
            return final[:2]
    return ev.methods[:2]


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
    sub = ev.items
    xf, sq = cache.vectors(key, sub, method)
    gallery = None if sub.role is None else np.isin(sub.role, ("gallery", "both"))
    scores, idx = query_neighbours(xf, at, k, similarity=similarity(), sq_norms=sq, candidates=gallery)
    idx = rows[idx]
    ids = ds.ids if ds.ids is not None else np.arange(ds.n_items).astype(str)
    return pd.DataFrame({"rank": np.arange(1, idx.size + 1), "item": idx, "id": ids[idx], "label": ds.labels[idx],
                         "same class": ds.labels[idx] == ds.labels[q], "score": scores})
