"""The studentized range against outside references: the exact k = 2 identity with Student's t,
and scipy's numerical integration where it is accurate."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from analysis_core.stats.studentized_range import studentized_range_ppf, studentized_range_sf


@settings(max_examples=60, deadline=None)
@given(st.floats(1.0, 1e7), st.floats(0.01, 12.0))
def test_two_groups_equal_the_t_distribution_exactly(df, q):
    """k = 2: Q = sqrt(2) |T_df|, so P(Q > q) = 2 P(T_df > q / sqrt 2) — an identity, not a fit."""
    exact = 2 * stats.t.sf(q / np.sqrt(2), df)
    got = float(studentized_range_sf(q, 2, df))
    assert got == pytest.approx(exact, rel=1e-8, abs=1e-13)


@pytest.mark.parametrize("k", [3, 5, 10, 40])
@pytest.mark.parametrize("df", [1.0, 2.5, 7.0, 40.0])
def test_more_groups_equal_scipys_integration(k, df):
    for q in (0.5, 2.0, 4.0, 7.0):
        assert float(studentized_range_sf(q, k, df)) == pytest.approx(stats.studentized_range.sf(q, k, df),
                                                                      rel=1e-8, abs=1e-13)


def test_quantile_inverts_the_survival_function_and_equals_scipy():
    dfs = np.array([1.5, 4.0, 30.0, 1e4])
    q = studentized_range_ppf(0.95, 6, dfs)
    np.testing.assert_allclose(studentized_range_sf(q, 6, dfs), 0.05, rtol=1e-9)
    for d, v in zip(dfs[:3], q[:3], strict=False):
        assert v == pytest.approx(stats.studentized_range.ppf(0.95, 6, d), rel=1e-8)


def test_many_degrees_of_freedom_interpolated_within_tolerance():
    from analysis_core.stats.posthoc import PPF_TOLERANCE, quantiles_for_dfs

    dfs = np.r_[np.linspace(1.0, 2.0, 25), np.random.default_rng(0).uniform(2, 400, 60)]
    got = quantiles_for_dfs(0.95, 12, dfs)
    exact = studentized_range_ppf(0.95, 12, dfs)
    assert np.max(np.abs(got - exact)) <= 10 * PPF_TOLERANCE


def test_many_values_at_once_have_the_bits_of_one_call_per_value():
    rng = np.random.default_rng(2)
    q = np.r_[rng.uniform(0.1, 8, 30), 0.0, -1.0, np.nan, 3.0]
    df = np.r_[rng.uniform(2, 500, 30), 5.0, 5.0, 5.0, np.inf]
    together = studentized_range_sf(q, 6, df)
    alone = np.array([studentized_range_sf(np.array([a]), 6, np.array([b]))[0] for a, b in zip(q, df, strict=True)])
    assert together.tobytes() == alone.tobytes()
