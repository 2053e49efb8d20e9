"""Measures that do not drift with the number of classes, and what drifts without them.

* **Grouped Recall@K** (Zhdanov & Karpukhin): classes are partitioned at random (seeded) into
  groups of S; Recall@K is computed on each group's items only and averaged over groups:
  ``GR@K_S = (1/G) sum_g R@K(D_g)``. Each group is a retrieval problem with S classes whatever the
  dataset's size, so the value depends on S, not on the number of classes; groups are independent,
  so ``CI = mean +- t_{1-alpha/2, G-1} sd_groups / sqrt(G)``, clipped to [0, 1] (Student t rather
  than the paper's normal approximation: with 3-5 groups a z interval undercovers). Beside it, the
  chance level: the expected Recall@K of a random ranking within groups of these class sizes.
  Classes left over (``n_classes mod S``) are dropped and counted. Recall@K within a group comes from the same
  tie-aware engine as everything else (expected hit rate over tie orders).
* **Class-count sweep**: sample C classes (seeded, several repeats), recompute Recall@1, MAP@R, mAP,
  grouped Recall@1 and JSD on that subset: Recall@1 and MAP@R fall as C grows; grouped Recall@1
  stays within its interval; JSD moves little (H. Oi, R. Kawakami and T. Naemura, "Analysis of
  Evaluation Metrics with the Distance between Positive Pairs and Negative Pairs in Deep Metric
  Learning").
* **Generalization gap**: metrics per split and their train - other differences; the grouped
  recall difference gets an interval ``+- z sqrt(se_1^2 + se_2^2)`` (independent splits).
* **Error-vs-reject curve** (ERC): reject the least confident fraction x of the queries; the error
  (1 - P@1, or 1 - AP) of the rest, against x; its area; the oracle curve rejecting by true error;
  Spearman's correlation of confidence with AP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..engine.core import run_pass
from .histograms import jensen_shannon


@dataclass(frozen=True)
class GroupedRecall:
    """``table``: one row per k with mean, sd (over groups), ci_low, ci_high, n_groups,
    repeat_sd (spread of the partition means over repeats). ``per_group``: repeat, group, k,
    recall, n_queries."""

    group_size: int
    alpha: float
    repeats: int
    n_dropped_classes: int
    table: pd.DataFrame
    per_group: pd.DataFrame

    def summary_dict(self) -> dict:
        """The ``grouped_recall_at_k`` block of ``summary.json`` (NaN -> None)."""
        def clean(v: float):
            return None if v is None or not math.isfinite(v) else float(v)

        return {"group_size": self.group_size, "n_groups": int(self.table["n_groups"].iloc[0]),
                "n_dropped_classes": self.n_dropped_classes, "repeats": self.repeats, "alpha": self.alpha,
                "interval": "Student t over groups (G - 1 df), clipped to [0, 1]",
                "k": {str(int(r.k)): {"mean": clean(r.mean), "ci_low": clean(r.ci_low), "ci_high": clean(r.ci_high),
                                      "chance": clean(r.chance)}
                      for r in self.table.itertuples()}}


def _partitions(classes: np.ndarray, group_size: int, seed: int, repeats: int):
    for r in range(repeats):
        perm = np.random.default_rng([seed, r]).permutation(classes)
        n_groups = perm.size // group_size
        yield r, perm[: n_groups * group_size].reshape(n_groups, group_size)


def grouped_recall(X: np.ndarray, codes: np.ndarray, *, group_size: int = 10, ks: tuple[int, ...] = (1,),
                   similarity: str = "cosine", seed: int = 0, repeats: int = 1, alpha: float = 0.05) -> GroupedRecall:
    """Grouped Recall@K over random partitions of the classes into groups of ``group_size``.

    With ``repeats > 1`` every repeat is a new partition (seeds ``[seed, r]``); the reported mean
    is the mean of the partition means, the interval uses the average single-partition standard
    error, and ``repeat_sd`` reports how much the partition itself moves the value.
    """
    codes = np.asarray(codes)
    classes = np.unique(codes)
    if group_size < 1:
        raise ValueError("group_size must be at least 1")
    ks = tuple(sorted({int(k) for k in ks}))
    rows = []
    for r, groups in _partitions(classes, group_size, seed, repeats):
        for g, members in enumerate(groups):
            idx = np.nonzero(np.isin(codes, members))[0]
            res = run_pass(X[idx], codes[idx], similarity=similarity, ks=ks, n_recall=2, n_threads=1)
            scored = res.values[:, 0] > 0
            sizes = np.unique(codes[idx], return_counts=True)[1]
            for k in ks:
                col = res.columns.index(f"recall_at_{k}")
                v = res.values[scored, col]
                rows.append(dict(repeat=r, group=g, k=k, recall=math.fsum(v.tolist()) / v.size if v.size else np.nan,
                                 n_queries=int(scored.sum()), chance=chance_hit_rate(sizes, k)))
    per_group = pd.DataFrame(rows, columns=["repeat", "group", "k", "recall", "n_queries", "chance"])
    out = []
    for k in ks:
        part = per_group[(per_group["k"] == k)].dropna(subset=["recall"])
        by_rep = part.groupby("repeat")["recall"]
        means = by_rep.mean()
        n_groups = int(by_rep.size().min()) if len(part) else 0
        m = float(means.mean()) if len(means) else np.nan
        lo = hi = sd = np.nan
        if n_groups > 1:
            sd = float(by_rep.std(ddof=1).mean())
            se = float((by_rep.std(ddof=1) / np.sqrt(by_rep.size())).mean())
            half = stats.t.ppf(1 - alpha / 2, n_groups - 1) * se
            lo, hi = max(0.0, m - half), min(1.0, m + half)
        out.append(dict(k=k, mean=m, sd=sd, ci_low=lo, ci_high=hi, n_groups=n_groups,
                        repeat_sd=float(means.std(ddof=1)) if len(means) > 1 else np.nan,
                        chance=float(part["chance"].mean()) if len(part) else np.nan))
    return GroupedRecall(group_size, alpha, repeats, int(classes.size % group_size) if group_size <= classes.size
                         else int(classes.size), pd.DataFrame(out), per_group)


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


def _fmean(v: np.ndarray) -> float:
    return math.fsum(v.tolist()) / v.size if v.size else float("nan")


def sample_classes(codes: np.ndarray, n_classes: int, seed: int = 0) -> np.ndarray:
    """Row indices of the items of ``n_classes`` classes drawn at random (seeded)."""
    classes = np.unique(codes)
    pick = np.random.default_rng(seed).choice(classes, min(n_classes, classes.size), replace=False)
    return np.nonzero(np.isin(codes, pick))[0]


def default_class_counts(n_classes: int, lowest: int = 10, points: int = 8) -> list[int]:
    """Log-spaced class counts from ``lowest`` up to all classes."""
    lo = min(lowest, n_classes)
    return sorted({int(round(c)) for c in np.geomspace(lo, n_classes, points)})


def class_count_sweep(X: np.ndarray, codes: np.ndarray, *, counts: list[int] | None = None, repeats: int = 3,
                      seed: int = 0, group_size: int = 10, similarity: str = "cosine") -> pd.DataFrame:
    """For each class count C (and repeat): the metrics on C sampled classes. Columns:
    n_classes, repeat, n_items, recall_at_1, map_at_r, map, grouped_recall_at_1, jsd."""
    codes = np.asarray(codes)
    n_all = np.unique(codes).size
    counts = counts or default_class_counts(n_all, lowest=max(2, group_size))
    rows = []
    for c in counts:
        for r in range(repeats if c < n_all else 1):
            idx = sample_classes(codes, c, seed=seed * 1_000_003 + 7919 * r + c)
            res = run_pass(X[idx], codes[idx], similarity=similarity, ks=(1,), n_recall=2)
            scored = res.values[:, 0] > 0
            col = {name: res.values[scored, i] for i, name in enumerate(res.columns)}
            gr = grouped_recall(X[idx], codes[idx], group_size=group_size, ks=(1,), similarity=similarity,
                                seed=seed + r).table.iloc[0]
            rows.append(dict(n_classes=c, repeat=r, n_items=idx.size, recall_at_1=_fmean(col["recall_at_1"]),
                             map_at_r=_fmean(col["map_at_r"]), map=_fmean(col["ap"]), grouped_recall_at_1=gr["mean"],
                             grouped_ci_low=gr["ci_low"], grouped_ci_high=gr["ci_high"],
                             jsd=jensen_shannon(res.hist_pos, res.hist_neg)))
    return pd.DataFrame(rows)


def generalization_gap(per_split: dict[str, dict], grouped: dict[str, GroupedRecall], reference: str,
                       alpha: float = 0.05) -> pd.DataFrame:
    """Rows per metric: each split's value and ``reference - split`` for every other split.

    ``per_split[split]`` holds recall_at_1, map_at_r, map, jsd, mean_pos_similarity;
    ``grouped[split]`` the grouped recall of that split (its interval feeds the difference's).
    """
    z = stats.norm.ppf(1 - alpha / 2)
    rows = []
    others = [s for s in per_split if s != reference]
    def value(metric: str, s: str) -> float:
        if metric == "grouped_recall_at_1":
            return float(grouped[s].table.iloc[0]["mean"])
        return float(per_split[s][metric])

    for metric in ("recall_at_1", "grouped_recall_at_1", "map_at_r", "map", "jsd", "mean_pos_similarity"):
        row = {"metric": metric, **{s: value(metric, s) for s in per_split}}
        for o in others:
            gap = value(metric, reference) - value(metric, o)
            row[f"gap_{reference}_minus_{o}"] = gap
            if metric == "grouped_recall_at_1":
                se = [(grouped[s].table.iloc[0]["ci_high"] - grouped[s].table.iloc[0]["mean"]) / z
                      for s in (reference, o)]
                half = z * math.sqrt(se[0] ** 2 + se[1] ** 2)
                row[f"gap_{reference}_minus_{o}_ci_low"] = gap - half
                row[f"gap_{reference}_minus_{o}_ci_high"] = gap + half
        rows.append(row)
    return pd.DataFrame(rows)


def split_generalization(split_evals: dict, method: str, reference: str, alpha: float = 0.05) -> pd.DataFrame:
    """:func:`generalization_gap` of one method from per-split evaluations (split -> Evaluation
    evaluated with a group size, so each carries its grouped recall)."""
    per = {}
    for sp, e in split_evals.items():
        s = e.method_summary(method)
        per[sp] = s | {"recall_at_1": s["recall_at_k"]["1"], "map": s["map"]["expected"]}
    return generalization_gap(per, {sp: e.grouped[method] for sp, e in split_evals.items()}, reference, alpha)


@dataclass(frozen=True)
class ErrorRejectCurve:
    """``curve``: fraction_rejected, n_kept, error, oracle_error, random_error. ``auc`` /
    ``oracle_auc``: the areas under them over the rejected fraction (trapezoid). ``spearman``:
    rank correlation of confidence with AP, and its p-value (NaN when undefined: ``note`` says
    why)."""

    curve: pd.DataFrame
    auc: float
    oracle_auc: float
    spearman: float
    spearman_p: float
    error_kind: str
    note: str = ""


def error_reject_curve(confidence: np.ndarray, ap: np.ndarray, p_at_1: np.ndarray, error: str = "p@1",
                       n_points: int = 101) -> ErrorRejectCurve:
    """Error of the kept queries after rejecting the least confident fraction x (x on a grid of
    ``n_points`` in [0, 1), keeping at least one query); the oracle rejects the largest errors
    first; random rejection keeps the overall error. Queries of equal confidence are rejected in
    random order, so where the cut falls inside a run of equal confidences the curve is the
    **expected** error over those orders: the curve depends on the confidences, never on row
    order (a constant confidence gives a flat curve at the overall error)."""
    confidence = np.asarray(confidence, np.float64)
    e = 1.0 - (np.asarray(p_at_1, np.float64) if error == "p@1" else np.asarray(ap, np.float64))
    n = e.size
    if n == 0:
        empty = pd.DataFrame(columns=["fraction_rejected", "n_kept", "error", "oracle_error", "random_error"])
        return ErrorRejectCurve(empty, math.nan, math.nan, math.nan, math.nan, error,
                                "undefined: no scored query (every query is lone).")
    order = np.argsort(-confidence, kind="stable")  # most confident first
    c, es = confidence[order], e[order]
    starts = np.r_[True, c[1:] != c[:-1]]
    block = np.cumsum(starts) - 1
    first = np.nonzero(starts)[0]
    block_mean = np.add.reduceat(es, first) / np.diff(np.r_[first, n])
    cum_before = np.r_[0.0, np.cumsum(es)][first]  # error of the queries ahead of each block
    kept = np.arange(1, n + 1)
    expected_sum = cum_before[block] + (kept - first[block]) * block_mean[block]
    oracle = np.cumsum(np.sort(e)) / kept  # smallest errors kept first
    fractions = np.linspace(0, 1, n_points, endpoint=False)
    n_keep = np.maximum(n - np.floor(fractions * n).astype(int), 1)
    curve = pd.DataFrame({"fraction_rejected": fractions, "n_kept": n_keep,
                          "error": expected_sum[n_keep - 1] / n_keep, "oracle_error": oracle[n_keep - 1],
                          "random_error": float(e.mean()) if n else np.nan})
    note = ""
    if n and np.ptp(confidence) == 0:
        note = "Spearman undefined: the confidence is constant; the curve is flat at the overall error."
    elif n < 3:
        note = f"Spearman undefined: {n} queries."
    elif np.ptp(ap) == 0:
        note = "Spearman undefined: AP is the same for every query."
    rho, p = (math.nan, math.nan) if note else stats.spearmanr(confidence, ap)
    return ErrorRejectCurve(curve, float(np.trapezoid(curve["error"], fractions)),
                            float(np.trapezoid(curve["oracle_error"], fractions)), float(rho), float(p), error, note)
