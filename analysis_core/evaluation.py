"""Evaluate a :class:`~analysis_core.io.Dataset`: one engine pass per method, summaries, tables."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .design import Design
from .engine.core import PRECISIONS, PassResult, Progress, run_pass
from .engine.cutoff_plan import CUTOFF_MB, CUTOFF_RANKS
from .errors import InputError
from .io import Dataset, validate
from .metrics.registry import put_key, query_columns
from .numerics import fsum_mean
from .options import check_alpha, check_int, check_ks
from .stats.histograms import jensen_shannon
from .stats.sampling import (
    BOOTSTRAP_REPS,
    PAIR_METHOD_TEXT,
    QuerySample,
    mean_interval,
    query_frame,
    ratio_interval,
    statistic_interval,
    stratified_sample,
)

if TYPE_CHECKING:
    import pandas as pd

    from .stats.class_jackknife import ClassJackknife, ClassReplicates

LONE_REASON = "lone query: no other item of its class in the gallery"
DEFAULT_KS = (1, 2, 4, 8)
DEFAULT_JACKKNIFE_GROUPS = 20  # the class jackknife's groups (stats.class_jackknife.DEFAULT_MAX_GROUPS)


#: why a retrieval problem has no metric at all (the command line, the report, the dashboard say it)
NO_POSITIVE = ("no query has a positive (a same-class item in its gallery): every retrieval metric is undefined "
               "(null).")


@dataclass(frozen=True, repr=False)
class Evaluation:
    """Results of evaluating every method of a dataset with the same settings.

    ``summary_frame()``: one row per method; ``to_dict()``: the ``summary.json`` document;
    ``per_query(method)``: one row per query.
    """

    dataset: Dataset
    similarity: str
    ks: tuple[int, ...]
    results: dict[str, PassResult]
    rows: np.ndarray  # input row indices evaluated (all rows, or one split's / the sampled classes')
    split: str | None = None
    grouped: dict | None = None  # method -> GroupedRecall, when a group size was given
    sampled_from_classes: int | None = None  # with max_classes: the class count sampled from
    query_sample: QuerySample | None = None  # with query sampling: the design (positions in rows)
    alpha: float = 0.05
    compute_notes: tuple[str, ...] = ()
    precision: str = "float32"  # the dtype similarities were computed in
    provenance: dict | None = None  # summary.json's provenance block (api.evaluate sets it)
    # the methods' (family, run, step); given as None, read from their names (__post_init__)
    design: Design = None  # type: ignore[assignment]
    #: what :func:`evaluate` was given besides the data, the cutoffs and where it ran: how
    #: :meth:`with_ks` repeats the evaluation when the passes kept too few tie blocks
    settings: dict = field(default_factory=dict, repr=False, compare=False)
    _summaries: dict = field(default_factory=dict, init=False, repr=False, compare=False)
    #: what the cutoffs do not change (the class jackknife's replicates), shared with every
    #: evaluation derived from this one (:meth:`with_ks`, :meth:`at_alpha`, :meth:`with_design`,
    #: :meth:`with_grouped`)
    _ks_free: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "design", Design.of(self.design, list(self.results)))

    @property
    def methods(self) -> list[str]:
        return list(self.results)

    @property
    def items(self) -> Dataset:
        """The dataset restricted to the evaluated items (one split's, the sampled classes', or all)."""
        ds = self.dataset
        return ds if self.rows.size == ds.n_items else ds.subset(self.rows)

    def families(self, alpha: float | None = None, *, select_on: str | None = None, report_on: str | None = None,
                 select_metric: str = "map", n_permutations: int = 10_000, seed: int = 0):
        """Run-level results of this evaluation's design (family, run, step): per family the mean,
        sd and interval over runs of every summary metric, and family comparisons with the run as
        unit (:func:`analysis_core.stats.runs.run_analysis`; ``.summary``, ``.tests``,
        ``.values``, ``.curves``, ``.runs_needed(delta)``). ``select_on``/``report_on`` name splits
        of the data: each run's checkpoint is chosen on one and reported on the other (each split
        evaluated on its own, as the report does)."""
        from .stats.runs import run_analysis

        alpha = self.alpha if alpha is None else check_alpha(alpha)
        # the design is in the key: evaluations that differ in their design alone share this cache (with_design)
        key = ("runs", self.design.rows, alpha, select_on, report_on, select_metric, n_permutations, seed)
        if key not in self._summaries:
            evals: dict = {self.split or "all": self}
            if select_on is not None or report_on is not None:
                evals = {sp: self.within_split(sp) for sp in dict.fromkeys((select_on, report_on)) if sp is not None}
            self._summaries[key] = run_analysis(evals, self.design, alpha, select_on=select_on, report_on=report_on,
                                                select_metric=select_metric, n_permutations=n_permutations, seed=seed)
        return self._summaries[key]

    def family_tests(self, alpha: float | None = None, **options):
        """The family comparisons of :meth:`families` (``tables/family_tests.csv``)."""
        return self.families(alpha, **options).tests

    def within_split(self, split: str, group_size: int | None = None, seed: int = 0) -> Evaluation:
        """This evaluation's settings (methods, similarity, cutoffs, level, precision, design)
        applied within one split — queries and gallery inside it, Grouped Recall with
        ``group_size`` (``seed``) — computed once per split and arguments
        (:func:`analysis_core.splits.evaluate_splits` evaluates every split this way)."""
        if self.split == split and group_size is None:
            return self
        key = ("within-split", split, group_size, seed)
        if key not in self._summaries:
            self._summaries[key] = evaluate(self.dataset, similarity=self.similarity, ks=self.ks, split=split,
                                            methods=self.methods, group_size=group_size, seed=seed,
                                            alpha=self.alpha, precision=self.precision)
        return self._summaries[key].with_design(self.design)  # the pass is the design's whatever it is

    def with_design(self, design: Design | pd.DataFrame | str | None) -> Evaluation:
        """This evaluation with another design of its methods (a :class:`~analysis_core.design.Design`,
        a table or CSV path as :func:`evaluate` takes it; None: from their names), as if
        :func:`evaluate` had been given it. The passes do not depend on the design, so they and
        every summary computed so far are shared; the run-level results are kept per design."""
        return self._sharing(replace(self, design=Design.of(design, self.methods)), self._summaries)

    def _sharing(self, out: Evaluation, summaries: dict | None = None) -> Evaluation:
        """``out`` (derived from this evaluation) sharing its cutoff-free results and, when given,
        ``summaries`` (frozen: set in place)."""
        object.__setattr__(out, "_ks_free", self._ks_free)
        if summaries is not None:
            object.__setattr__(out, "_summaries", summaries)
        return out

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("split", self.split), ("query_sample", self.query_sample and
                        self.query_sample.n), ("sampled_from_classes", self.sampled_from_classes)) if v)
        return (f"Evaluation(source={self.dataset.source!r}, methods={self.methods}, n_items={self.rows.size}, "
                f"n_queries={self.n_queries() - self.n_lone_queries()}, similarity={self.similarity!r}{extra})")

    def _known(self, method: str) -> str:
        if method not in self.results:
            raise InputError(self.dataset.source, f"unknown method {method!r}.",
                             f"use one of {', '.join(map(repr, self.methods))}.")
        return method

    def loo_pass(self, method: str) -> PassResult | None:
        """The method's pass when it is the plain leave-one-out pass over the evaluated items in
        float32 (no roles, no query sample), else None: the pass of Grouped Recall's group of
        every class (:func:`~analysis_core.stats.grouped_recall.grouped_recall`'s ``loo_pass``)."""
        plain = self.dataset.role is None and self.query_sample is None and self.precision == "float32"
        return self.results[self._known(method)] if plain else None

    def n_queries(self) -> int:
        r = next(iter(self.results.values()))
        return int(r.query_items.size)

    def n_lone_queries(self) -> int:
        r = next(iter(self.results.values()))
        return int(np.sum(r.values[:, 0] == 0))

    def warnings(self) -> list[str]:
        """Results the evaluation leaves undefined, and why (the command line prints them)."""
        out = []
        if self.n_queries() == self.n_lone_queries():
            out.append(f"{NO_POSITIVE} Retrieval needs classes of at least two items.")
        # the most gallery items any query is ranked against: all of them for a query that is not
        # in the gallery (role 'query'), all but itself otherwise
        role = None if self.dataset.role is None else self.dataset.role[self.rows]
        n_gallery = self.rows.size if role is None else int(np.isin(role, ("gallery", "both")).sum())
        candidates = n_gallery - (0 if role is not None and (role == "query").any() else 1)
        over = [k for k in self.ks if k > candidates]
        if over and candidates > 0:
            out.append(f"K = {', '.join(map(str, over))} exceed(s) the {candidates} gallery items any query is "
                       "ranked against: Precision@K still divides by K (so it falls), and Recall@K is its value at "
                       f"K = {candidates}.")
        for m, r in self.results.items():
            if self.jsd_is_rough(m):
                n_bins = int(np.size(r.hist_pos))
                out.append(f"{m}: JSD from {int(r.n_pos_pairs):,} positive and {int(r.n_neg_pairs):,} negative pairs "
                           f"in {n_bins} bins: with so few pairs per bin the histograms look disjoint even where the "
                           "scores overlap (JSD is biased towards 1); read it with care, or compare the mean "
                           "positive and negative similarities.")
        for m in self.methods:
            note = self.collapse_note(m)
            if note:
                out.append(note)
        for m, g in (self.grouped or {}).items():
            n_groups = int(g.table["n_groups"].min()) if len(g.table) else 0
            if n_groups < 2:
                out.append(f"{m}: grouped recall undefined: groups of {g.group_size} classes make {n_groups} "
                           "group(s) with a positive, and its interval needs two; use a smaller group size.")
        return out

    def collapse_note(self, method: str) -> str | None:
        """A warning when ``method`` maps its items to few distinct vectors (a collapsed
        embedding, common early in training): to one, or to at most one per
        :data:`COLLAPSED_ITEMS_PER_VECTOR` items; else None. Vectors are counted as the engine
        scores them (cosine: after normalisation, so multiples of one vector are one)."""
        k = int(self.results[self._known(method)].n_unique_vectors)
        n = int(self.rows.size)
        if not (k < n and k <= max(1, n // COLLAPSED_ITEMS_PER_VECTOR)):
            return None
        how = " (after cosine normalisation)" if self.similarity == "cosine" else ""
        if k == 1:
            return (f"{method}: all {n:,} items map to 1 distinct vector{how}, a collapsed embedding: every "
                    "query's gallery is one tie, so every metric is that of a random ranking (its expectation "
                    "over the order of tied items).")
        return (f"{method}: all {n:,} items map to {k:,} distinct vectors{how}, a collapsed embedding: items that "
                "share a vector tie, and the metrics are expectations over the order of tied items (mAP- and mAP+ "
                "bound them).")

    def jsd_is_rough(self, method: str) -> bool:
        """Whether ``method``'s JSD rests on fewer than :data:`JSD_MIN_PAIRS_PER_BIN` pairs per
        histogram bin of the scarcer kind (then biased towards 1: two small samples of one
        distribution fill different bins)."""
        r = self.results[self._known(method)]
        n_pairs = min(int(r.n_pos_pairs), int(r.n_neg_pairs))
        return 0 < n_pairs < JSD_MIN_PAIRS_PER_BIN * int(np.size(r.hist_pos))

    def per_query_columns(self, method: str | None = None) -> dict[str, np.ndarray]:
        """Per-query table as ordered columns (one row per (method, query), sorted by method
        then ``query`` = the item's row index in the input). Lone queries have NaN metrics and
        the reason in ``excluded``."""
        parts: list[dict[str, np.ndarray]] = []
        ds = self.dataset
        if method is not None:
            self._known(method)
        for m, r in self.results.items():
            if method is not None and m != method:
                continue
            order = np.argsort(r.query_items, kind="stable")
            rows = self.rows[r.query_items[order]]
            cols: dict[str, np.ndarray] = {"method": np.full(rows.size, m, dtype=object), "query": rows,
                                           "label": ds.labels[rows]}
            for name, a in (("id", ds.ids), ("split", ds.split), ("confidence", ds.confidence_for(m))):
                if a is not None:
                    cols[name] = a[rows]
            vals = r.values[order]
            for i, c in enumerate(r.columns):
                cols[c] = vals[:, i].astype(np.int64) if c == "n_positives" else vals[:, i]
            cols["excluded"] = np.where(cols["n_positives"] == 0, LONE_REASON, "").astype(object)
            parts.append(cols)
        return {c: np.concatenate([p[c] for p in parts]) for c in parts[0]}

    def per_query(self, method: str | None = None):
        """:meth:`per_query_columns` as a pandas DataFrame (one method, or all when ``None``);
        an unknown method raises :class:`InputError` listing the known ones."""
        import pandas as pd

        return pd.DataFrame(self.per_query_columns(method))

    def pr_curves(self, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input row of each non-lone query, recall grid, curves) for one method."""
        r = self.results[self._known(method)]
        keep = r.values[:, 0] > 0
        return self.rows[r.query_items[keep]], r.recall_grid, r.pr_curves[keep]

    def class_query_counts(self) -> dict[str, int]:
        """Queries with a positive per class in the evaluated set (the sampling frame, when sampled)."""
        r = next(iter(self.results.values()))
        pos = self.query_sample.frame if self.query_sample is not None else r.query_items[r.values[:, 0] > 0]
        u, c = np.unique(self.dataset.labels[self.rows[pos]], return_counts=True)
        return dict(zip(u.tolist(), c.tolist(), strict=True))

    def method_summary(self, method: str, alpha: float | None = None) -> dict:
        """Means over the queries (exact), or with query sampling stratified estimates, their
        ``1 - alpha`` intervals under ``intervals`` (same keys; ``alpha`` defaults to the one
        ``evaluate`` was given: the level belongs to the accessor, and no pass depends on it) and
        the pair statistics of the sampled queries. Computed once per evaluation and level (pages
        and exports ask again); callers get a deep copy."""
        alpha = self.alpha if alpha is None else check_alpha(alpha)
        key = self._known(method) if alpha == self.alpha or self.query_sample is None else (method, alpha)
        if key not in self._summaries:
            self._summaries[key] = self._method_summary(method, alpha)
        out = copy.deepcopy(self._summaries[key])
        if self.grouped and method in self.grouped:
            out["grouped_recall_at_k"] = self.grouped[method].summary_dict()
        return out

    def class_jackknife(self, max_groups: int | None = None, seed: int | None = None,
                        progress: Progress | None = None, replicates: ClassReplicates | None = None) -> ClassJackknife:
        """The delete-a-group jackknife over classes of every per-query summary metric
        (:func:`analysis_core.stats.class_jackknife.class_jackknife`): the replicates behind every
        class-level interval and method comparison. ``max_groups`` (default: the evaluation's
        ``jackknife_groups``, else 20) and ``seed`` (default: the evaluation's) as
        :func:`evaluate` counted them in its passes: no pass; else one counting pass per method
        (:meth:`class_replicates`), run once. Kept for new cutoffs (:meth:`with_ks` up to 32 gives
        a view of them). ``replicates``: the :meth:`class_replicates` of an evaluation of the same
        data and settings at other cutoffs, used when they cover these."""
        from .stats.class_jackknife import class_jackknife

        max_groups, seed = self._jackknife_key(max_groups, seed)
        key = ("class-jackknife", max_groups, seed)
        if key not in self._summaries:
            if replicates is not None and replicates.covers(self.ks):
                self._ks_free.setdefault(key, replicates)
            self._summaries[key] = class_jackknife(self, replicates=self.class_replicates(max_groups, seed, progress))
        return self._summaries[key]

    def class_replicates(self, max_groups: int | None = None, seed: int | None = None,
                         progress: Progress | None = None) -> ClassReplicates:
        """What :meth:`class_jackknife` needs at any cutoffs up to 32
        (:class:`~analysis_core.stats.class_jackknife.ClassReplicates`): counted by the passes of
        :func:`evaluate` (for its ``jackknife_groups`` and ``seed``), else by a pass per method, run
        once and shared by every evaluation derived from this one (:meth:`with_ks`,
        :meth:`at_alpha`, :meth:`with_design`, :meth:`with_grouped`)."""
        from .stats.class_jackknife import class_replicates

        max_groups, seed = self._jackknife_key(max_groups, seed)
        key = ("class-jackknife", max_groups, seed)
        reps = self._ks_free.get(key)
        if reps is None or not reps.covers(self.ks):
            reps = self._ks_free[key] = class_replicates(self, max_groups=max_groups, seed=seed, progress=progress)
        return reps

    def _jackknife_key(self, max_groups: int | None, seed: int | None) -> tuple[int, int]:
        """(max_groups, seed) of a class jackknife, the evaluation's own where not given."""
        from .stats.class_jackknife import DEFAULT_MAX_GROUPS

        if max_groups is None:
            max_groups = self.settings.get("jackknife_groups") or DEFAULT_MAX_GROUPS
        return int(max_groups), int(self.settings.get("seed", 0) if seed is None else seed)

    def with_grouped(self, grouped: dict) -> Evaluation:
        """This evaluation with Grouped Recall results attached (``grouped``: method ->
        :class:`~analysis_core.stats.grouped_recall.GroupedRecall`), as if ``evaluate`` had been
        given the group size: the summaries computed so far are shared (they depend on the pass
        alone), so attaching another group size recomputes nothing."""
        return self._sharing(replace(self, grouped=grouped), self._summaries)

    def with_ks(self, ks: tuple[int, ...]) -> Evaluation:
        """This evaluation at cutoffs ``ks`` (Recall@K, P@k; 1 is always added): equal to
        ``evaluate(..., ks=ks)`` with the other settings unchanged. Each method's pass kept its
        queries' leading tie blocks (:mod:`analysis_core.engine.cutoffs`), so the cutoff columns
        are recomputed from them without a new pass for every k up to the rank they cover (at
        least 128 unless that exceeded the memory budget, ``CUTOFF_MB`` over all methods, and
        never below 32);
        beyond it, or when a pass kept none, the evaluation runs again. Grouped Recall@K, which
        runs its own passes over groups of classes, kept its groups' recalls at every cutoff up to
        32 (:meth:`~analysis_core.stats.grouped_recall.GroupedRecall.with_ks`); beyond, its passes
        run again."""
        from .engine.cutoffs import answers, with_cutoffs

        given = check_ks(ks)
        ks = tuple(sorted({1, *given}))
        if ks == self.ks:
            return self
        provenance = copy.deepcopy(self.provenance)
        if provenance is not None and "ks" in provenance.get("options", {}):
            provenance["options"]["ks"] = list(given)
        if not all(answers(r, ks) for r in self.results.values()):
            # the same items and settings: what the cutoffs do not change is shared all the same
            fresh = evaluate(self.dataset, ks=ks, **self.settings)
            self._ks_free.update(fresh._ks_free)  # its passes counted the replicates at these cutoffs too
            return self._sharing(replace(fresh, provenance=provenance,
                                         design=self.design))
        results = {m: with_cutoffs(r, ks) for m, r in self.results.items()}
        grouped = None
        if self.grouped is not None:
            from .stats.grouped_recall import grouped_recall, sure_hits

            sub = self.items
            grouped = {m: g.with_ks(ks) or grouped_recall(
                sub.embeddings[m], sub.label_codes, group_size=g.group_size, ks=ks, similarity=self.similarity,
                seed=g.seed, repeats=g.repeats, alpha=g.alpha, loo_pass=results[m] if self.loo_pass(m) is not None
                else None, keep_cutoffs=True,
                sure_hits=sure_hits(results[m], sub.n_items) if self.loo_pass(m) is not None else None,
                query_sample=g.query_sample)
                for m, g in self.grouped.items()}
        return self._sharing(replace(self, ks=ks, results=results, grouped=grouped, provenance=provenance))

    def at_alpha(self, alpha: float) -> Evaluation:
        """This evaluation at level ``alpha``: equal to ``evaluate(..., alpha=alpha)`` with the
        other settings unchanged. No pass depends on the level: the passes and what the cutoffs do
        not change (the class jackknife's replicates) are shared, Grouped Recall's intervals are
        recomputed from its groups (:meth:`~analysis_core.stats.grouped_recall.GroupedRecall.at_alpha`),
        the summaries at the new level on request."""
        alpha = check_alpha(alpha)
        if alpha == self.alpha:
            return self
        provenance = copy.deepcopy(self.provenance)
        if provenance is not None and "alpha" in provenance.get("options", {}):
            provenance["options"]["alpha"] = alpha
        grouped = None if self.grouped is None else {m: g.at_alpha(alpha) for m, g in self.grouped.items()}
        return self._sharing(replace(self, alpha=alpha, grouped=grouped, provenance=provenance,
                                     settings={**self.settings, "alpha": alpha}))

    def _method_summary(self, method: str, alpha: float) -> dict:
        r = self.results[method]
        keep = r.values[:, 0] > 0
        col = {c: r.values[keep, i] for i, c in enumerate(r.columns)}
        col["mixed_ties"] = (col["n_mixed_tie_blocks"] > 0).astype(np.float64)
        intervals: dict = {}
        st = None  # stratum of each scored query, with query sampling
        if self.query_sample is None:
            def mean(c: str, key: str) -> float:
                return fsum_mean(col[c])
        else:
            qs = self.query_sample
            st = qs.strata_of(r.query_items[keep])

            hits = {m.column for m in query_columns(self.ks) if m.kind == "hit"} | {"mixed_ties"}

            def mean(c: str, key: str) -> float:
                iv = mean_interval(col[c], st, qs, alpha, c in hits)
                intervals[key] = iv
                return iv["estimate"]
        out: dict = {}
        for metric in query_columns(self.ks):
            assert metric.column is not None  # query_columns: the metrics with a per-query column
            value = mean(metric.column, metric.name)
            for key in metric.keys:
                put_key(out, key, value)
        out |= {
            "jsd": jensen_shannon(r.hist_pos, r.hist_neg),
            "mean_pos_similarity": r.mean_pos_similarity,
            "mean_neg_similarity": r.mean_neg_similarity,
            "n_pos_pairs": r.n_pos_pairs,
            "n_neg_pairs": r.n_neg_pairs,
            "ties": {
                "share_queries_with_mixed_ties": mean("mixed_ties", "share_queries_with_mixed_ties"),
                "n_unique_vectors": r.n_unique_vectors,
            },
        }
        if self.query_sample is not None and r.query_hist is not None:
            self._pair_intervals(r, keep, st, out, intervals, alpha)
        if intervals:
            out["intervals"] = intervals
        return out

    def _pair_intervals(self, r: PassResult, keep: np.ndarray, st: np.ndarray | None, out: dict, intervals: dict,
                        alpha: float) -> None:
        """Pair statistics from the sampled queries' own pairs, with intervals (query sampling)."""
        qs = self.query_sample
        assert qs is not None and st is not None and r.query_hist is not None and r.query_pair_sums is not None
        h = r.query_hist[keep].astype(np.float64)  # (n, 2, bins): [negative, positive]
        sums = r.query_pair_sums[keep]
        counts = h.sum(axis=2)
        for key, j in (("mean_pos_similarity", 1), ("mean_neg_similarity", 0)):
            iv = ratio_interval(sums[:, j], counts[:, j], st, qs, alpha)
            intervals[key] = iv
            out[key] = iv["estimate"]
        nb = h.shape[2]
        iv = statistic_interval(lambda t: jensen_shannon(t[..., nb:], t[..., :nb]), h.reshape(h.shape[0], -1), st,
                                qs, alpha)
        intervals["jsd"] = iv
        out["jsd"] = iv["estimate"]

    def summary(self, alpha: float | None = None) -> dict:
        """Alias of :meth:`to_dict` (the name the CLI, report and dashboard use)."""
        return self.to_dict(alpha)

    def summary_frame(self, alpha: float | None = None):
        """The summary metrics as a DataFrame, one row per method (with a ``split`` column when
        one split was evaluated): ``map``, ``map_lower``, ``map_upper``, ``map_at_r``, ...,
        ``recall_at_<k>``, ``precision_at_<k>``, ``grouped_recall_at_<k>`` (with its interval as
        ``_low``/``_high``), pair statistics; with query sampling every estimate's ``1 - alpha``
        interval as ``<metric>_low`` / ``<metric>_high``."""
        import pandas as pd

        rows = []
        for m in self.results:
            row: dict[str, object] = {"method": m, **({"split": self.split} if self.split is not None else {})}
            row.update(_flatten_summary(self.method_summary(m, alpha)))
            rows.append(row)
        return pd.DataFrame(rows)

    def to_dict(self, alpha: float | None = None) -> dict:
        """The ``summary.json`` document (layout in docs/user-guide.md, "Command line"); keys are only ever added."""
        ds = self.dataset
        labels = ds.labels[self.rows]
        dims = {m: int(ds.embeddings[m].shape[1]) for m in self.results}
        return {
            "dataset": {
                "n_items": int(self.rows.size),
                "n_classes": int(np.unique(labels).size),
                "n_queries": self.n_queries() - self.n_lone_queries(),
                "n_lone_queries": self.n_lone_queries(),
                "dim": dims[self.methods[0]] if len(set(dims.values())) == 1 else dims,
                "similarity": self.similarity,
                "precision": self.precision,
                "source": ds.source,
                **({"split": self.split} if self.split is not None else {}),
                **({"sampled_from_classes": self.sampled_from_classes} if self.sampled_from_classes else {}),
                **({"query_sample": {**self.query_sample.describe(),
                                     "pair_statistics": PAIR_METHOD_TEXT.format(reps=BOOTSTRAP_REPS)}}
                   if self.query_sample is not None else {}),
            },
            "methods": {m: self.method_summary(m, alpha) for m in self.results},
            **({"provenance": self.provenance} if self.provenance is not None else {}),
        }


def _flatten_summary(s: dict) -> dict[str, float]:
    """One method's summary block as flat columns (see :meth:`Evaluation.summary_frame`)."""
    out: dict[str, float] = {"map": s["map"]["expected"], "map_lower": s["map"]["lower"],
                             "map_upper": s["map"]["upper"]}
    for key, v in s.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = v
        elif key in ("recall_at_k", "precision_at_k"):
            out.update({f"{key[:-2]}_{k}": x for k, x in v.items()})
        elif key == "ties":
            out.update(v)
        elif key == "grouped_recall_at_k":
            for k, g in v["k"].items():
                out[f"grouped_recall_at_{k}"] = g["mean"]
                out[f"grouped_recall_at_{k}_low"] = g["ci_low"]
                out[f"grouped_recall_at_{k}_high"] = g["ci_high"]
    for key, iv in s.get("intervals", {}).items():
        out[f"{key}_low"] = iv["low"]
        out[f"{key}_high"] = iv["high"]
    return out


#: an embedding with at most one distinct vector per this many items (or a single one) is
#: reported as collapsed (:meth:`Evaluation.collapse_note`)
COLLAPSED_ITEMS_PER_VECTOR = 100

#: below this many pairs per histogram bin (of the scarcer kind) JSD is flagged as biased upwards:
#: the empirical histograms of two samples from one distribution then differ by chance
JSD_MIN_PAIRS_PER_BIN = 10


def evaluate(ds: Dataset, *, similarity: str = "cosine", ks: tuple[int, ...] = DEFAULT_KS,
             n_recall: int = 11, interpolated: bool = False, n_bins: int = 200,
             block_size: int = 512, n_threads: int | None = None, split: str | None = None,
             methods: list[str] | None = None, group_size: int | None = None, group_repeats: int = 1,
             max_classes: int | None = None, seed: int = 0, alpha: float = 0.05,
             query_sample: int | None = None, compute=None, progress: Progress | None = None,
             precision: str = "float32", design=None, jackknife_groups: int | None = DEFAULT_JACKKNIFE_GROUPS
             ) -> Evaluation:
    """Evaluate every method (or ``methods``) of ``ds``; with ``split``, within that split only.

    Leave-one-out unless the dataset has a ``role`` column. P@1 is always computed (k = 1 is
    added to ``ks``). ``n_recall`` is the number N_P of recall grid points of the PR curves.
    ``group_size`` adds Grouped Recall@K (each k of ``ks``; ``group_repeats`` partitions, ``seed``,
    ``alpha``); ``max_classes`` evaluates ``max_classes`` classes drawn at random (``seed``).
    ``query_sample`` evaluates that many queries (a stratified sample, ``seed``) against the whole
    gallery; every per-query mean then comes with a ``1 - alpha`` interval
    (:mod:`analysis_core.stats.sampling`), and Grouped Recall ranks at most that many of each
    group's queries that can miss (estimated per group; its interval over groups carries that
    sampling too). ``compute``: where the passes run (``None``: this
    process; a :class:`~analysis_core.engine.distributed.DaskCompute`: a Dask cluster; same results).
    ``precision``: ``"float32"`` (default) or ``"float64"``, the dtype similarities are computed and
    compared in; float64 keeps near-equal scores of float64 embeddings from being tied by float32
    rounding (float32 embeddings are upcast exactly; see :func:`analysis_core.engine.core.run_pass`).
    ``design``: the methods' (family, run, step) — a :class:`~analysis_core.design.Design`, a
    DataFrame or CSV path with columns ``method, family, run, step`` — or None: read from the
    method names (:mod:`analysis_core.design`).
    ``jackknife_groups``: the passes also count what the class jackknife needs
    (:meth:`Evaluation.class_jackknife` at ``max_groups = jackknife_groups`` and ``seed``: its
    replicates without a pass more, :mod:`analysis_core.engine.replicates`); None: they do not
    (the class jackknife then runs a pass per method when asked for).
    """
    validate(ds, similarity)
    if precision not in PRECISIONS:
        raise InputError("settings", f"unknown precision '{precision}'.", f"use one of {', '.join(PRECISIONS)}.")
    ks = tuple(sorted({1, *check_ks(ks)}))
    n_recall = check_int(n_recall, "n_recall (points of the recall grid)", 2, maximum=10_001)
    n_bins = check_int(n_bins, "n_bins (similarity histogram bins)", 1, maximum=10**6)
    block_size = check_int(block_size, "block_size", 1)
    n_threads = check_int(n_threads, "n_threads", 1, none=True)
    group_size = check_int(group_size, "group_size (classes per group)", 2, none=True)
    group_repeats = check_int(group_repeats, "group_repeats", 1)
    max_classes = check_int(max_classes, "max_classes", 2, none=True)
    query_sample = check_int(query_sample, "query_sample", 2, none=True)
    seed = check_int(seed, "seed", 0, maximum=2**128)  # numpy's SeedSequence takes any size
    jackknife_groups = check_int(jackknife_groups, "jackknife_groups (jackknife groups of classes)", 2, none=True)
    alpha = check_alpha(alpha)
    rows = np.arange(ds.n_items)
    if split is not None:
        if ds.split is None:
            raise InputError(ds.source, f"split '{split}' asked for, but the data has no 'split' column.",
                             "add a split column or leave out the split option.")
        known = sorted(set(ds.split.tolist()))
        if split not in known:
            raise InputError(ds.source, f"unknown split '{split}'.", f"use one of {known}.")
        rows = np.nonzero(ds.split == split)[0]
    names = methods or ds.methods
    unknown = [m for m in names if m not in ds.embeddings]
    if unknown:
        raise InputError(ds.source, f"unknown method(s) {unknown}.", f"use some of {ds.methods}.")
    sampled_from = None
    if max_classes is not None:
        from .stats.class_sweep import sample_classes
        sampled_from = int(np.unique(ds.label_codes[rows]).size)
        rows = rows[np.sort(sample_classes(ds.label_codes[rows], max_classes, seed))]
    sub = ds if rows.size == ds.n_items else ds.subset(rows, names)  # copies of the methods evaluated
    if sub is not ds:
        try:
            validate(sub, similarity)
        except InputError as exc:
            if split is None:
                raise
            raise InputError(f"{ds.source} [split '{split}']", exc.problem,
                             "evaluate another split, or give this split items of two classes.") from exc
    isq = isg = None
    if sub.role is not None:
        isq = np.isin(sub.role, ("query", "both"))
        isg = np.isin(sub.role, ("gallery", "both"))
    qs = None
    if query_sample is not None:
        qs, isq = _sample_queries(sub, isq, isg, query_sample, seed)
        if isg is None:
            isg = np.ones(sub.n_items, bool)
    design = Design.of(design, names)  # a bad design table fails before the passes
    settings = {"similarity": similarity, "n_recall": n_recall, "interpolated": interpolated, "n_bins": n_bins,
                "block_size": block_size, "n_threads": n_threads, "split": split, "methods": methods,
                "group_size": group_size, "group_repeats": group_repeats, "max_classes": max_classes, "seed": seed,
                "alpha": alpha, "query_sample": query_sample, "precision": precision, "design": design,
                "jackknife_groups": jackknife_groups}
    plan = None
    if jackknife_groups is not None and qs is None:
        from .stats.class_jackknife import replicate_plan
        plan = replicate_plan(sub.label_codes, isq, isg, jackknife_groups, seed)
    results = {}
    for m in names:
        stage_progress = None
        if progress is not None:
            def stage_progress(d: int, t: int, stage: str, _m: str = m) -> None:
                progress(d, t, f"{_m}: {stage}")
        results[m] = run_pass(sub.embeddings[m], sub.label_codes, is_query=isq, is_gallery=isg,
                              similarity=similarity, ks=ks, n_recall=n_recall, interpolated=interpolated,
                              n_bins=n_bins, block_size=block_size, n_threads=n_threads, progress=stage_progress,
                              compute=compute, per_query_pairs=qs is not None, precision=precision,
                              cutoff_ranks=CUTOFF_RANKS, cutoff_mb=CUTOFF_MB / len(names),
                              **(plan.pass_options() if plan is not None and plan.groups else {}))
    grouped = None
    if group_size is not None:
        from .stats.grouped_recall import grouped_recall, sure_hits
        plain = isq is None and isg is None and precision == "float32"  # the pass of a group of every class
        grouped = {m: grouped_recall(sub.embeddings[m], sub.label_codes, group_size=group_size, ks=ks,
                                     similarity=similarity, seed=seed, repeats=group_repeats, alpha=alpha,
                                     loo_pass=results[m] if plain else None, keep_cutoffs=True,
                                     sure_hits=sure_hits(results[m], sub.n_items) if plain else None,
                                     query_sample=query_sample)
                   for m in names}
    ev = Evaluation(dataset=ds, similarity=similarity, ks=ks, results=results, rows=rows, split=split,
                    grouped=grouped, sampled_from_classes=sampled_from, query_sample=qs, alpha=alpha,
                    compute_notes=tuple(getattr(compute, "notes", ())), precision=precision, design=design,
                    settings=settings)
    if plan is not None:
        ev._ks_free[("class-jackknife", jackknife_groups, seed)] = plan.replicates(results)
    return ev


def _sample_queries(sub: Dataset, isq: np.ndarray | None, isg: np.ndarray | None, n: int,
                    seed: int) -> tuple[QuerySample, np.ndarray]:
    """The stratified query sample of ``sub`` and the matching query mask."""
    codes = sub.label_codes
    frame = query_frame(codes, isq, isg)
    if frame.size < 3:
        raise InputError("settings", f"a query sample of {n}, but only {frame.size} queries have a positive "
                         "(a same-class item in the gallery).", "leave sampling out: the exact result is cheap here.")
    if not 2 <= n < frame.size:
        raise InputError("settings", f"a query sample of {n} from {frame.size} queries with a positive.",
                         f"use a sample size from 2 to {frame.size - 1}, or leave sampling out for the exact "
                         "result.")
    qs = stratified_sample(codes, frame, n, seed)
    mask = np.zeros(sub.n_items, bool)
    mask[qs.chosen] = True
    return qs, mask
