"""The variability statistics in one call: what the report and the Statistics page both run.

:func:`analyse` takes the long per-query table (:func:`~.variability.ap_frame`) and returns one
:class:`VariabilityAnalysis`: one-way tests over groups (classes, or method x class pairs), the
post-hoc pairwise comparisons (capped at :data:`~.posthoc.MAX_POSTHOC_GROUPS` groups — the cap is
stated in ``warnings``, never silent), and, with several methods, two-way ANOVA, the mixed model
and the paired tests, which always use every query.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from .method_tests import MixedModelResult, metric_paired_tests, mixed_model, two_way_anova
from .posthoc import PostHocResult, TooManyGroups, games_howell, tukey_hsd
from .variability import OneWayResult, balanced_subsample, one_way

POSTHOC = {"tukey": tukey_hsd, "games-howell": games_howell}


@dataclass(frozen=True)
class VariabilityAnalysis:
    """Every variability statistic of one per-query table. ``posthoc`` maps ``"tukey"`` /
    ``"games-howell"`` to its result (absent when skipped: see ``warnings``); the method
    comparisons are None with one method. ``paired`` has one row per (metric, pair of methods):
    AP only, or every metric of the ``metrics`` table given to :func:`analyse`."""

    alpha: float
    data: pd.DataFrame  # the table analysed (after the balanced subsample, if one was asked for)
    n_groups: int
    one_way: OneWayResult
    posthoc: dict[str, PostHocResult]
    two_way: pd.DataFrame | None
    mixed: MixedModelResult | None
    paired: pd.DataFrame | None
    warnings: tuple[str, ...]

    def summary_frame(self) -> pd.DataFrame:
        """One row per omnibus test and per method comparison: analysis, test/term, statistic,
        p_value, note."""
        rows = [dict(analysis="one-way", test=r.test, statistic=r.statistic, p_value=r.p_value, note=r.note)
                for r in self.one_way.tests.itertuples()]
        if self.two_way is not None:
            rows += [dict(analysis="two-way ANOVA", test=r.term, statistic=r.F, p_value=r.p_value, note=r.note)
                     for r in self.two_way.itertuples() if r.term != "Residual"]
        if self.mixed is not None:
            rows += [dict(analysis="mixed model", test=r.term, statistic=r.z, p_value=r.p_value, note=r.note)
                     for r in self.mixed.table.itertuples() if r.term != "Intercept"]
        if self.paired is not None:
            rows += [dict(analysis=f"paired {r.metric}: {r.test} (Holm)", test=f"{r.method_a} - {r.method_b}",
                          statistic=r.mean_diff, p_value=r.p_holm, note=r.note)
                     for r in self.paired.itertuples()]
        return pd.DataFrame(rows, columns=["analysis", "test", "statistic", "p_value", "note"])


def analyse(ap: pd.DataFrame, alpha: float = 0.05, *, posthoc: tuple[str, ...] = ("tukey", "games-howell"),
            per_class_n: int | None = None, metrics: pd.DataFrame | None = None, n_permutations: int = 10_000,
            seed: int = 0, value: str = "ap") -> VariabilityAnalysis:
    """Run the variability statistics on ``ap`` (columns method, query, label, ``value``).

    ``per_class_n`` first draws a balanced subsample of that many queries per class (seeded, the
    same queries for every method). ``posthoc`` chooses the pairwise procedures. ``metrics`` (the
    long table of :func:`~.variability.metric_frame`) gives every metric its paired test between
    methods; without it only ``value`` is tested. Never raises on
    degenerate data: undefined statistics carry their reason in their ``note`` and in
    ``warnings``.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    unknown = set(posthoc) - set(POSTHOC)
    if unknown:
        raise ValueError(f"unknown post-hoc procedure(s) {sorted(unknown)}; use {sorted(POSTHOC)}")
    warn: list[str] = []
    if per_class_n:
        ap = balanced_subsample(ap, per_class_n, seed)
        warn.append(f"statistics use a balanced subsample of {per_class_n} queries per class (seed {seed}).")
    ow = one_way(ap, value)
    warn += ow.warnings
    if ow.advice:
        warn.append(ow.advice)
    post: dict[str, PostHocResult] = {}
    for name in posthoc:
        try:
            res = POSTHOC[name](ap, alpha, value)
        except TooManyGroups as exc:
            warn.append(f"pairwise comparisons ({name}) skipped: {exc}")
            continue
        post[name] = res
        warn += [w for w in res.warnings if w not in warn]
    two = mm = pt = None
    if ap["method"].nunique() > 1:
        two = two_way_anova(ap, value, warn)
        mm = mixed_model(ap, alpha, value)
        warn += mm.warnings
        if metrics is None:
            metrics = ap[["method", "query", "label"]].assign(metric="map" if value == "ap" else value,
                                                              value=ap[value])
        elif per_class_n:
            metrics = metrics[metrics["query"].isin(ap["query"])]
        pt = metric_paired_tests(metrics, alpha, n_permutations, seed)
    else:
        warn.append("one method: two-way ANOVA, mixed model and paired tests need at least two.")
    return VariabilityAnalysis(alpha, ap, len(ow.groups), ow, post, two, mm, pt, tuple(dict.fromkeys(warn)))
