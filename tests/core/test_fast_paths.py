"""The closed forms the dashboard relies on for speed equal the general computations they
replace: the complete-design two-way ANOVA equals statsmodels' type II table; one query's
neighbours from one row of scores equal faiss's exact search (ties aside)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from analysis_core.engine.layout import prepare_vectors
from analysis_core.engine.topk import query_neighbours, top_k
from analysis_core.stats.method_tests import two_way_anova


def _statsmodels_two_way(df: pd.DataFrame) -> np.ndarray:
    import statsmodels.formula.api as smf
    from statsmodels.stats.anova import anova_lm

    d = df.assign(cls=df["label"].astype(str), meth=df["method"].astype(str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = anova_lm(smf.ols("ap ~ C(meth) * C(cls)", data=d).fit(), typ=2)
    return t[["sum_sq", "df", "F", "PR(>F)"]].to_numpy(np.float64)


@pytest.mark.parametrize("seed", range(4))
def test_complete_two_way_anova_equals_statsmodels(seed):
    rng = np.random.default_rng(seed)
    n_m, n_c = int(rng.integers(2, 5)), int(rng.integers(2, 9))
    rows = []
    for c in range(n_c):
        n_q = int(rng.integers(2, 9))  # unbalanced: classes of different sizes
        for q in range(n_q):
            for m in range(n_m):
                rows.append(dict(method=f"m{m}", query=f"{c}-{q}", label=f"c{c}",
                                 ap=float(np.clip(0.3 + 0.1 * m + 0.05 * c + rng.normal(0, 0.2), 0, 1))))
    df = pd.DataFrame(rows)
    if seed == 3:  # a different number of answers per method in a class
        df = df.drop(index=df.index[::7]).reset_index(drop=True)
    got = two_way_anova(df)[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64)
    np.testing.assert_allclose(got, _statsmodels_two_way(df), rtol=1e-9, atol=1e-12, equal_nan=True)


def test_two_way_anova_with_an_empty_cell_falls_back_to_statsmodels():
    rng = np.random.default_rng(5)
    df = pd.DataFrame([dict(method=f"m{m}", query=f"{c}-{q}", label=f"c{c}", ap=float(rng.random()))
                       for c in range(3) for q in range(4) for m in range(2)])
    df = df[~((df["method"] == "m1") & (df["label"] == "c2"))].reset_index(drop=True)
    got = two_way_anova(df)[["sum_sq", "df", "F", "p_value"]].to_numpy(np.float64)
    np.testing.assert_allclose(got, _statsmodels_two_way(df), rtol=1e-9, atol=1e-12, equal_nan=True)


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
