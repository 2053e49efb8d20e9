"""Error-vs-reject curve (ERC): reject the least confident fraction x of the queries; the error
(1 - P@1, or 1 - AP) of the rest, against x; its area; the oracle curve rejecting by true error;
Spearman's correlation of confidence with AP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from ..errors import InputError
from ..options import check_int

ERRORS = ("p@1", "ap")  # 1 - P@1 or 1 - AP


@dataclass(frozen=True)
class ErrorRejectCurve:
    """``curve``: fraction_rejected, n_kept, error, oracle_error, random_error. ``auc`` /
    ``oracle_auc``: the areas under the (step) curves over the rejected fraction in [0, 1), exact:
    the mean error over the n possible numbers of kept queries, whatever the plotting grid. ``spearman``:
    rank correlation of confidence with AP, and its p-value (NaN when undefined: ``note`` says
    why)."""

    curve: pd.DataFrame
    auc: float
    oracle_auc: float
    spearman: float
    spearman_p: float
    error_kind: str
    note: str = ""

    def summary_frame(self) -> pd.DataFrame:
        """One row: the error kind, the areas, Spearman's rho and p, and the note."""
        return pd.DataFrame([{"error": self.error_kind, "auc": self.auc, "oracle_auc": self.oracle_auc,
                              "spearman": self.spearman, "spearman_p": self.spearman_p, "note": self.note}])


def _numbers(x, name: str) -> np.ndarray:
    """``x`` as float64, or the message that it is not numbers."""
    try:
        with np.errstate(over="ignore"):
            return np.asarray(x, np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError("error-vs-reject", f"the {name} values are not numbers ({exc}).",
                         f"give one number per query for the {name}.") from None


def error_reject_curve(confidence: np.ndarray, ap: np.ndarray, p_at_1: np.ndarray, error: str = "p@1",
                       n_points: int = 101) -> ErrorRejectCurve:
    """Error of the kept queries after rejecting the least confident fraction x (x on a grid of
    ``n_points`` in [0, 1), keeping at least one query); the oracle rejects the largest errors
    first; random rejection keeps the overall error. Queries of equal confidence are rejected in
    random order, so where the cut falls inside a run of equal confidences the curve is the
    **expected** error over those orders: the curve depends on the confidences, never on row
    order (a constant confidence gives a flat curve at the overall error)."""
    error = error.lower() if isinstance(error, str) else error
    if error not in ERRORS:
        raise InputError("settings", f"unknown error kind {error!r}.", f"use one of {', '.join(ERRORS)}.")
    n_points = check_int(n_points, "n_points", 2)
    confidence, ap, p_at_1 = (_numbers(x, name) for x, name in ((confidence, "confidence"), (ap, "AP"),
                                                                  (p_at_1, "P@1")))
    if not confidence.ndim == ap.ndim == p_at_1.ndim == 1 or not confidence.size == ap.size == p_at_1.size:
        raise InputError("error-vs-reject", f"confidence, AP and P@1 have shapes {confidence.shape}, {ap.shape}, "
                         f"{p_at_1.shape}.", "give one value of each per query.")
    bad = ~(np.isfinite(confidence) & np.isfinite(ap) & np.isfinite(p_at_1))
    if bad.any():
        raise InputError("error-vs-reject", f"{int(bad.sum())} queries with a missing (NaN) or infinite "
                         f"confidence or metric (first at query {int(np.argmax(bad))}).",
                         "give every query a finite confidence, or leave those queries out.")
    e = 1.0 - (p_at_1 if error == "p@1" else ap)
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
    # the areas of the step curves over x in [0, 1): rejecting x keeps n - floor(x n) queries, so
    # each k = 1..n kept holds for 1/n of x: the mean error over k (the grid only draws them)
    return ErrorRejectCurve(curve, float((expected_sum / kept).mean()), float(oracle.mean()), float(rho), float(p),
                            error, note)


@dataclass(frozen=True)
class ErrorRejectTable:
    """Every method's error-vs-reject curve from one evaluation: ``curves`` (method -> curve frame),
    ``table`` (the curves stacked with method, auc, oracle_auc, spearman, spearman_p, unit
    ``query``, n_units), ``summary`` (one row per method) and ``notes`` (why a number is undefined)."""

    curves: dict[str, pd.DataFrame]
    table: pd.DataFrame
    summary: pd.DataFrame
    notes: list[str]


def error_reject_table(ev, error: str = "p@1") -> ErrorRejectTable:
    """:func:`error_reject_curve` of every method of ``ev`` (an
    :class:`~analysis_core.Evaluation`) that has a confidence, over its scored queries: the one
    computation the report and the dashboard's Confidence page show."""
    curves, rows, summary, notes = {}, [], [], []
    for m in ev.methods:
        pq = ev.per_query_columns(m)
        if "confidence" not in pq:
            continue
        keep = pq["n_positives"] > 0
        erc = error_reject_curve(pq["confidence"][keep], pq["ap"][keep], pq["precision_at_1"][keep], error=error)
        curves[m] = erc.curve
        if erc.note:
            notes.append(f"{m}: {erc.note}")
        n = int(keep.sum())
        rows.append(erc.curve.assign(method=m, auc=erc.auc, oracle_auc=erc.oracle_auc, spearman=erc.spearman,
                                     spearman_p=erc.spearman_p, unit="query", n_units=n))
        summary.append({"method": m, "auc": erc.auc, "oracle_auc": erc.oracle_auc, "spearman": erc.spearman,
                        "spearman_p": erc.spearman_p, "unit": "query", "n_units": n})
    table = pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()
    if len(table):
        table = table[["method"] + [c for c in table.columns if c != "method"]]
    return ErrorRejectTable(curves, table, pd.DataFrame(summary), notes)
