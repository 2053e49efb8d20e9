"""Two-way ANOVA of a per-query value on method x class as the split-plot (repeated-measures)
design it is: the methods answer the same queries, so the query is the whole plot (nested in its
class, the whole-plot factor) and the method the within-query (split-plot) factor.

Model (complete data: every query answered once by every method)::

    y[m, q] = mu + method[m] + class[c(q)] + (method:class)[m, c(q)] + query[q] + e[m, q]

with query[q] ~ N(0, s2_query) and e ~ N(0, s2) independent. Two error strata, as in R's
``aov(value ~ method * class + Error(query))`` with ``query`` a factor of unique query ids:

* between queries (the query means): ``class`` is tested against the query-within-class
  residual (df ``Q - C``);
* within queries (each value minus its query's mean): ``method`` and ``method:class`` are
  tested against the method x query residual (df ``(M - 1)(Q - C)``).

These five rows have the query as unit: they generalise to new queries answered against *this*
gallery. With leave-one-out the queries of a class are also its gallery, so their values are
dependent and each class's realised items shift all of its queries together: measured on
embeddings (``benchmarks/calibration_two_way.py``), against the null of methods equally good on
classes equally hard in distribution, the three terms reject far above alpha, while at the query
unit (a fixed gallery, new queries) they hold it. The table is therefore labelled with the query
unit. A class-unit method row (the M x C table of class means, method against method x class, R's
``aov(mean ~ method + Error(class))``) was measured too: nearer its level but still above it (8.4 %
at alpha 0.05 over 800 simulated null runs: the classes are each other's negatives, so one
evaluation's realised noise shifts all classes of a method together); it is not part of the
table, since the method comparison at the class unit is the jackknife over classes
(:mod:`.class_jackknife`), which holds its level. Class and method:class have no test at the class
unit in one evaluation (one realisation per class: the class x method deviations are the error);
replicate runs (the ``run`` unit) would give them one.

Counting each query once per method against one pooled residual (the former type II table)
gave the class term a null rejection rate of 23.5 % and left the method terms powerless; see
D. C. Montgomery, *Design and Analysis of Experiments*, the split-plot design (ch. 14 in the
8th ed.), and Venables & Ripley, *Modern Applied Statistics with S*, §6.7 (multistratum models).

Sums of squares are sequential, as ``summary(aov(...))``: with unequal numbers of queries per
class, ``method`` is the marginal method effect (every query weighs the same) and
``method:class`` what the class-specific method effects add to it. Everything comes from cell
counts and sums (bincounts), never an n x levels design matrix. Each function is total: where a
term is undefined it says so (NaN with the reason in ``note`` and in ``warnings``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .variability import clean_values

BETWEEN, WITHIN = "query within class", "method x query"  # the ``error`` column: the stratum's residual
RESID_BETWEEN, RESID_WITHIN = "Residual (between queries)", "Residual (within queries)"
TERMS = ["class", RESID_BETWEEN, "method", "method:class", RESID_WITHIN]
ERRORS = [BETWEEN, "", WITHIN, WITHIN, ""]
COLUMNS = ["term", "sum_sq", "df", "F", "p_value", "error", "unit", "n_units", "note"]
#: a residual sum of squares below ``n * (ZERO_ULPS * eps * max|y - mean|)**2`` is rounding, not
#: variance (means of values that are equal, summed in another order, differ in the last bits)
ZERO_ULPS = 8.0


def two_way_anova(df: pd.DataFrame, value: str = "ap", warn: list[str] | None = None) -> pd.DataFrame:
    """Split-plot ANOVA of ``value`` on method x class with the query as whole plot: one row per
    term and per error stratum (``term``, ``sum_sq``, ``df``, ``F``, ``p_value``, ``error`` = the
    residual the term is tested against, ``unit`` = "query", ``n_units`` = queries used,
    ``note``), equal to R's ``summary(aov(value ~ method * class + Error(query)))``.

    A query is its (``query``, ``label``) pair. Missing values: a query not answered exactly once
    by every method (a method without a finite value for it, a duplicate row, or a label that
    differs between methods) is left out, and ``warn`` says how many. Why not keep it: with a
    method missing for some queries, method is no longer orthogonal to query, its information is
    split between the strata (``aov`` then prints a method row in both), and the two F tests are
    no longer exact; the mixed model (:mod:`.mixed_model`) uses such queries properly. A query
    answered by every method carries all the within-query information the table uses.
    """
    warn = [] if warn is None else warn
    d = clean_values(df, value)
    y = d[value].to_numpy(np.float64)
    im, _ = pd.factorize(d["method"], sort=True)
    il, _ = pd.factorize(d["label"], sort=True)
    iq, _ = pd.factorize(d["query"], sort=True)
    known = (il >= 0) & (iq >= 0)  # rows that name their query
    good = known & np.isfinite(y) & (im >= 0)
    n_m = int(np.unique(im[good]).size)
    unit = np.full(y.size, -1, np.int64)
    unit[known] = pd.factorize(iq[known].astype(np.int64) * (int(il.max(initial=0)) + 1) + il[known])[0]
    keep, n_queries = _complete_queries(unit, im, good, n_m)
    n_used = int(keep.sum()) // max(n_m, 1)
    if n_used < n_queries:
        warn.append(f"two-way ANOVA: {n_queries - n_used} of {n_queries} queries were not answered exactly once by "
                    f"every method (of {n_m}) with a finite value and were left out (a split-plot table needs every "
                    "query under every method; the mixed model uses them).")
    im, il, unit = (pd.factorize(a[keep], sort=True)[0] for a in (im, il, unit))
    out = _split_plot(y[keep], im, il, unit, n_m)
    for r in out[out["note"].ne("")].itertuples():
        msg = f"two-way ANOVA {r.term}: {r.note}"
        if msg not in warn:
            warn.append(msg)
    return out[COLUMNS]


def _complete_queries(unit: np.ndarray, im: np.ndarray, good: np.ndarray, n_m: int) -> tuple[np.ndarray, int]:
    """The rows of the queries answered exactly once by each of the ``n_m`` methods, all of them
    usable (``good``: a finite value and a method), and the number of queries (``unit`` >= 0)."""
    n_u = int(unit.max(initial=-1)) + 1
    named = unit >= 0
    rows = np.bincount(unit[named], minlength=n_u)
    usable = np.bincount(unit[good], minlength=n_u)
    pairs = np.unique(unit[good] * max(n_m, 1) + np.searchsorted(np.unique(im[good]), im[good]))
    distinct = np.bincount(pairs // max(n_m, 1), minlength=n_u)
    complete = np.r_[(rows == n_m) & (usable == n_m) & (distinct == n_m), False]
    return complete[np.where(named, unit, n_u)], n_u


def _split_plot(y: np.ndarray, im: np.ndarray, ic: np.ndarray, iu: np.ndarray, n_m: int) -> pd.DataFrame:
    """The split-plot table from complete data: ``iu`` query codes 0..Q-1, each with one row per
    method ``im`` (0..M-1), ``ic`` the class codes 0..C-1 (constant within a query)."""
    from scipy import stats

    q = int(iu.max(initial=-1)) + 1
    m = n_m if q else 0
    cls_u = np.zeros(q, np.int64)
    cls_u[iu] = ic
    c = int(cls_u.max(initial=-1)) + 1
    n = y.size
    yc = y - y.mean() if n else y  # centred: the sums of squares below are of small numbers
    scale = float(np.max(np.abs(yc), initial=0.0))
    zero = n * (ZERO_ULPS * np.finfo(np.float64).eps * scale) ** 2
    ss = np.zeros(len(TERMS))
    if n:
        mean_q = np.bincount(iu, yc, q) / m
        n_c = np.bincount(cls_u, minlength=c).astype(np.float64)
        mean_c = np.bincount(cls_u, mean_q, c) / n_c
        grand = float(mean_q.mean())
        mean_m = np.bincount(im, yc, m) / q
        cell = im * c + ic
        mean_mc = np.bincount(cell, yc, m * c).reshape(m, c) / n_c
        ss_method = q * float(((mean_m - grand) ** 2).sum())
        ss_within_cells = float((n_c * (mean_mc - mean_c) ** 2).sum())
        r_between = mean_q - mean_c[cls_u]
        r_within = yc - mean_q[iu] - mean_mc.ravel()[cell] + mean_c[ic]
        ss = np.array([m * float((n_c * (mean_c - grand) ** 2).sum()), m * float(r_between @ r_between),
                       ss_method, max(ss_within_cells - ss_method, 0.0), float(r_within @ r_within)])
    dfs = np.array([c - 1, q - c, m - 1, (m - 1) * (c - 1), (m - 1) * (q - c)], np.float64)
    notes = _undefined(ss, dfs, zero, m, c, q)
    f = np.full(len(TERMS), np.nan)
    p = np.full(len(TERMS), np.nan)
    for i, res in ((0, 1), (2, 4), (3, 4)):
        if not notes[i]:
            f[i] = (ss[i] / dfs[i]) / (ss[res] / dfs[res])
            p[i] = float(stats.f.sf(f[i], dfs[i], dfs[res]))
    ss = np.where(dfs > 0, ss, np.nan)
    return pd.DataFrame({"term": TERMS, "sum_sq": ss, "df": dfs, "F": f, "p_value": p, "error": ERRORS,
                         "unit": "query", "n_units": q, "note": notes})


def _undefined(ss: np.ndarray, dfs: np.ndarray, zero: float, m: int, c: int, q: int) -> list[str]:
    """The reason each row of the table (order :data:`TERMS`) has no test, or "" when it has one."""
    if q == 0:
        return ["undefined: no query was answered by every method."] * len(TERMS)
    notes = [""] * len(TERMS)
    need = {0: f"at least two classes ({c} class)", 2: f"at least two methods ({m} method)",
            3: f"at least two methods and two classes ({m} method(s), {c} class(es))"}
    no_df = {1: "one query per class", 4: "one query per class"}
    stratum = {1: "between queries", 4: "within queries"}
    nothing = {1: "every query has the same mean over the methods: no between-query variation to test.",
               4: "every query has the same value under every method (identical methods): no within-query "
                  "variation to test."}
    zero_resid = {1: "the queries of each class have the same mean over the methods",
                  4: "the methods differ by the same amount on every query of a class"}
    for i, res in ((0, 1), (2, 4), (3, 4)):
        if dfs[i] <= 0:
            notes[i] = f"undefined: needs {need[i]}."
        elif dfs[res] <= 0:
            notes[i] = f"undefined: residual df 0 {stratum[res]} ({no_df[res]})."
        elif ss[i] + ss[res] <= zero:
            notes[i] = "undefined: " + nothing[res]
        elif ss[res] <= zero:
            notes[i] = f"undefined: zero residual {stratum[res]} ({zero_resid[res]}), so F divides by zero."
    for res in (1, 4):
        if dfs[res] <= 0:
            notes[res] = f"undefined: df 0 ({'one method' if m < 2 else no_df[res]})."
    return notes


def components(a: np.ndarray, b: np.ndarray) -> int:
    """Connected components of the bipartite graph with an edge (a_i, b_i) per row."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    na, nb = int(a.max()) + 1, int(b.max()) + 1
    graph = coo_matrix((np.ones(a.size), (a, na + b)), shape=(na + nb, na + nb))
    return int(connected_components(graph, directed=False)[0])
