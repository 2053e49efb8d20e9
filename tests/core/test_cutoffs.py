"""New cutoffs without a new pass (:meth:`Evaluation.with_ks`, :mod:`analysis_core.engine.cutoffs`):
every per-query column and the summary equal a fresh ``evaluate(..., ks=new)`` — on ties, duplicate
vectors, roles, splits, sampled classes and queries, Grouped Recall — and no pass runs; the kept
tie blocks stay within their memory budget, and beyond it the evaluation runs again with the same
results. The new columns are also checked against the expectation summed over the positions of
each positive (:func:`.oracle.expected_by_positions`), an outside oracle."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis_core as ac
from analysis_core import evaluation as evaluation_module
from analysis_core.engine.core import run_pass
from analysis_core.engine.cutoff_plan import CUTOFF_FLOOR, CUTOFF_RANKS, kept_ranks

from .oracle import expected_by_positions, score_matrix, tie_blocks


def _no_pass(monkeypatch) -> list:
    """Count the evaluation's passes (Grouped Recall's own passes are not counted)."""
    calls: list = []

    def spy(*args, **kwargs):
        calls.append(1)
        return run_pass(*args, **kwargs)

    monkeypatch.setattr(evaluation_module, "run_pass", spy)
    return calls


def _same(got: ac.Evaluation, want: ac.Evaluation) -> None:
    assert got.ks == want.ks
    pd.testing.assert_frame_equal(got.per_query(), want.per_query(), check_exact=True)
    for m in want.methods:
        np.testing.assert_array_equal(got.results[m].pr_curves, want.results[m].pr_curves)
    assert json.dumps(got.summary(), sort_keys=True) == json.dumps(want.summary(), sort_keys=True)
    pd.testing.assert_frame_equal(got.summary_frame(), want.summary_frame(), check_exact=True)


def _tied(n: int, levels: int, d: int, classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Vectors on a small integer grid (many exact ties and duplicate vectors)."""
    rng = np.random.default_rng(seed)
    X = rng.integers(1, levels + 1, (n, d)).astype(np.float32)
    return X, rng.integers(0, classes, n)


def _data(case: str):
    rng = np.random.default_rng(7)
    if case == "ties":
        X, y = _tied(240, 3, 3, 6, 1)
        return ac.Dataset(labels=y, embeddings={"a": X, "b": X[:, ::-1].copy()}, source="ties"), {}
    if case == "collapsed":  # few distinct vectors: ranked per item group, expanded to every query
        X, y = _tied(200, 2, 2, 4, 2)
        return ac.Dataset(labels=y, embeddings={"a": X}, source="collapsed"), {}
    y = rng.integers(0, 12, 400)
    centres = rng.standard_normal((12, 16))
    X = (centres[y] + 1.2 * rng.standard_normal((400, 16))).astype(np.float32)
    Z = (centres[y] + 2.5 * rng.standard_normal((400, 16))).astype(np.float32)
    if case == "roles":
        role = rng.choice(["query", "gallery", "both"], 400)
        return ac.Dataset(labels=y, embeddings={"a": X, "b": Z}, role=role, source="roles"), {}
    split = rng.choice(["train", "test"], 400)
    ds = ac.Dataset(labels=y, embeddings={"a": X, "b": Z}, split=split, source="split")
    return ds, {"split": {"split": "test"}, "sample": {"query_sample": 150, "seed": 3},
                "classes": {"max_classes": 7, "seed": 5, "group_size": 3},
                "grouped": {"group_size": 4, "group_repeats": 2},
                "dot64": {"similarity": "dot", "precision": "float64"},
                "euclidean": {"similarity": "euclidean"}}[case]


CASES = ["ties", "collapsed", "roles", "split", "sample", "classes", "grouped", "dot64", "euclidean"]


@pytest.mark.parametrize("case", CASES)
def test_new_cutoffs_equal_a_fresh_evaluation_without_a_pass(case, monkeypatch):
    ds, options = _data(case)
    base = ac.evaluate(ds, ks=(1, 2, 4, 8), **options)
    new = ((3, 5, 16), (1,), (2, 32, 100), (1, 2, 4, 8, CUTOFF_RANKS))
    wants = {ks: ac.evaluate(ds, ks=ks, **options) for ks in new}
    calls = _no_pass(monkeypatch)
    for ks, want in wants.items():
        got = base.with_ks(ks)
        _same(got, want)
        _same(got.with_ks((1, 2, 4, 8)), base)  # and back
        if want.grouped is not None:
            for m in want.methods:
                pd.testing.assert_frame_equal(got.grouped[m].per_group, want.grouped[m].per_group, check_exact=True)
    assert calls == []
    assert base.with_ks((8, 4, 2, 1, 1)) is base  # the same cutoffs: the same evaluation


@pytest.mark.parametrize("case", CASES)
def test_a_new_level_equals_a_fresh_evaluation_without_a_pass(case, monkeypatch):
    """``at_alpha``: every result at another α (query-sample intervals, Grouped Recall's interval,
    the class jackknife's) equals ``evaluate(..., alpha=new)``, and no pass runs (Grouped Recall's
    counted too)."""
    from analysis_core.stats import grouped_recall as grouped_module

    ds, options = _data(case)
    base = ac.evaluate(ds, ks=(1, 2, 4, 8), **options)
    base.class_jackknife()
    wants = {a: ac.evaluate(ds, ks=(1, 2, 4, 8), alpha=a, **options) for a in (0.01, 0.1)}
    for want in wants.values():
        want.class_jackknife()
    calls = _no_pass(monkeypatch)
    monkeypatch.setattr(grouped_module, "run_pass", lambda *a, **k: calls.append(1) or run_pass(*a, **k))
    for a, want in wants.items():
        got = base.at_alpha(a)
        assert got.alpha == a
        _same(got, want)
        for m in (want.grouped or {}):
            pd.testing.assert_frame_equal(got.grouped[m].table, want.grouped[m].table, check_exact=True)
        pd.testing.assert_frame_equal(got.class_jackknife().intervals(a), want.class_jackknife().intervals(a),
                                      check_exact=True)
        _same(got.at_alpha(0.05), base)  # and back
    assert calls == []
    assert base.at_alpha(0.05) is base


@pytest.mark.parametrize("case", ["grouped", "classes"])
def test_grouped_recall_at_new_cutoffs_up_to_32_runs_none_of_its_passes(case, monkeypatch):
    """Grouped Recall's groups kept their Recall@K at every cutoff up to CUTOFF_FLOOR: new cutoffs
    among them run none of its passes, and equal a fresh ``evaluate(..., ks=new)``; beyond, its
    passes run again (the same numbers)."""
    from analysis_core.stats import grouped_recall as grouped_module

    ds, options = _data(case)
    base = ac.evaluate(ds, ks=(1, 2, 4, 8), **options)
    new = [(3, 5, 16), (1,), (2, CUTOFF_FLOOR), (1, CUTOFF_FLOOR + 1)]
    wants = {ks: ac.evaluate(ds, ks=ks, **options) for ks in new}
    calls: list = []
    monkeypatch.setattr(grouped_module, "run_pass", lambda *a, **k: calls.append(1) or run_pass(*a, **k))
    for ks, want in wants.items():
        got = base.with_ks(ks)
        assert (calls == []) == (max(ks) <= CUTOFF_FLOOR)
        for m in want.methods:
            pd.testing.assert_frame_equal(got.grouped[m].per_group, want.grouped[m].per_group, check_exact=True)
            pd.testing.assert_frame_equal(got.grouped[m].table, want.grouped[m].table, check_exact=True)
        _same(got, want)


def test_cutoff_columns_equal_the_expectation_over_each_positives_positions():
    """An outside oracle: Precision@k and Recall@K at cutoffs the pass was not given, summed over
    the positions each positive can take inside its tie block."""
    X, y = _tied(120, 3, 2, 4, 3)
    ks = (3, 5, 7, 13, 50)
    got = ac.evaluate(X, y, ks=(1,), precision="float64").with_ks(ks).per_query()  # the oracle ties in float64
    S = score_matrix(X.astype(np.float64), "cosine")
    n = len(y)
    checked = 0
    for i in range(n):
        mask = np.arange(n) != i
        rel = y[mask] == y[i]
        row = got[got["query"] == i].iloc[0]
        if not rel.any():
            assert np.isnan(row["precision_at_3"]) and np.isnan(row["recall_at_50"])
            continue
        want = expected_by_positions(tie_blocks(S[i, mask], rel), ks=ks)
        for k in ks:
            assert row[f"precision_at_{k}"] == pytest.approx(want[f"precision_at_{k}"], rel=1e-12, abs=1e-12)
            assert row[f"recall_at_{k}"] == pytest.approx(want[f"recall_at_{k}"], rel=1e-12, abs=1e-12)
        checked += 1
    assert checked > 100


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), levels=st.integers(1, 4), n=st.integers(4, 60),
       ks=st.lists(st.integers(1, 70), min_size=1, max_size=4))
def test_with_ks_equals_a_pass_on_random_tied_data(seed, levels, n, ks):
    X, y = _tied(n, levels, 2, 3, seed)
    y[:2] = 0  # a class of two: retrieval is possible
    y[2] = 1
    ds = ac.Dataset(labels=y, embeddings={"a": X}, source="random")
    _same(ac.evaluate(ds, ks=(1, 2)).with_ks(tuple(ks)), ac.evaluate(ds, ks=tuple(ks)))


def test_kept_ranks_is_the_largest_rank_whose_bound_fits_the_budget():
    rng = np.random.default_rng(0)
    for _ in range(200):
        entries = rng.integers(0, 50, rng.integers(0, 30))
        n_queries = int(entries.size + rng.integers(0, 5))
        budget = float(rng.integers(0, 4000))
        ranks = int(rng.integers(0, 80))
        got = kept_ranks(entries, n_queries, ranks, budget, 4)
        fits = [c for c in range(ranks + 1) if 16 * n_queries + 12 * int(np.minimum(entries, c).sum()) <= budget]
        assert got == max(fits, default=0)
        floor = int(rng.integers(0, 40))
        assert kept_ranks(entries, n_queries, ranks, budget, 4, floor) == max([min(floor, ranks), *fits])


@pytest.mark.parametrize("budget_mb", [0.0, 0.05, 0.2, 1.0])
def test_a_pass_keeps_its_blocks_within_the_budget_and_exact_below_its_rank(budget_mb):
    X, y = _tied(600, 20, 3, 5, 4)
    r = run_pass(X, y, ks=(1, 2), cutoff_ranks=1024, cutoff_mb=budget_mb)
    b = r.cutoff_blocks
    assert CUTOFF_FLOOR <= b.max_rank <= 1024
    if b.max_rank > CUTOFF_FLOOR:
        assert b.nbytes <= budget_mb * 2**20
    else:  # the floor's cost: at most 32 blocks and two offsets per query
        assert b.T.size <= CUTOFF_FLOOR * y.size and b.nbytes <= y.size * (16 + 12 * CUTOFF_FLOOR)
    from analysis_core.engine.cutoffs import answers, with_cutoffs

    ks = (1, b.max_rank)
    assert answers(r, ks) and not answers(r, (1, b.max_rank + 1))
    want = run_pass(X, y, ks=ks)
    np.testing.assert_array_equal(with_cutoffs(r, ks).values, want.values)
    assert run_pass(X, y, ks=ks, cutoff_ranks=5).cutoff_blocks.max_rank == 5  # never beyond the rank asked
    assert run_pass(X, y, ks=ks).cutoff_blocks is None  # nothing asked, nothing kept


def test_beyond_the_kept_rank_the_evaluation_runs_again_with_the_same_results(monkeypatch):
    monkeypatch.setattr(evaluation_module, "CUTOFF_MB", 0.0)  # the floor only
    ds, _ = _data("ties")
    base = ac.evaluate(ds, ks=(1, 2))
    kept = min(r.cutoff_blocks.max_rank for r in base.results.values())
    assert kept == CUTOFF_FLOOR
    calls = _no_pass(monkeypatch)
    _same(base.with_ks((1, kept)), ac.evaluate(ds, ks=(1, kept)))
    assert calls == [1, 1]  # the fresh evaluation's two methods; with_ks ran none
    _same(base.with_ks((1, kept + 1)), ac.evaluate(ds, ks=(1, kept + 1)))
    assert calls == [1] * 6  # with_ks ran both methods again, then the fresh evaluation


def test_with_ks_refuses_bad_cutoffs_as_evaluate_does():
    ev = ac.evaluate(*_tied(50, 3, 2, 3, 0))
    for bad in ((), (0,), (2.5,), "1,2"):
        with pytest.raises(ac.InputError):
            ev.with_ks(bad)
