"""Paired tests between methods that answer the same queries, per pair of methods: the mean
difference with its t interval, the sign-flip permutation test and Wilcoxon's signed-rank test for
graded values, the exact McNemar test for hit rates, Holm's correction across pairs
(:mod:`.multiplicity`).

Values equal within :data:`~.variability.VALUE_TOLERANCE` are merged first, so rounding noise is
never reported as a difference. Wilcoxon's signed-rank test drops zero differences
(``zero_method="wilcox"``, R's default) and uses no continuity correction (exact distribution for
n <= 50 without ties, as R; otherwise the normal approximation with tie-corrected variance)."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd

from ..options import check_alpha
from .multiplicity import holm
from .permutation import sign_flip_p_values_many
from .variability import VALUE_TOLERANCE, clean_values, merge_rounding_noise

#: what a test over queries generalises over: new queries of these classes, answered by these trained
#: models against this gallery
QUERY_UNIT = "query"
PAIRED_COLUMNS = ["method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "p_permutation", "p_wilcoxon",
                  "wins", "ties", "losses", "note"]


def _pair_effects(diffs: list[np.ndarray], alpha: float) -> list[tuple[float, float, float, str]]:
    """(mean, t interval low, high, note) of each vector of differences: scipy's one-sample t on
    the differences, one call for all vectors of the same length (scipy's per-call overhead was
    most of a report's paired tests). Rows of a C-ordered matrix, reduced along the row, are
    summed as each vector on its own, so every interval has the same bits as a call per vector
    (tested)."""
    from scipy import stats

    out: list[tuple[float, float, float, str]] = []
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        n = d.size
        mean = float(d.mean()) if n else math.nan
        if n < 2:
            out.append((mean, math.nan, math.nan, f"interval undefined: {n} paired query(ies)"))
        elif np.ptp(d) == 0.0:
            out.append((mean, mean, mean, "every difference is the same: zero-width interval"))
        else:
            out.append((mean, math.nan, math.nan, ""))
            by_n.setdefault(n, []).append(i)
    for idx in by_n.values():
        ci = stats.ttest_1samp(np.stack([diffs[i] for i in idx]), 0.0, axis=1).confidence_interval(1 - alpha)
        for i, lo, hi in zip(idx, np.atleast_1d(ci.low).tolist(), np.atleast_1d(ci.high).tolist(), strict=True):
            out[i] = (out[i][0], lo, hi, "")
    return out


def _pairs(df: pd.DataFrame, value: str):
    """(method a, method b, a's values, b's values) over the queries both answer (in query order),
    methods in sorted order; a (method, query) given twice counts with its first defined value
    (as ``pivot_table(aggfunc="first")``), a method without any defined value is left out."""
    v = clean_values(df, value)[value].to_numpy(np.float64)
    q, _ = pd.factorize(df["query"], sort=True)
    m, names = pd.factorize(df["method"], sort=True)
    ok = ~np.isnan(v) & (q >= 0) & (m >= 0)
    wide = np.full((q.max() + 1 if q.size else 0, len(names)), np.nan)
    cell = q[ok] * len(names) + m[ok]
    _, first = np.unique(cell, return_index=True)  # the first row of each (query, method)
    wide.flat[cell[first]] = v[ok][first]
    defined = ~np.isnan(wide)
    cols = sorted((str(names[j]), j) for j in range(len(names)) if defined[:, j].any())
    for (a, i), (b, j) in itertools.combinations(cols, 2):
        both = defined[:, i] & defined[:, j]
        yield a, b, wide[both, i], wide[both, j]


def paired_tests(df: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10_000, seed: int = 0,
                 value: str = "ap") -> pd.DataFrame:
    """Every pair of methods over the queries both answer: mean difference (a - b) with a t
    interval, paired sign-flip permutation test, Wilcoxon signed-rank test, both Holm-corrected
    across pairs, win / tie / loss counts, and ``note`` where something is undefined."""
    check_alpha(alpha)
    out, diffs = _paired_rows(df, alpha, value)
    out["p_permutation"] = _sign_flip_columns(diffs, n_permutations, seed)
    return _holm_columns(out, alpha)


def _paired_rows(df: pd.DataFrame, alpha: float, value: str) -> tuple[pd.DataFrame, list[np.ndarray]]:
    """:func:`paired_tests` up to its permutation p-values (NaN) and Holm columns, and each
    pair's differences: the permutation tests of several tables can then share one product."""
    pairs = [(a, b, merge_differences(va, vb)) for a, b, va, vb in _pairs(df, value)]
    diffs = [d for _, _, d in pairs]
    rows = []
    for (a, b, d), (mean, lo, hi, note), p_w in zip(pairs, _pair_effects(diffs, alpha), _wilcoxon_p_values(diffs),
                                                     strict=True):
        n = d.size
        notes = [note] if note else []
        p_perm = math.nan  # filled by the caller, all pairs with the same queries in one product
        if not n:
            notes.append("no query answered by both")
        elif not d.any():
            notes.append("Wilcoxon undefined: every difference is zero")
        rows.append(dict(method_a=a, method_b=b, n=n, mean_diff=mean, ci_low=lo, ci_high=hi, p_permutation=p_perm,
                         p_wilcoxon=p_w, wins=int((d > 0).sum()), ties=int((d == 0).sum()),
                         losses=int((d < 0).sum()), note="; ".join(notes)))
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS), diffs


def _wilcoxon_p_values(diffs: list[np.ndarray]) -> list[float]:
    """Wilcoxon signed-rank p-value of each vector of differences, zeros dropped (NaN when every
    difference is zero): the exact null distribution for at most 50 non-zero differences without
    ties, else the normal approximation with the tie-corrected variance (scipy's default would run
    a permutation test for tied small samples). The approximate ones of vectors of one length
    are one scipy call over their rows, zeros included: scipy drops them per row (``wilcox``);
    ranks and their sums are integers or halves, exact in any order, so each p-value has the
    bits of a call on that vector's non-zero differences alone (tested)."""
    from scipy import stats

    out = [math.nan] * len(diffs)
    by_n: dict[int, list[int]] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, d in enumerate(diffs):
            nz = d[d != 0]
            if not nz.size:
                continue
            if nz.size <= 50 and np.unique(np.abs(nz)).size == nz.size:
                out[i] = float(stats.wilcoxon(nz, correction=False, method="exact").pvalue)
            else:
                by_n.setdefault(d.size, []).append(i)
        for idx in by_n.values():
            p = stats.wilcoxon(np.stack([diffs[i] for i in idx]), correction=False, method="asymptotic",
                               axis=1).pvalue
            for i, v in zip(idx, np.atleast_1d(p).tolist(), strict=True):
                out[i] = v
    return out


def _sign_flip_columns(diffs: list[np.ndarray], n_permutations: int, seed: int) -> np.ndarray:
    """Sign-flip p-value of each vector of differences (NaN for an empty one); the vectors of
    one length in one product (:func:`sign_flip_p_values`)."""
    out = np.full(len(diffs), np.nan)
    columns = _columns_by_length(diffs)
    for (idx, _), (p, _) in zip(columns, sign_flip_p_values_many([m for _, m in columns], n_permutations, seed),
                                strict=True):
        out[idx] = p
    return out


def _columns_by_length(diffs: list[np.ndarray]) -> list[tuple[list[int], np.ndarray]]:
    """The non-empty vectors of ``diffs`` of each length as the columns of one matrix, with their
    indices in ``diffs``."""
    by_n: dict[int, list[int]] = {}
    for i, d in enumerate(diffs):
        if d.size:
            by_n.setdefault(d.size, []).append(i)
    return [(idx, np.column_stack([diffs[i] for i in idx])) for idx in by_n.values()]


def _holm_columns(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The Holm-adjusted columns and ``reject`` of a :func:`paired_tests` table (in place)."""
    out["p_permutation_holm"] = holm(out["p_permutation"])
    out["p_wilcoxon_holm"] = holm(out["p_wilcoxon"])
    out["reject"] = (out["p_permutation_holm"] < alpha).fillna(False).astype(bool)
    return out


def _mcnemar_rows(df: pd.DataFrame, alpha: float, value: str) -> tuple[pd.DataFrame, list[tuple[int, np.ndarray]]]:
    """Every pair of methods on a hit-rate metric (P@1, Recall@K) over the queries both answer:
    the exact McNemar test (statsmodels' ``mcnemar(exact=True)``: a binomial test on the
    discordant counts ``discordant_a`` = hits of a only, ``discordant_b`` = hits of b only) and
    the difference of hit rates with its t interval. Where ties at the cutoff make some per-query
    hits fractional (expected hits), the sign-flip permutation test on the differences is used
    instead (for 0/1 hits it is the same conditional test) and ``note`` says so; those p-values
    are NaN here, filled by the caller from the (row, differences) returned, so that the tests of
    several tables share one draw of signs; then :func:`_mcnemar_holm`."""
    pairs = [(a, b, va, vb, merge_differences(va, vb)) for a, b, va, vb in _pairs(df, value)]
    rows: list[dict] = []
    exact, fractional = [], []
    for (a, b, va, vb, d), (mean, lo, hi, note) in zip(pairs, _pair_effects([p[4] for p in pairs], alpha),
                                                        strict=True):
        notes = [note] if note else []
        binary = bool(np.isin(va, (0.0, 1.0)).all() and np.isin(vb, (0.0, 1.0)).all())
        only_a, only_b = int(((va == 1) & (vb == 0)).sum()), int(((va == 0) & (vb == 1)).sum())
        if d.size == 0:
            test, p = "", math.nan
            notes.append("no query answered by both")
        elif binary:
            test, p = "McNemar exact", math.nan  # filled below, every pair in one call
            exact.append(len(rows))
        else:
            test, p = "sign-flip permutation", math.nan  # filled by the caller
            fractional.append((len(rows), d))
            notes.append("fractional hits (ties at the cutoff): sign-flip permutation test on expected hits")
        rows.append(dict(method_a=a, method_b=b, n=int(d.size), mean_diff=mean, ci_low=lo, ci_high=hi, test=test,
                         p_value=p, discordant_a=only_a, discordant_b=only_b, wins=int((d > 0).sum()),
                         ties=int((d == 0).sum()), losses=int((d < 0).sum()), note="; ".join(notes)))
    if exact:
        p_exact = mcnemar_exact_p([rows[i]["discordant_a"] for i in exact], [rows[i]["discordant_b"] for i in exact])
        for i, v in zip(exact, p_exact.tolist(), strict=True):
            rows[i]["p_value"] = v
    out = pd.DataFrame(rows, columns=["method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "test",
                                      "p_value", "discordant_a", "discordant_b", "wins", "ties", "losses", "note"])
    return out, fractional


def _mcnemar_holm(out: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """The Holm column and ``reject`` of a :func:`_mcnemar_rows` table (in place)."""
    out["p_holm"] = holm(out["p_value"])
    out["reject"] = (out["p_holm"] < alpha).fillna(False).astype(bool)
    return out


def mcnemar_exact_p(discordant_a, discordant_b) -> np.ndarray:
    """Exact McNemar p-values of discordant counts: statsmodels' ``mcnemar(table, exact=True)``
    arithmetic, ``min(1, 2 binom.cdf(min(b, c), b + c, 1/2))``, for every pair in one call
    (statsmodels builds a table per pair: most of a report's McNemar time; same bits, tested)."""
    from scipy import stats

    b = np.asarray(discordant_a, np.float64)
    c = np.asarray(discordant_b, np.float64)
    return np.minimum(stats.binom.cdf(np.minimum(b, c), (b + c).astype(np.int64), 0.5) * 2, 1)


def metric_paired_tests(metrics: pd.DataFrame, alpha: float = 0.05, n_permutations: int = 10_000,
                        seed: int = 0) -> pd.DataFrame:
    """A test for every reported metric between every pair of methods, on the same queries.

    ``metrics``: the long table of :func:`~.variability.metric_frame` (method, query, label,
    metric, value). Means of graded values (AP, MAP@R, R-Precision, RR) get the paired sign-flip
    permutation test (and Wilcoxon); hit rates (P@1, Recall@K) the exact McNemar test on the
    discordant counts; Holm within each metric (``p_holm``); the effect — mean difference a - b
    with its ``1 - alpha`` t interval — beside every p-value. One row per (metric, pair)."""
    check_alpha(alpha)
    from ..metrics.registry import summary_metrics

    kinds = {m.name: m.kind for m in summary_metrics(tuple(range(1, 1025)))}
    parts: dict[str, pd.DataFrame] = {}
    graded: dict[str, list[np.ndarray]] = {}  # the sign-flip tests of every metric in one product
    fractional: dict[str, list[tuple[int, np.ndarray]]] = {}  # hit rates with fractional hits
    for name in metrics["metric"].unique():
        sub = metrics[metrics["metric"] == name]
        if kinds.get(name) == "hit":
            parts[name], fractional[name] = _mcnemar_rows(sub, alpha, "value")
        else:
            parts[name], graded[name] = _paired_rows(sub, alpha, "value")
    # one draw of signs for the graded product and each fractional-hit test (each its own product)
    graded_columns = _columns_by_length([d for diffs in graded.values() for d in diffs])
    tested = sign_flip_p_values_many([m for _, m in graded_columns] + [d for f in fractional.values() for _, d in f],
                                     n_permutations, seed)
    rest = iter(tested[len(graded_columns):])
    for name, f in fractional.items():
        t = parts[name]
        for (i, _), (v, _) in zip(f, rest, strict=False):
            t.loc[i, "p_value"] = float(v[0])
        parts[name] = _mcnemar_holm(t, alpha)
    if graded:
        p = np.full(sum(len(diffs) for diffs in graded.values()), np.nan)
        for (idx, _), (v, _) in zip(graded_columns, tested, strict=False):
            p[idx] = v
        start = 0
        for name, diffs in graded.items():
            t = parts[name]
            t["p_permutation"] = p[start:start + len(diffs)]
            start += len(diffs)
            t = _holm_columns(t, alpha)
            parts[name] = t.assign(test="sign-flip permutation", p_value=t["p_permutation"],
                                   p_holm=t["p_permutation_holm"])
    out = pd.concat([t.assign(metric=name) for name, t in parts.items()], ignore_index=True) if parts \
        else pd.DataFrame()
    if len(out):
        out["unit"] = QUERY_UNIT
        out["n_units"] = out["n"]
    first = ["metric", "method_a", "method_b", "n", "mean_diff", "ci_low", "ci_high", "test", "p_value", "p_holm",
             "reject", "unit", "n_units"]
    return out[first + [c for c in out.columns if c not in first]] if len(out) else out


def merge_differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Paired differences a - b, with differences within rounding of zero set to exactly zero and
    differences whose **magnitudes** lie within rounding of each other given exactly equal
    magnitudes (values were merged already; their differences may still carry it: 0.2 - 0.7 and
    0.3 - 0.8 differ in the 16th digit, which made a t interval of width 1e-15 and scipy's
    precision-loss warning; and 0.3 - 0.2 against 0.8 - 0.9 must tie in Wilcoxon's ranks of |d|,
    whose p-value moved by up to 0.108 with the last bits otherwise)."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    d = np.copysign(merge_rounding_noise(np.abs(d)), d)
    d[np.abs(d) <= VALUE_TOLERANCE] = 0.0
    return d
