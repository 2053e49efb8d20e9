"""Two-way ANOVA of a per-query value on method x class (type II sums of squares, as
``car::Anova``), from cell counts and sums. Each function is total: where a term is undefined it
says so (NaN with the reason in ``note`` and in ``warnings``)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .variability import clean_values


def _undefined_terms(terms: list[str], why: str) -> pd.DataFrame:
    return pd.DataFrame({"term": terms, "sum_sq": np.nan, "df": np.nan, "F": np.nan, "p_value": np.nan,
                         "note": why})


def two_way_anova(df: pd.DataFrame, value: str = "ap", warn: list[str] | None = None) -> pd.DataFrame:
    """Two-way ANOVA of ``value`` on method x class with interaction (type II sums of squares):
    term, sum_sq, df, F, p_value, note."""
    warn = [] if warn is None else warn
    terms = ["method", "class", "method:class", "Residual"]
    d = clean_values(df, value).assign(cls=_levels(df["label"]), meth=_levels(df["method"]))
    n_m, n_c = d["meth"].nunique(), d["cls"].nunique()
    why = ""
    if n_m < 2 or n_c < 2:
        why = f"undefined: needs at least two methods and two classes ({n_m} method(s), {n_c} class(es))."
    elif np.ptp(d[value].to_numpy()) == 0.0:
        why = "undefined: every value is the same; there is no variation to test."
    else:
        cell = d.groupby(["meth", "cls"], observed=True)[value]
        resid_df = len(d) - cell.ngroups
        if resid_df <= 0:
            why = ("undefined: residual df 0 (one query per method x class cell): use at least two queries per "
                   "class.")
        elif float((cell.max() - cell.min()).max()) == 0.0:  # every cell's range (np.ptp) zero
            why = "undefined: every method x class cell is constant (zero residual variance), so F divides by zero."
    if why:
        warn.append(f"two-way ANOVA {why}")
        return _undefined_terms(terms, why)
    out = _two_way_type2(d[value].to_numpy(np.float64), d["meth"].to_numpy(), d["cls"].to_numpy())
    out["note"] = ""
    bad = out["term"].ne("Residual") & ~np.isfinite(out["p_value"].to_numpy(np.float64))
    if bad.any():
        out.loc[bad, "note"] = "undefined: the term has no degrees of freedom left in this design."
        warn.append(f"two-way ANOVA: term(s) {', '.join(out.loc[bad, 'term'])} undefined in this design.")
    return out[["term", "sum_sq", "df", "F", "p_value", "note"]]


def _two_way_type2(y: np.ndarray, a: np.ndarray, b: np.ndarray) -> pd.DataFrame:
    """Type II two-way ANOVA with interaction from cell counts and sums, without the
    n x (levels_a x levels_b) design matrix (minutes at 600 classes):
    ``SS(a | b) = RSS(b) - RSS(a + b)``, ``SS(b | a) = RSS(a) - RSS(a + b)``,
    ``SS(ab | a, b) = RSS(a + b) - RSS(a * b)``, each term's df the rank the term adds. The
    additive fit solves the normal equations with the b effects eliminated (an a x a system).
    Cells without data are allowed: the additive model's rank is ``levels_a + levels_b -
    components`` of the a-b graph of filled cells, the full model's the number of filled cells
    (a term left without rank has df 0 and no test). The same as statsmodels' ``anova_lm(ols(y ~
    C(a) * C(b)), typ=2)`` on complete designs; on incomplete ones that fits a rank-deficient model
    and its numbers depend on the row order, these do not."""
    from scipy import stats

    ia, la = pd.factorize(a, sort=True)
    ib, lb = pd.factorize(b, sort=True)
    m, c = la.size, lb.size
    n_cells = np.bincount(ia * c + ib, minlength=m * c).reshape(m, c).astype(np.float64)
    filled = n_cells > 0
    y = y - y.mean()  # centred: the sums of squares below subtract smaller numbers
    s_cells = np.bincount(ia * c + ib, weights=y, minlength=m * c).reshape(m, c)
    total = float(y @ y)
    n_a, n_b = n_cells.sum(axis=1), n_cells.sum(axis=0)
    s_a, s_b = s_cells.sum(axis=1), s_cells.sum(axis=0)
    rss_full = total - float((s_cells[filled] ** 2 / n_cells[filled]).sum())
    rss_a = total - float((s_a**2 / n_a).sum())
    rss_b = total - float((s_b**2 / n_b).sum())
    k = np.diag(n_a) - (n_cells / n_b) @ n_cells.T
    r = s_a - (n_cells / n_b) @ s_b
    eff_a = np.linalg.lstsq(k, r, rcond=None)[0]
    eff_b = (s_b - n_cells.T @ eff_a) / n_b
    rss_add = total - float(eff_a @ s_a + eff_b @ s_b)
    rank_add = m + c - components(*np.nonzero(filled))
    n_filled = int(filled.sum())
    df_res = float(y.size - n_filled)
    ss = np.array([rss_b - rss_add, rss_a - rss_add, rss_add - rss_full, rss_full])
    dfs = np.array([rank_add - c, rank_add - m, n_filled - rank_add, df_res], np.float64)
    ss[:3] = np.where(dfs[:3] > 0, np.maximum(ss[:3], 0.0), 0.0)  # rounding below zero; no rank, no sum
    mse = rss_full / df_res
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.r_[np.where(dfs[:3] > 0, ss[:3] / dfs[:3] / mse, np.nan), np.nan]
        p = np.r_[stats.f.sf(f[:3], np.maximum(dfs[:3], 1), df_res), np.nan]
    return pd.DataFrame({"term": ["method", "class", "method:class", "Residual"], "sum_sq": ss, "df": dfs, "F": f,
                         "p_value": p})


def components(a: np.ndarray, b: np.ndarray) -> int:
    """Connected components of the bipartite graph with an edge (a_i, b_i) per row."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    na, nb = int(a.max()) + 1, int(b.max()) + 1
    graph = coo_matrix((np.ones(a.size), (a, na + b)), shape=(na + nb, na + nb))
    return int(connected_components(graph, directed=False)[0])


def _levels(col: pd.Series) -> pd.Categorical:
    """``col`` as text categories in sorted order: the levels (and so the design matrix) patsy
    builds from the text column, without patsy inspecting every value (seconds on 20 000 rows)."""
    text = col.astype(str).to_numpy(object)
    return pd.Categorical(text, categories=sorted(set(text)))

