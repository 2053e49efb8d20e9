"""The class-count sweep: sample C classes (seeded, several repeats) and recompute Recall@1,
MAP@R, mAP, grouped Recall@1 and JSD on that subset. Recall@1 and MAP@R fall as C grows; grouped
Recall@1 stays within its interval; JSD moves little (H. Oi, R. Kawakami and T. Naemura,
"Analysis of Evaluation Metrics with the Distance between Positive Pairs and Negative Pairs in
Deep Metric Learning").
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ..engine.core import run_pass
from ..engine.cutoffs import with_recall_at_1
from ..numerics import fsum_mean
from ..options import check_int
from .grouped_recall import grouped_recall
from .histograms import jensen_shannon
from .sampling import QuerySample, query_frame, stratified_mean, stratified_sample


def sample_classes(codes: np.ndarray, n_classes: int, seed: int = 0) -> np.ndarray:
    """Row indices of the items of ``n_classes`` classes drawn at random (seeded)."""
    classes = np.unique(codes)
    pick = np.random.default_rng(seed).choice(classes, min(n_classes, classes.size), replace=False)
    return np.nonzero(np.isin(codes, pick))[0]


def default_class_counts(n_classes: int, lowest: int = 10, points: int = 8) -> list[int]:
    """Log-spaced class counts from ``lowest`` up to all classes."""
    lo = min(lowest, n_classes)
    return sorted({int(round(c)) for c in np.geomspace(lo, n_classes, points)})


def _query_seed(run_seed: int) -> int:
    """The seed of a run's query sample: a stream of its own, apart from the class draw's."""
    return int(np.random.SeedSequence([run_seed, 1]).generate_state(1)[0])


def class_count_sweep(X: np.ndarray, codes: np.ndarray, *, counts: list[int] | None = None, repeats: int = 3,
                      seed: int = 0, group_size: int = 10, similarity: str = "cosine",
                      query_sample: int | None = None, exact_up_to: int = 0, progress=None,
                      sure_hits: np.ndarray | None = None, loo_pass=None) -> pd.DataFrame:
    """For each class count C (and repeat): the metrics on C sampled classes. Columns:
    n_classes, repeat, n_items, n_queries, of_queries, recall_at_1, map_at_r, map,
    grouped_recall_at_1 (with its interval), jsd.

    ``query_sample``: a run whose C classes hold more than ``exact_up_to`` items and more queries
    (with a positive) than ``query_sample`` ranks a stratified sample of that many of them
    (:func:`~.sampling.stratified_sample`, seeded per run) against all of the C classes' items:
    Recall@1, MAP@R and mAP are then the stratified estimates, the JSD that of the sampled
    queries' pairs (``n_queries`` < ``of_queries``), and a run costs ``query_sample`` x its items
    instead of its items squared; Grouped Recall@1 then ranks at most ``query_sample`` of each
    group's queries that can miss (:func:`~.grouped_recall.grouped_recall`).
    ``progress(done, total, stage)`` is called before each (C, repeat), weighted by its items.
    ``sure_hits``: per row, the items that are a grouped-recall hit in any group (see
    :func:`~.grouped_recall.sure_hits`; a sampled class set keeps whole classes): the same values,
    the groups' passes rank only the other queries. ``loo_pass``: a leave-one-out pass over all of
    ``X`` (every item a query and in the gallery, float32, this similarity, 200 histogram bins, as
    :meth:`~analysis_core.Evaluation.loo_pass` gives): the point with every class reads its exact
    values instead of running a pass (sampled or not)."""
    codes = np.asarray(codes)
    n_all = np.unique(codes).size
    repeats = check_int(repeats, "repeats (per class count)", 1)
    group_size = check_int(group_size, "group_size (classes per group)", 2)  # a group of one class: recall 1
    if counts:
        # a count of one class has no negatives (every metric 1 by construction); above n_all the
        # row would be labelled with classes it does not have
        counts = [check_int(c, "every class count", 2, maximum=n_all)
                  for c in counts]
    counts = counts or default_class_counts(n_all, lowest=max(2, group_size))
    runs = [(c, r) for c in counts for r in range(repeats if c < n_all else 1)]
    total, done = sum(c for c, _ in runs), 0  # the cost grows with the classes sampled
    def one(cr: tuple[int, int]) -> dict:
        c, r = cr
        row, _ = sweep_run(X, codes, c, seed * 1_000_003 + 7919 * r + c, group_seed=seed + r, group_size=group_size,
                           similarity=similarity, query_sample=query_sample, exact_up_to=exact_up_to,
                           sure_hits=sure_hits, loo_pass=loo_pass)
        return {"n_classes": c, "repeat": r, **row}

    # two runs at a time: each has a serial part (layout, sampling, summaries) the other overlaps;
    # a run's values do not depend on it. Progress is reported from this thread, in run order.
    pool = ThreadPoolExecutor(2, thread_name_prefix="class-sweep")
    try:
        futures = [pool.submit(one, cr) for cr in runs]
        rows = []
        for (c, r), fut in zip(runs, futures, strict=True):
            if progress is not None:
                progress(done, total, f"{c} classes, repeat {r + 1}")
            done += c
            rows.append(fut.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a stopped sweep (progress raised) runs no more
    return pd.DataFrame(rows)


_BINS = 200  # the pair histograms' bins (JSD): a pass given as ``loo_pass`` has the same


def sweep_run(X: np.ndarray, codes: np.ndarray, n_classes: int, run_seed: int, *, group_seed: int,
              group_size: int = 10, similarity: str = "cosine", query_sample: int | None = None,
              exact_up_to: int = 0, sure_hits: np.ndarray | None = None,
              loo_pass=None) -> tuple[dict, QuerySample | None]:
    """One point of the sweep: ``n_classes`` classes drawn with ``run_seed``, their metrics (see
    :func:`class_count_sweep`), and the query sample ranked (None: every query; its positions
    are in the drawn items, in input order)."""
    idx = sample_classes(codes, n_classes, seed=run_seed)
    sub = codes[idx]
    frame = query_frame(sub)
    whole = with_recall_at_1(loo_pass) if loo_pass is not None and idx.size == codes.size \
        and loo_pass.hist_pos.size == _BINS else None  # every item drawn: the given pass (None if it cannot say)
    qs = stratified_sample(sub, frame, query_sample, _query_seed(run_seed)) \
        if whole is None and query_sample is not None and 2 <= query_sample < frame.size \
        and idx.size > exact_up_to else None
    is_query = None
    if qs is not None:
        is_query = np.zeros(sub.size, bool)
        is_query[qs.chosen] = True
    Xs = X if whole is not None else X[idx]  # one copy of the drawn items, for the pass and the groups
    res = whole if whole is not None else run_pass(Xs, sub, is_query=is_query, similarity=similarity,
                                                                 ks=(1,), n_recall=2, n_bins=_BINS)
    scored = res.values[:, 0] > 0
    col = {name: res.values[scored, i] for i, name in enumerate(res.columns)}
    if qs is None:
        def mean(name: str) -> float:
            return fsum_mean(col[name])
    else:
        strata = qs.strata_of(res.query_items[scored])

        def mean(name: str) -> float:
            return stratified_mean(col[name], strata, qs)
    gr = grouped_recall(Xs, sub, group_size=group_size, ks=(1,), similarity=similarity, seed=group_seed,
                        sure_hits=None if sure_hits is None else sure_hits[idx], loo_pass=whole,
                        query_sample=None if qs is None else query_sample).table.iloc[0]
    return dict(n_items=idx.size, n_queries=int(scored.sum()), of_queries=frame.size,
                recall_at_1=mean("recall_at_1"), map_at_r=mean("map_at_r"), map=mean("ap"),
                grouped_recall_at_1=gr["mean"], grouped_ci_low=gr["ci_low"], grouped_ci_high=gr["ci_high"],
                jsd=jensen_shannon(res.hist_pos, res.hist_neg)), qs
