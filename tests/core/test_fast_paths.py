"""The closed forms the dashboard relies on for speed equal the general computations they
replace: the split-plot two-way ANOVA equals least squares on the full design matrix; one query's
neighbours from one row of scores equal faiss's exact search (ties aside). And the report's batched
statistics equal their one-at-a-time originals bit for bit: t intervals, Wilcoxon and McNemar
p-values of many pairs in one call, Grouped Recall reusing the evaluation's pass, figures built
in one validation."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis_core.engine.layout import prepare_vectors
from analysis_core.engine.topk import query_neighbours, top_k
from analysis_core.stats.two_way_anova import two_way_anova


def _design_matrix_split_plot(df: pd.DataFrame) -> np.ndarray:
    """The split-plot table by general least squares on full dummy matrices (statsmodels, a
    pseudo-inverse): the within stratum's terms are the drops in RSS and rises in rank of the
    nested fits ``C(q)`` < ``C(q) + C(meth)`` < ``C(q) + C(meth) + C(meth):C(cls)`` (the query
    dummies first, so the class columns are aliased), the between stratum the fit of the query
    means on class. Rows as two_way_anova's: class, between residual, method, method:class,
    within residual."""
    import statsmodels.formula.api as smf
    from scipy import stats

    d = df.assign(cls=df["label"].astype(str), meth=df["method"].astype(str), q=df["query"].astype(str))
    n_m = d["meth"].nunique()
    qm = d.groupby("q").agg(ap=("ap", "mean"), cls=("cls", "first"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rank-deficient designs: the pseudo-inverse is the point
        fits = [smf.ols(f, data=d).fit() for f in ("ap ~ C(q)", "ap ~ C(q) + C(meth)",
                                                     "ap ~ C(q) + C(meth) + C(meth):C(cls)")]
        b = smf.ols("ap ~ C(cls)", data=qm).fit()
    ss = np.array([n_m * b.ess, n_m * b.ssr, fits[0].ssr - fits[1].ssr, fits[1].ssr - fits[2].ssr, fits[2].ssr])
    dfs = np.array([b.df_model, b.df_resid, fits[1].df_model - fits[0].df_model,
                    fits[2].df_model - fits[1].df_model, len(d) - fits[2].df_model - 1])
    f = np.array([ss[0] / dfs[0] / (ss[1] / dfs[1]), np.nan, ss[2] / dfs[2] / (ss[4] / dfs[4]),
                  ss[3] / dfs[3] / (ss[4] / dfs[4]), np.nan])
    p = np.array([stats.f.sf(f[0], dfs[0], dfs[1]), np.nan, stats.f.sf(f[2], dfs[2], dfs[4]),
                  stats.f.sf(f[3], dfs[3], dfs[4]), np.nan])
    return np.c_[ss, dfs, f, p]


@pytest.mark.parametrize("seed", range(4))
def test_split_plot_two_way_anova_equals_least_squares_on_the_design_matrix(seed):
    """The bincount table equals the general fit with query, method and method x class dummies,
    on classes of different sizes."""
    rng = np.random.default_rng(seed)
    n_m, n_c = int(rng.integers(2, 5)), int(rng.integers(2, 9))
    rows = []
    for c in range(n_c):
        n_q = int(rng.integers(2, 9))  # unbalanced: classes of different sizes
        for q in range(n_q):
            qeff = rng.normal(0, 0.1)
            for m in range(n_m):
                rows.append(dict(method=f"m{m}", query=f"{c}-{q}", label=f"c{c}",
                                 ap=float(np.clip(0.3 + 0.1 * m + 0.05 * c + qeff + rng.normal(0, 0.2), 0, 1))))
    df = pd.DataFrame(rows)
    got = two_way_anova(df)[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64)[:5]  # the query-unit rows
    np.testing.assert_allclose(got, _design_matrix_split_plot(df), rtol=1e-9, atol=1e-12, equal_nan=True)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), n_m=st.integers(2, 4), n_c=st.integers(2, 5), drop=st.floats(0.0, 0.4))
def test_two_way_anova_with_missing_answers_is_the_table_of_the_complete_queries_in_any_row_order(seed, n_m, n_c,
                                                                                                  drop):
    """(method, query) values missing at random, whole method x class cells among them: the
    queries not answered by every method are left out and counted in ``warnings``; the table is
    the design-matrix fit on the rest, the same for the rows in any order."""
    rng = np.random.default_rng(seed)
    rows = [dict(method=f"m{m}", query=f"{c}-{q}", label=f"c{c}", ap=float(rng.random()))
            for c in range(n_c) for q in range(int(rng.integers(1, 6))) for m in range(n_m)]
    df = pd.DataFrame(rows)
    df = df[rng.random(len(df)) >= drop]
    if rng.random() < 0.3:  # a method never scored on one class
        df = df[~((df["method"] == "m0") & (df["label"] == "c0"))]
    n_answers = df.groupby("query")["method"].nunique()
    complete = df[df["query"].isin(n_answers.index[n_answers == n_m])]
    assume(complete["method"].nunique() == n_m and complete["label"].nunique() >= 2)
    assume(complete["query"].nunique() > complete["label"].nunique())  # residual df >= 1 in both strata
    warn: list[str] = []
    got = two_way_anova(df.reset_index(drop=True), warn=warn)
    n_out = df["query"].nunique() - complete["query"].nunique()
    assert any(f"{n_out} of {df['query'].nunique()} queries were not answered" in w for w in warn) == (n_out > 0)
    np.testing.assert_allclose(got[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64)[:5],
                               _design_matrix_split_plot(complete), rtol=1e-7, atol=1e-10, equal_nan=True)
    shuffled = two_way_anova(df.sample(frac=1.0, random_state=1).reset_index(drop=True))
    np.testing.assert_allclose(shuffled[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64),
                               got[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64), rtol=1e-9, atol=1e-12,
                               equal_nan=True)


@pytest.mark.parametrize("similarity", ["cosine", "dot", "euclidean"])
def test_one_query_neighbours_equal_faiss(similarity):
    X = np.random.default_rng(1).standard_normal((2_000, 24)).astype(np.float32)
    xf = prepare_vectors(X, similarity)
    for q in (0, 7, 1_999):
        s, i = query_neighbours(xf, q, 10, similarity=similarity)
        s2, i2 = top_k(X, 10, similarity=similarity, queries=np.array([q]))
        assert i.tolist() == i2[0].tolist()
        np.testing.assert_allclose(s, s2[0], rtol=1e-5, atol=1e-4)


def test_query_neighbours_order_ties_by_index_and_leave_the_query_out():
    xf = prepare_vectors(np.repeat(np.eye(3, dtype=np.float32), 4, axis=0), "cosine")
    s, i = query_neighbours(xf, 5, 5)
    assert i.tolist() == [4, 6, 7, 0, 1] and s.tolist() == [1, 1, 1, 0, 0]
    s, i = query_neighbours(xf[:2], 0, 10)
    assert i.tolist() == [1]


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_query_neighbours_within_a_gallery_equal_exact_distances(offset):
    """The drill-down's neighbours: only gallery items (``candidates``), euclidean expanded in
    float64 as the engine's tiles do, vectors prepared as the engine prepares them (moved when far
    from the origin). Before, float32 expansion at 1e4 left 1 of the exact top 10."""
    from scipy.spatial.distance import cdist

    rng = np.random.default_rng(2)
    X = offset + rng.standard_normal((300, 8))
    gallery = rng.random(300) < 0.6
    xf = prepare_vectors(X, "euclidean")
    for q in (0, 5, 299):
        s, i = query_neighbours(xf, q, 10, similarity="euclidean", candidates=gallery)
        d = cdist(X[q:q + 1], X)[0]
        d[~gallery] = np.inf
        d[q] = np.inf
        want = np.lexsort((np.arange(300), d))[:10]
        assert i.tolist() == want.tolist()
        np.testing.assert_allclose(-s, d[want], rtol=1e-5)


def test_t_intervals_of_many_pairs_in_one_call_have_the_bits_of_one_call_each():
    from analysis_core.stats.paired_tests import _pair_effects

    rng = np.random.default_rng(3)
    for n in (2, 3, 17, 200, 1797):
        diffs = [np.round(rng.normal(size=n) * rng.random(), int(rng.integers(1, 17))) for _ in range(12)]
        diffs += [np.zeros(n), np.full(n, 0.25)]  # zero-width intervals, with their note
        for d, (mean, lo, hi, note) in zip(diffs, _pair_effects(diffs, 0.05), strict=True):
            assert mean == float(d.mean())
            if np.ptp(d) == 0:
                assert (lo, hi) == (mean, mean) and note
            else:
                ci = stats.ttest_1samp(d, 0.0).confidence_interval(0.95)
                assert (lo, hi, note) == (float(ci.low), float(ci.high), "")


def test_wilcoxon_p_values_of_many_pairs_in_one_call_have_the_bits_of_one_call_each():
    from analysis_core.stats.paired_tests import _wilcoxon_p_values

    rng = np.random.default_rng(4)
    for n in (5, 40, 60, 900):
        diffs = []
        for _ in range(10):
            d = np.round(rng.normal(size=n), int(rng.integers(0, 4)))  # ties among the |d|
            d[rng.random(n) < rng.random()] = 0.0  # zeros, dropped
            diffs.append(d)
        diffs.append(np.zeros(n))
        for d, p in zip(diffs, _wilcoxon_p_values(diffs), strict=True):
            nz = d[d != 0]
            if not nz.size:
                assert np.isnan(p)
                continue
            exact = nz.size <= 50 and np.unique(np.abs(nz)).size == nz.size
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = stats.wilcoxon(nz, correction=False, method="exact" if exact else "asymptotic").pvalue
            assert p == float(ref)


def test_mcnemar_p_values_in_one_call_equal_statsmodels_bit_for_bit():
    from statsmodels.stats.contingency_tables import mcnemar

    from analysis_core.stats.paired_tests import mcnemar_exact_p

    rng = np.random.default_rng(5)
    b = np.r_[rng.integers(0, 3000, 200), np.repeat(np.arange(12), 12)]
    c = np.r_[rng.integers(0, 3000, 200), np.tile(np.arange(12), 12)]
    got = mcnemar_exact_p(b.tolist(), c.tolist())
    ref = [mcnemar([[3, x], [y, 9]], exact=True).pvalue for x, y in zip(b, c, strict=True)]
    assert got.tobytes() == np.asarray(ref, np.float64).tobytes()


def test_grouped_recall_reads_a_group_of_every_class_from_the_evaluations_pass():
    from analysis_core import Dataset, evaluate
    from analysis_core.stats.grouped_recall import grouped_recall

    rng = np.random.default_rng(6)
    y = rng.integers(0, 6, 400)
    X = (np.round(rng.normal(size=(400, 5)) + y[:, None], 1)).astype(np.float32)  # ties
    ev = evaluate(Dataset(embeddings={"m": X}, labels=y.astype(str)), ks=(1, 5))
    codes = ev.dataset.label_codes
    for S in (2, 3, 6):
        a = grouped_recall(X, codes, group_size=S, ks=ev.ks, seed=1, loo_pass=ev.loo_pass("m"))
        b = grouped_recall(X, codes, group_size=S, ks=ev.ks, seed=1)
        assert a.table.to_csv() == b.table.to_csv() and a.per_group.to_csv() == b.per_group.to_csv()
    sampled = evaluate(ev.dataset, query_sample=100)
    assert sampled.loo_pass("m") is None  # a query sample's pass is not the group's


def test_figures_built_in_one_validation_are_those_of_update_calls():
    """A builder's figure (traces and layout in one constructor, the template set unvalidated)
    has the JSON of the figure built trace by trace and laid out by update calls, as before."""
    import plotly.graph_objects as go

    from analysis_core.figures.grouped_recall import grouped_recall_by_size_figure
    from analysis_core.figures.style import base_layout, plot_text, series_look

    rows = pd.DataFrame({"method": np.repeat(["a", "b<i>"], 3), "group_size": [2, 5, 10] * 2,
                         "mean": [0.5, 0.6, 0.7, 0.4, 0.5, 0.6], "ci_low": 0.3, "ci_high": 0.8})
    ref = go.Figure()
    for i, (m, part) in enumerate(rows.groupby("method", sort=False)):
        col, dash, symbol, _ = series_look(i)
        ref.add_trace(go.Scatter(x=part["group_size"], y=part["mean"], mode="lines+markers", name=plot_text(m),
                                 line=dict(color=col, dash=dash), marker=dict(symbol=symbol),
                                 error_y=dict(type="data", symmetric=False, array=part["ci_high"] - part["mean"],
                                              arrayminus=part["mean"] - part["ci_low"])))
    ref.update_layout(**base_layout("Grouped Recall@1 against group size S"))
    ref.update_xaxes(title="classes per group S", type="log")
    ref.update_yaxes(title="Grouped Recall@1", range=[0, 1.02])
    assert json.loads(grouped_recall_by_size_figure(rows).to_json()) == json.loads(ref.to_json())
