"""faiss top-k against a brute-force ranking."""

from __future__ import annotations

import numpy as np
import pytest

from analysis_core.engine.topk import top_k

from .oracle import score_matrix


@pytest.mark.parametrize("sim", ["cosine", "dot", "euclidean"])
def test_top_k_equals_brute_force(sim):
    rng = np.random.default_rng(4)
    X = rng.standard_normal((300, 7)).astype(np.float32)
    s, idx = top_k(X, 5, similarity=sim)
    S = score_matrix(X, sim)
    np.fill_diagonal(S, -np.inf)
    ref = np.argsort(-S, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_allclose(s, np.take_along_axis(S, ref, 1), atol=1e-5)
    assert not (idx == np.arange(300)[:, None]).any()  # never itself


def test_top_k_for_a_subset_of_queries_and_k_beyond_the_gallery():
    X = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    s, idx = top_k(X, 6, queries=np.array([2]))
    assert idx.shape == (1, 6) and sorted(idx[0, :3].tolist()) == [0, 1, 3] and (idx[0, 3:] == -1).all()
