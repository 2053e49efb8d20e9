"""The metric registry feeds every output: each registry metric reaches the per-query table, the
summary document, the summary frame and the labels; a metric added to it (nDCG, one entry plus
its kernel) is computed by the engine and equals scikit-learn's ``ndcg_score`` on tied rankings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import ndcg_score

from analysis_core import evaluate
from analysis_core.engine.query_metrics import KERNEL_IDS
from analysis_core.metrics.registry import REGISTRY, get_key, label, metric_table, query_columns, summary_metrics


def test_every_registry_kernel_is_dispatched_and_names_are_unique():
    assert {s.kernel for s in REGISTRY if s.kernel} <= set(KERNEL_IDS)
    table = metric_table((1, 3, 10))
    assert len({m.name for m in table}) == len(table)
    assert len({m.column for m in table if m.column}) == len([m for m in table if m.column])
    assert len({label(m.name) for m in summary_metrics((1, 3, 10))}) == len(summary_metrics((1, 3, 10)))


def test_every_registry_metric_reaches_every_output():
    rng = np.random.default_rng(3)
    X, y = rng.standard_normal((40, 5)), rng.integers(0, 4, 40)
    ev = evaluate({"a": X, "b": X[:, ::-1] + 0.1}, y, ks=(1, 3))
    pq, frame, doc = ev.per_query("a"), ev.summary_frame(), ev.to_dict()["methods"]["a"]
    scored = pq[pq["n_positives"] > 0]
    for m in metric_table(ev.ks):
        assert m.name in frame.columns, m.name
        for key in m.keys:
            assert get_key(doc, key) == pytest.approx(frame.loc[frame["method"] == "a", m.name].item(), abs=0), key
        if m.column is not None:  # a mean over the scored queries
            assert get_key(doc, m.key) == pytest.approx(scored[m.column].mean(), rel=1e-12, abs=1e-15)
    assert [m.column for m in query_columns(ev.ks)] == [c for c in pq.columns if c in {
        m.column for m in query_columns(ev.ks)}]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), levels=st.integers(1, 3), n=st.integers(6, 30))
def test_engine_ndcg_equals_scikit_learn_on_tied_rankings(seed, levels, n):
    """Integer vectors under the dot product: exact float32 scores with many ties; scikit-learn
    averages the gains of tied items, the expectation over tie orders."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-levels, levels + 1, (n, 3)).astype(np.float32)
    y = rng.integers(0, 3, n)
    if np.bincount(y).max() < 2 or np.unique(y).size < 2:
        y[:2] = 0
        y[2] = 1
    ev = evaluate(X, y, similarity="dot")
    pq = ev.per_query("embeddings").set_index("query")
    S = X.astype(np.float64) @ X.T.astype(np.float64)
    for i in range(n):
        others = np.arange(n) != i
        rel = (y[others] == y[i]).astype(float)
        if rel.sum() == 0:
            assert np.isnan(pq.loc[i, "ndcg"])
            continue
        want = ndcg_score(rel[None, :], S[i, others][None, :])
        assert pq.loc[i, "ndcg"] == pytest.approx(want, abs=1e-12)
