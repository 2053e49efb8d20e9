"""Grouped Recall@K (M. Zhdanov and I. Karpukhin; see docs/metrics.md, References): classes are
partitioned at random (seeded) into groups of S; Recall@K is computed on each group's items only
and averaged over groups: ``GR@K_S = (1/G) sum_g R@K(D_g)``. Each group is a retrieval problem
with S classes whatever the dataset's size, so the value depends on S, not on the number of
classes; groups are independent, so ``CI = mean +- t_{1-alpha/2, G-1} sd_groups / sqrt(G)``,
clipped to [0, 1] (Student t rather than the paper's normal approximation: with 3-5 groups a z
interval undercovers), and Korn-Graubard's interval where the queries hold fewer than 10 misses
(or hits), near the ceiling (:func:`_intervals`). Beside it, the chance level: the expected
Recall@K of a random ranking within groups of these class sizes. Classes left over (``n_classes mod S``) are dropped and
counted. Recall@K within a group comes from the same tie-aware engine as everything else
(expected hit rate over tie orders).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..engine.core import run_pass
from ..engine.cutoff_plan import CUTOFF_FLOOR
from ..engine.cutoffs import answers, with_cutoffs, with_recall_at_1
from ..engine.results import PassResult
from ..numerics import fsum_mean
from .quantiles import t_quantile
from .sampling import QuerySample, query_frame, stratified_mean, stratified_sample


@dataclass(frozen=True)
class GroupedRecall:
    """``table``: one row per k with mean, sd (over groups), se (its standard error, unclipped:
    what a difference of two grouped recalls needs), ci_low, ci_high, n_groups, n_queries (the
    groups' queries with a positive, per partition), n_observed (those whose Recall@K is known:
    ranked or sure; fewer when sampled), repeat_sd (spread of the
    partition means over repeats). ``per_group``: repeat, group, k, recall, n_queries (the group's
    queries with a positive), n_observed (those ranked or sure: fewer when sampled), chance."""

    group_size: int
    alpha: float
    repeats: int
    n_dropped_classes: int
    table: pd.DataFrame
    per_group: pd.DataFrame
    seed: int = 0  # of the partitions
    #: at most this many of a group's queries were ranked (a stratified sample); None: every query
    query_sample: int | None = None
    #: ``per_group`` at every cutoff the groups' passes computed (the given ones and up to
    #: CUTOFF_FLOOR): :meth:`with_ks` among them is a view
    every_k: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def with_ks(self, ks: tuple[int, ...]) -> GroupedRecall | None:
        """These groups' results at cutoffs ``ks``, equal to :func:`grouped_recall` given them,
        without a pass; None when the groups' passes did not compute every one of them."""
        ks = tuple(sorted({int(k) for k in ks}))
        if self.every_k is None or not set(ks) <= set(self.every_k["k"].tolist()):
            return None
        per_group = self.every_k[self.every_k["k"].isin(ks)].reset_index(drop=True)
        return replace(self, table=_table(per_group, ks, self.alpha), per_group=per_group)

    def at_alpha(self, alpha: float) -> GroupedRecall:
        """These groups' results with the intervals at level ``alpha`` (the level enters nothing
        else): equal to :func:`grouped_recall` given ``alpha``, without its passes."""
        return self if alpha == self.alpha else replace(self, alpha=alpha, table=_intervals(self.table, alpha))

    def summary_frame(self) -> pd.DataFrame:
        """One row per k: group_size, k, mean, its interval, chance level, groups (a copy)."""
        return self.table.assign(group_size=self.group_size, alpha=self.alpha, repeats=self.repeats,
                                 n_dropped_classes=self.n_dropped_classes)

    def summary_dict(self) -> dict:
        """The ``grouped_recall_at_k`` block of ``summary.json`` (NaN -> None)."""
        def clean(v: float):
            return None if v is None or not math.isfinite(v) else float(v)

        return {"group_size": self.group_size, "n_groups": int(self.table["n_groups"].iloc[0]),
                "n_dropped_classes": self.n_dropped_classes, "repeats": self.repeats, "alpha": self.alpha,
                "interval": INTERVAL_TEXT, "n_queries": int(self.table["n_queries"].iloc[0]),
                "n_observed": int(self.table["n_observed"].iloc[0]),
                "query_sample": self.query_sample,
                "k": {str(int(r.k)): {"mean": clean(r.mean), "ci_low": clean(r.ci_low), "ci_high": clean(r.ci_high),
                                      "chance": clean(r.chance)}
                      for r in self.table.itertuples()}}


def _partitions(classes: np.ndarray, group_size: int, seed: int, repeats: int):
    for r in range(repeats):
        perm = np.random.default_rng([seed, r]).permutation(classes)
        n_groups = perm.size // group_size
        yield r, perm[: n_groups * group_size].reshape(n_groups, group_size)


def grouped_recall(X: np.ndarray, codes: np.ndarray, *, group_size: int = 10, ks: tuple[int, ...] = (1,),
                   similarity: str = "cosine", seed: int = 0, repeats: int = 1, alpha: float = 0.05,
                   loo_pass: PassResult | None = None, keep_cutoffs: bool = False,
                   sure_hits: np.ndarray | None = None, items: np.ndarray | None = None,
                   query_sample: int | None = None) -> GroupedRecall:
    """Grouped Recall@K over random partitions of the classes into groups of ``group_size``.

    With ``repeats > 1`` every repeat is a new partition (seeds ``[seed, r]``); the reported mean
    is the mean of the partition means, the interval uses the average single-partition standard
    error, and ``repeat_sd`` reports how much the partition itself moves the value.

    ``loo_pass``: a pass the caller already has over all of ``X`` and ``codes``, leave-one-out
    (every item a query and in the gallery), in float32, with ``similarity``: a group holding
    every class (``group_size`` = the number of classes) is exactly that retrieval problem, so
    its Recall@K is read from it instead of run again (the engine's per-query values do not depend
    on threads, blocks or the PR grid). Used when its cutoffs include every k of ``ks`` or its
    kept tie blocks answer them (:func:`~analysis_core.engine.cutoffs.answers`).

    ``keep_cutoffs``: also keep the groups' Recall@K at every cutoff up to
    :data:`~analysis_core.engine.cutoff_plan.CUTOFF_FLOOR` (:attr:`GroupedRecall.every_k`), so that
    :meth:`GroupedRecall.with_ks` among them runs no pass (what :func:`~analysis_core.evaluate`
    asks for; a hit-rate column costs the passes little, its rows and chance levels ~1 ms a group).

    ``sure_hits``: one flag per row of ``X``, True for the items that are a hit at every cutoff in
    every group (:func:`sure_hits`, from a leave-one-out pass over these items or over more whole
    classes): a group's pass then ranks only its other queries, and the sure ones count as hits
    (the same values; the passes cost that fraction of the work: ~0 on a well-trained embedding).

    ``items``: the rows of ``X`` (and of ``codes``, ``sure_hits``) evaluated, default all: each
    group gathers its rows from ``X`` itself, with no copy of the items first. ``loo_pass`` is then
    a pass over those items.

    ``query_sample``: in a group with more queries (with a positive) than this, a stratified
    sample of this many of them (strata: classes, as
    :func:`~analysis_core.stats.sampling.stratified_sample`; :func:`group_sample_seed`) is ranked
    against all of the group's items, and the group's Recall@K is their stratified mean (unbiased
    for the group's exact value). The sample is drawn from every query, so ``sure_hits`` still only
    saves passes (the sampled sure hits count as hits unranked): the same values with or without
    them. A group's pass then costs at most ``query_sample`` x its items instead of its items
    squared. The interval over groups stays valid: each group's estimate is its exact value plus
    independent zero-mean sampling noise, and the spread over groups carries both (the
    ultimate-cluster variance; Cochran 1977, *Sampling Techniques*, 11.8). ``n_observed`` counts
    the queries known (ranked or sure).
    """
    item_rows = None if items is None else np.asarray(items)
    codes = np.asarray(codes) if item_rows is None else np.asarray(codes)[item_rows]
    classes = np.unique(codes)
    if group_size < 1:
        raise ValueError("group_size must be at least 1")
    if query_sample is not None and query_sample < 2:
        raise ValueError(f"query_sample must be at least 2 (queries per group; None: every query), not {query_sample}")
    ks = tuple(sorted({int(k) for k in ks}))
    kept = tuple(sorted({*ks, *range(1, CUTOFF_FLOOR + 1)})) if keep_cutoffs else ks
    whole = None  # the group of every class, read from loo_pass
    if loo_pass is not None and loo_pass.query_items.size == codes.size:
        if all(f"recall_at_{k}" in loo_pass.columns for k in kept):
            whole = loo_pass
        elif answers(loo_pass, kept):
            whole = with_cutoffs(loo_pass, kept)
        elif all(f"recall_at_{k}" in loo_pass.columns for k in ks):
            whole, kept = loo_pass, ks
    jobs = [(r, g, np.nonzero(np.isin(codes, members))[0])
            for r, groups in _partitions(classes, group_size, seed, repeats) for g, members in enumerate(groups)]

    sure = None if sure_hits is None else np.asarray(sure_hits, bool)
    if sure is not None and sure.shape != (X.shape[0],):
        raise ValueError(f"sure_hits needs one flag per row of X ({X.shape[0]}), not {sure.shape}")
    if sure is not None and item_rows is not None:
        sure = sure[item_rows]

    def gather(idx: np.ndarray) -> np.ndarray:
        return X[idx] if item_rows is None else X[item_rows[idx]]

    def one(job) -> tuple[PassResult | None, QuerySample | None]:
        r, g, idx = job
        if whole is not None and idx.size == codes.size:
            return whole, None
        ask = None if sure is None else ~sure[idx]
        qs = None
        if query_sample is not None:
            frame = query_frame(codes[idx])
            if 2 <= query_sample < frame.size:  # drawn from every query: sure hits only save passes
                qs = stratified_sample(codes[idx], frame, query_sample, group_sample_seed(seed, r, g))
                chosen = np.zeros(idx.size, bool)
                chosen[qs.chosen] = True
                ask = chosen if ask is None else chosen & ask
        if ask is not None and not ask.any():
            return None, qs
        return run_pass(gather(idx), codes[idx], is_query=ask, similarity=similarity, ks=kept, n_recall=2,
                        n_threads=1, hit_rates_only=True), qs

    # the groups' passes, one thread each, on every core (a pass's values do not depend on it)
    n_threads = min(len(jobs), os.cpu_count() or 1)
    if n_threads > 1:
        with ThreadPoolExecutor(n_threads, thread_name_prefix="grouped-recall") as pool:
            passes = list(pool.map(one, jobs))
    else:
        passes = [one(job) for job in jobs]
    rows = []
    for (r, g, idx), (res, qs) in zip(jobs, passes, strict=True):
        # the sure hits the group's pass did not rank (a whole-class group's pass ranks them all)
        unranked = np.zeros(0, np.int64)
        if sure is not None and (res is None or res is not whole):
            unranked = np.nonzero(sure[idx])[0] if qs is None else qs.chosen[sure[idx][qs.chosen]]
        scored = np.zeros(0, bool) if res is None else res.values[:, 0] > 0
        positions = np.concatenate([unranked, np.zeros(0, np.int64) if res is None else res.query_items[scored]])
        strata = None if qs is None else qs.strata_of(positions)
        sizes = np.unique(codes[idx], return_counts=True)[1]
        for k in kept:
            v = np.ones(unranked.size) if res is None else np.concatenate(
                [np.ones(unranked.size), res.values[scored, res.columns.index(f"recall_at_{k}")]])
            recall = fsum_mean(v) if qs is None or strata is None else stratified_mean(v, strata, qs)
            rows.append(dict(repeat=r, group=g, k=k, recall=recall, n_queries=int(v.size if qs is None else qs.N),
                             n_observed=int(v.size), chance=chance_hit_rate(sizes, k)))
    every_k = pd.DataFrame(rows, columns=["repeat", "group", "k", "recall", "n_queries", "n_observed", "chance"])
    per_group = every_k if kept == ks else every_k[every_k["k"].isin(ks)].reset_index(drop=True)
    return GroupedRecall(group_size, alpha, repeats, int(classes.size % group_size) if group_size <= classes.size
                         else int(classes.size), _table(per_group, ks, alpha), per_group, seed,
                         query_sample, every_k if keep_cutoffs else None)


def group_sample_seed(seed: int, repeat: int, group: int) -> int:
    """The seed of group ``group``'s query sample in partition ``repeat`` (``query_sample``): one
    stream per (seed, repeat, group), independent of the others (NumPy's SeedSequence)."""
    return int(np.random.SeedSequence([seed, repeat, group]).generate_state(1)[0])


def sure_hits(loo_pass: PassResult, n_items: int) -> np.ndarray:
    """The items that are a hit at every cutoff in every group of whole classes: Recall@1 = 1 in
    ``loo_pass`` (a leave-one-out pass over these ``n_items`` items, every one a query and in the
    gallery, in float32), i.e. their first tie block holds positives only. A group keeps a query's
    whole class and drops other classes' items, so that block stays first and all positive (up to
    the rounding of a pair's score in another tile: a negative within one float32 step of the best
    positive; see :mod:`~analysis_core.engine.core`). Also for any subset of whole classes of the
    items (take the subset's rows). Nothing is sure when the pass cannot give Recall@1."""
    out = np.zeros(n_items, bool)
    if loo_pass.query_items.size != n_items:
        return out
    res = with_recall_at_1(loo_pass)
    if res is None:
        return out
    out[res.query_items] = res.values[:, res.columns.index("recall_at_1")] == 1.0
    return out


def _table(per_group: pd.DataFrame, ks: tuple[int, ...], alpha: float) -> pd.DataFrame:
    """:attr:`GroupedRecall.table` of the groups' recalls ``per_group`` at cutoffs ``ks``."""
    scored = per_group[per_group["recall"].notna()]
    k_of = scored["k"].to_numpy()
    out = []
    for k in ks:
        part = scored[k_of == k]
        by_rep = part.groupby("repeat")["recall"]
        means = by_rep.mean()
        sizes = by_rep.size()
        n_groups = int(sizes.min()) if len(part) else 0
        m = float(means.mean()) if len(means) else np.nan
        sd = se = np.nan
        if n_groups > 1:
            sds = by_rep.std(ddof=1)
            sd = float(sds.mean())
            se = float((sds / np.sqrt(sizes)).mean())
        observed = part.groupby("repeat")["n_observed"].sum()
        queries = part.groupby("repeat")["n_queries"].sum()
        out.append(dict(k=k, mean=m, sd=sd, se=se, ci_low=np.nan, ci_high=np.nan, n_groups=n_groups,
                        n_queries=int(queries.mean()) if len(queries) else 0,
                        n_observed=int(observed.mean()) if len(observed) else 0,
                        repeat_sd=float(means.std(ddof=1)) if len(means) > 1 else np.nan,
                        chance=float(part["chance"].mean()) if len(part) else np.nan))
    return _intervals(pd.DataFrame(out), alpha)


INTERVAL_TEXT = ("Student t over groups (G - 1 df); where n min(p, 1 - p) < 10 (n queries), Korn-Graubard: "
                 "Clopper-Pearson at the effective number of queries min(n, p(1-p)/se^2), G - 1 df")


def _intervals(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``table`` with ci_low, ci_high at level ``alpha``: ``mean +- t_{1-alpha/2, G-1} se`` (``se``
    from the spread over groups), clipped to [0, 1]; but where the queries hold few misses (or
    few hits), ``n min(p, 1 - p) < 10`` (``n``: the queries observed; the rule of
    :func:`~analysis_core.stats.sampling.mean_interval`), Korn & Graubard's interval for a
    proportion from a clustered sample (E. L. Korn and B. I. Graubard, "Confidence intervals for
    proportions with small expected number of positive counts estimated from survey data", Survey
    Methodology 24(2), 1998), the clusters being the groups: Clopper-Pearson at the effective
    sample size ``min(n, p(1-p)/se^2)``, adjusted to G - 1 degrees of freedom. Near the ceiling
    the groups' values are skewed and often all 1 (se ~ 0): there the t interval covered
    0.85-0.885 at the 0.95 level, this one 0.96-1.0; in the middle the t interval holds its level
    and Korn-Graubard would overcover with 3 groups (``benchmarks/calibration_grouped.py``,
    docs/statistics.md). NaN with fewer than two groups."""
    from .sampling import korn_graubard

    table = table.copy()
    for i, r in table.iterrows():
        G, p, se, n = int(r["n_groups"]), float(r["mean"]), float(r["se"]), int(r["n_observed"])
        if G < 2 or n < 2:
            continue
        if n * min(p, 1 - p) < 10:
            iv = korn_graubard(p, se**2, G - 1, n, alpha)
            low, high = iv["low"], iv["high"]
        else:
            half = t_quantile(1 - alpha / 2, G - 1) * se
            low, high = max(0.0, p - half), min(1.0, p + half)
        table.loc[i, ["ci_low", "ci_high"]] = low, high
    return table


def split_group_size(class_counts, requested: int = 10) -> int:
    """One group size S for grouped recall on every split, comparable across them: ``requested``,
    at most the smallest class count of a split where retrieval is possible (two classes or
    more), at least 2 (the default S = min(10, smallest class count) of the definition)."""
    usable = [int(c) for c in class_counts if c >= 2]
    return max(2, min(requested, *usable)) if usable else 2


def chance_hit_rate(class_sizes: np.ndarray, k: int) -> float:
    """Expected Recall@K (hit rate) of a random ranking, leave-one-out, over the queries of items in
    classes of these sizes: a query of a class of n items has R = n - 1 positives among the N - 1
    other items, and misses all of them in its top K with the hypergeometric probability
    ``C(N - 1 - R, K) / C(N - 1, K)``. Queries without a positive (n = 1) are not scored."""
    from scipy.special import gammaln

    sizes = np.asarray(class_sizes, np.int64)
    N = int(sizes.sum())
    R = sizes[sizes > 1] - 1
    if R.size == 0:
        return float("nan")
    kk = min(k, N - 1)
    neg = N - 1 - R

    def log_comb(a, b):
        return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)

    miss = np.where(neg >= kk, np.exp(log_comb(neg, kk) - log_comb(N - 1, kk)), 0.0)
    hit = 1.0 - miss
    return float(np.sum(hit * (R + 1)) / np.sum(R + 1))  # each class contributes its n = R + 1 queries
