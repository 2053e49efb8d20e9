"""Delete-a-group replicates from one pass (``analysis_core.engine.replicates``) against the oracle
they replaced: a pass on the remaining items for every group of classes deleted (queries and
gallery), its per-query means over the scored queries. On data whose scores are exact whatever the
BLAS kernel (small integers: dot products and distances are exact sums), so ties are the same
ties in both, and on float64 cosine data; with ties, collapsed duplicates (within and across
classes), roles, every phase-2 kernel, several tiles, memory chunks, threads and Dask workers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import analysis_core as ac
from analysis_core.engine.core import KERNELS, run_pass
from analysis_core.numerics import fsum_mean
from analysis_core.stats.class_jackknife import class_groups, replicate_plan

KS = tuple(range(1, 33))


def g_pass_replicates(X, codes, groups, *, is_query=None, is_gallery=None, **kw):
    """The oracle: for each group, a pass on the items of the other classes; the fsum mean of
    each per-query column over its scored queries. (groups, columns) and the scored counts."""
    out, counts = [], []
    for members in groups:
        keep = ~np.isin(codes, members)
        r = run_pass(X[keep], codes[keep], is_query=None if is_query is None else is_query[keep],
                     is_gallery=None if is_gallery is None else is_gallery[keep], ks=KS, **kw)
        scored = r.values[:, 0] > 0
        out.append({c: fsum_mean(r.values[scored, r.columns.index(c)]) for c in r.columns})
        counts.append(int(scored.sum()))
    return out, counts


def assert_replicates_equal(r, oracle, counts):
    assert r.replicate_means is not None and len(r.replicate_columns) > 40
    for g, want in enumerate(oracle):
        got = r.replicate_means[g]
        ref = np.array([want[c] for c in r.replicate_columns])
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12, equal_nan=True, err_msg=f"group {g}")
        assert r.replicate_n[g] == counts[g]


def integer_data(rng, n, d, n_classes, dup_share, cross_class_dups, spread=2):
    """Small-integer embeddings (exact scores in float32: many exact ties) with duplicate rows."""
    codes = rng.integers(0, n_classes, n)
    codes[:n_classes] = np.arange(n_classes)
    centres = rng.integers(-spread, spread + 1, (n_classes, d))
    X = (centres[codes] + rng.integers(-spread, spread + 1, (n, d))).astype(np.float32)
    n_dup = int(dup_share * n)
    if n_dup:
        src = rng.integers(0, n, n_dup)
        dst = rng.integers(0, n, n_dup)
        X[dst] = X[src]
        if not cross_class_dups:
            codes[dst] = codes[src]
    return X, codes


def plan_for(codes, is_query, is_gallery, max_groups, seed):
    plan = replicate_plan(codes, is_query, is_gallery, max_groups, seed)
    assert not plan.why
    return plan


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31), n=st.integers(12, 90), n_classes=st.integers(3, 9), d=st.integers(1, 5),
       dup_share=st.sampled_from([0.0, 0.3]), cross=st.booleans(), roles=st.sampled_from(["loo", "split", "mixed"]),
       similarity=st.sampled_from(["dot", "euclidean"]), kernel=st.sampled_from(KERNELS),
       max_groups=st.integers(2, 6), threads=st.sampled_from([1, 2]))
def test_replicates_from_one_pass_equal_a_pass_per_group(seed, n, n_classes, d, dup_share, cross, roles, similarity,
                                                         kernel, max_groups, threads):
    rng = np.random.default_rng(seed)
    X, codes = integer_data(rng, n, d, n_classes, dup_share, cross)
    isq = isg = None
    if roles == "split":
        isq = rng.random(n) < 0.4
        isg = ~isq
    elif roles == "mixed":  # query-only, gallery-only and both; a gallery-only distractor class
        r = rng.integers(0, 3, n)
        isq, isg = r != 1, r != 0
        isq[codes == codes.max()] = False
    plan = replicate_plan(codes, isq, isg, max_groups, seed % 7)
    if plan.why:
        return  # fewer than three classes with a scored query: no replicate (tested below)
    kw = dict(similarity=similarity, kernel=kernel, is_query=isq, is_gallery=isg)
    r = run_pass(X, codes, n_threads=threads, **kw, **plan.pass_options())
    oracle, counts = g_pass_replicates(X, codes, plan.groups, **kw)
    assert_replicates_equal(r, oracle, counts)
    # the pass's own metrics do not depend on the groups it counted
    plain = run_pass(X, codes, n_threads=threads, **kw)
    a, b = plain.values[np.argsort(plain.query_items)], r.values[np.argsort(r.query_items)]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12, equal_nan=True)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["auto", "search", "general"])
@pytest.mark.parametrize("roles", [False, True])
def test_several_tiles_and_memory_chunks_give_the_same_replicates(kernel, roles):
    """1 400 items in 3 tiles, 30 classes in 7 groups, with duplicates; the queries cut into
    chunks by a small memory budget, two threads: equal to the G passes, and the same bits as one
    chunk on one thread."""
    rng = np.random.default_rng(5)
    X, codes = integer_data(rng, 1400, 4, 30, 0.1, False, spread=3)
    isq = isg = None
    if roles:
        isq = rng.random(codes.size) < 0.3
        isg = ~isq | (rng.random(codes.size) < 0.5)
    plan = plan_for(codes, isq, isg, 7, 3)
    kw = dict(similarity="dot", kernel=kernel, is_query=isq, is_gallery=isg)
    one = run_pass(X, codes, n_threads=1, **kw, **plan.pass_options())
    chunked = run_pass(X, codes, n_threads=2, memory_mb=1, **kw, **plan.pass_options())
    np.testing.assert_array_equal(one.replicate_means, chunked.replicate_means)
    oracle, counts = g_pass_replicates(X, codes, plan.groups, **kw)
    assert_replicates_equal(one, oracle, counts)


@pytest.mark.parametrize("similarity", ["cosine", "euclidean"])
def test_float64_replicates_equal_a_pass_per_group(similarity):
    """Float64 scores of float64 embeddings (no float32 ties), with exact duplicates."""
    rng = np.random.default_rng(11)
    codes = np.repeat(np.arange(9), 12)
    X = rng.standard_normal((9, 6))[codes] + 0.9 * rng.standard_normal((codes.size, 6))
    X[5::17] = X[3]  # duplicates of one row, within and across classes
    plan = plan_for(codes, None, None, 4, 0)
    kw = dict(similarity=similarity, precision="float64")
    r = run_pass(X, codes, **kw, **plan.pass_options())
    oracle, counts = g_pass_replicates(X, codes, plan.groups, **kw)
    assert_replicates_equal(r, oracle, counts)


def test_classes_in_no_group_are_never_deleted_and_lone_queries_count_nowhere():
    """Groups that leave classes out (the items of -1 stay in every replicate), a class of one
    item (a lone query), and a group with no scored query left (NaN, n = 0)."""
    rng = np.random.default_rng(2)
    X, codes = integer_data(rng, 60, 3, 6, 0.0, False)
    codes[0] = 6  # a class of one item: a lone query
    groups = [np.array([0, 1]), np.array([2])]
    dg = np.full(codes.size, -1)
    for g, m in enumerate(groups):
        dg[np.isin(codes, m)] = g
    r = run_pass(X, codes, similarity="dot", delete_groups=dg, replicate_ks=KS)
    oracle, counts = g_pass_replicates(X, codes, groups, similarity="dot")
    assert_replicates_equal(r, oracle, counts)
    keep = np.isin(codes, [0, 1, 6])  # classes 0 and 1 in group 0, the lone query in none
    r2 = run_pass(X[keep], codes[keep], similarity="dot", delete_groups=np.where(codes[keep] == 6, -1, 0),
                  replicate_ks=KS)
    assert r2.replicate_n.tolist() == [0] and np.isnan(r2.replicate_means).all()


def test_bad_groups_are_refused():
    X = np.eye(4, dtype=np.float32)
    with pytest.raises(ValueError, match="delete_groups"):
        run_pass(X, np.arange(4), delete_groups=np.array([0, 1]))
    with pytest.raises(ValueError, match="delete_groups"):
        run_pass(X, np.arange(4), delete_groups=np.array([0, -2, 1, 1]))


def test_an_evaluation_counts_its_jackknife_in_its_passes(monkeypatch):
    """``evaluate`` counts the default jackknife's replicates: ``class_jackknife()`` runs no pass
    and equals the jackknife of a pass per group through the public API (each group of classes
    deleted and the rest evaluated); another grouping costs one pass per method."""
    from analysis_core.engine import core

    rng = np.random.default_rng(4)
    codes = np.repeat(np.arange(25), 6)
    base = rng.standard_normal((25, 8))[codes]
    X = {"a": (base + rng.standard_normal(base.shape)).astype(np.float32),
         "b": (base + 1.3 * rng.standard_normal(base.shape)).astype(np.float32)}
    ev = ac.evaluate(X, codes)
    calls: list = []
    original = core.run_pass
    monkeypatch.setattr(core, "run_pass", lambda *a, **k: calls.append(1) or original(*a, **k))
    jk = ev.class_jackknife()
    assert calls == [] and jk.n_units == 20 and jk.notes == ["25 classes in 20 jackknife groups (seed 0)"]
    assert [sorted(g) for g in jk.groups] == [sorted(g.tolist()) for g in class_groups(np.arange(25), 20, 0)]
    for g, members in enumerate(jk.groups):
        keep = ~np.isin(codes, members)
        sub = ac.evaluate({m: x[keep] for m, x in X.items()}, codes[keep], jackknife_groups=None)
        for i, m in enumerate(jk.methods):
            col = sub.per_query(m).query("n_positives > 0")
            for name, c in (("map", "ap"), ("map_at_r", "map_at_r"), ("recall_at_1", "recall_at_1")):
                assert jk.replicates[g, i, jk.metrics.index(name)] == pytest.approx(fsum_mean(col[c]), abs=1e-12)
    other = ev.class_jackknife(max_groups=5)
    assert len(calls) == 2 and other.n_units == 5


@pytest.mark.dask
def test_dask_workers_carry_the_counts():
    pytest.importorskip("distributed")
    from analysis_core.engine.distributed import DaskCompute

    rng = np.random.default_rng(8)
    X, codes = integer_data(rng, 700, 4, 12, 0.1, False)
    plan = plan_for(codes, None, None, 5, 1)
    here = run_pass(X, codes, similarity="dot", **plan.pass_options())
    with DaskCompute(workers=2) as compute:
        there = run_pass(X, codes, similarity="dot", compute=compute, **plan.pass_options())
    np.testing.assert_array_equal(here.replicate_means, there.replicate_means)
    np.testing.assert_array_equal(here.replicate_n, there.replicate_n)
    oracle, counts = g_pass_replicates(X, codes, plan.groups, similarity="dot")
    assert_replicates_equal(there, oracle, counts)


def test_the_first_runs_kernel_signatures_are_those_a_default_evaluation_compiles():
    """``engine.compiled`` compiles a fresh install's kernels ahead, for the argument types of a
    default float32 evaluation (its passes count the jackknife) and of a pass without it: each
    listed signature is one that such passes compile (else the first run compiles twice)."""
    import importlib

    from analysis_core.engine import compiled

    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(6), 30)
    X = (rng.standard_normal((6, 8))[y] + rng.standard_normal((y.size, 8))).astype(np.float32)
    ac.evaluate(X, y, n_threads=2)
    run_pass(X, y, n_threads=2)
    sigs = compiled._signatures()
    for module, name in compiled.HELPER_SHARE + compiled.OWN_SHARE:
        fn = getattr(importlib.import_module(f"analysis_core.engine.{module}"), name)
        assert sigs[module, name] in fn.signatures, (module, name, fn.signatures)
