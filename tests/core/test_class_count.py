"""Class-count-invariant measures: grouped recall, sweep, JSD, generalization gap, ERC."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.spatial.distance import jensenshannon

from analysis_core import Dataset, evaluate, load_files
from analysis_core.engine.core import run_pass
from analysis_core.stats.class_sweep import class_count_sweep, sample_classes, sweep_run
from analysis_core.stats.error_reject import error_reject_curve
from analysis_core.stats.grouped_recall import grouped_recall
from analysis_core.stats.histograms import histogram_table, jensen_shannon

from ..helpers import run_cli
from .oracle import expected_by_positions, leave_one_out_rows, r_has, ranking_metrics, score_matrix, tie_blocks

ROOT = Path(__file__).resolve().parents[2]


def _clusters(rng, n_classes, per_class, dim=16, noise=0.9):
    y = np.repeat(np.arange(n_classes), per_class)
    X = rng.standard_normal((n_classes, dim))[y] + noise * rng.standard_normal((y.size, dim))
    return X.astype(np.float32), y


def test_recall_drops_with_more_classes_while_grouped_recall_stays_within_its_intervals():
    X, y = _clusters(np.random.default_rng(0), 1000, 5)
    sweep = class_count_sweep(X, y, counts=[100, 1000], repeats=1, group_size=10).set_index("n_classes")
    few, many = sweep.loc[100], sweep.loc[1000]
    assert few["recall_at_1"] - many["recall_at_1"] > 0.1  # a clear drop
    half_few = few["grouped_ci_high"] - few["grouped_recall_at_1"]
    half_many = many["grouped_ci_high"] - many["grouped_recall_at_1"]
    assert abs(few["grouped_recall_at_1"] - many["grouped_recall_at_1"]) <= half_few + half_many


def test_grouped_recall_of_one_group_is_recall_and_in_the_middle_its_interval_is_student_t_over_groups():
    rng = np.random.default_rng(1)
    X, y = _clusters(rng, 12, 6, dim=6, noise=1.5)
    one = grouped_recall(X, y, group_size=12, ks=(1, 4))
    S = score_matrix(X, "cosine")
    ref = [ranking_metrics(rel[np.argsort(-s)], ks=(1, 4)) for _, s, rel in leave_one_out_rows(S, y)]
    assert one.table.set_index("k").loc[1, "mean"] == pytest.approx(np.mean([r["recall_at_1"] for r in ref]), abs=1e-12)
    assert one.table.set_index("k").loc[4, "mean"] == pytest.approx(np.mean([r["recall_at_4"] for r in ref]), abs=1e-12)
    gr = grouped_recall(X, y, group_size=3, ks=(1,), alpha=0.1)
    per = gr.per_group["recall"].to_numpy()
    assert gr.n_dropped_classes == 0 and per.size == 4
    half = stats.t.ppf(0.95, per.size - 1) * per.std(ddof=1) / np.sqrt(per.size)  # issue 10: t, G - 1 df
    row = gr.table.iloc[0]
    assert y.size * min(per.mean(), 1 - per.mean()) >= 10  # many misses and hits: the t interval's domain
    assert row["mean"] == pytest.approx(per.mean())
    assert row["ci_high"] == pytest.approx(min(1.0, per.mean() + half))
    assert row["ci_low"] == pytest.approx(max(0.0, per.mean() - half))
    assert grouped_recall(X, y, group_size=5).n_dropped_classes == 2  # 12 = 2 x 5 + 2 left over


def test_jsd_is_its_definition_and_spans_zero_to_one():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((400, 8)).astype(np.float32)
    r = run_pass(X, rng.integers(0, 4, 400))
    # scipy's jensenshannon is the distance: the square root of the divergence
    assert jensen_shannon(r.hist_pos, r.hist_neg) == pytest.approx(
        jensenshannon(r.hist_pos, r.hist_neg, base=2) ** 2, abs=1e-12)
    assert jensen_shannon(r.hist_pos, r.hist_neg) < 0.02  # random labels: the same distribution
    sep = np.r_[np.tile([1.0, 0.0], (50, 1)), np.tile([-1.0, 0.0], (50, 1))] + 1e-3 * rng.standard_normal((100, 2))
    r = run_pass(sep.astype(np.float32), np.repeat([0, 1], 50))
    assert jensen_shannon(r.hist_pos, r.hist_neg) == pytest.approx(1.0, abs=1e-9)


def test_histogram_table_counts_every_pair_once():
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    ev = evaluate(ds, methods=["lda9"])
    h = histogram_table(ev)
    assert list(h.columns) == ["method", "split", "kind", "bin_left", "bin_right", "count", "density"]
    n = ds.n_items
    assert h["count"].sum() == n * (n - 1) // 2
    for _, part in h.groupby("kind"):
        assert (part["density"] * (part["bin_right"] - part["bin_left"])).sum() == pytest.approx(1.0)


def test_error_reject_curve_with_informative_and_random_confidences():
    rng = np.random.default_rng(3)
    p1 = (rng.random(2000) < 0.6).astype(float)
    ap = np.clip(p1 * 0.7 + rng.random(2000) * 0.3, 0, 1)
    informative = error_reject_curve(ap + 0.1 * rng.standard_normal(2000), ap, p1)
    random = error_reject_curve(rng.random(2000), ap, p1)
    for erc in (informative, random):
        assert erc.curve["error"].iloc[0] == pytest.approx(1 - p1.mean())  # reject 0 % = overall error
        assert (erc.curve["oracle_error"] <= erc.curve["error"] + 1e-12).all()
    assert informative.auc < random.auc - 0.1
    assert informative.spearman > 0.8 and abs(random.spearman) < 0.1
    assert abs(random.curve["error"].iloc[50] - (1 - p1.mean())) < 0.05  # random rejection: flat


@pytest.mark.slow
def test_generalization_gap_on_the_demo_checkpoints(tmp_path):
    out = tmp_path / "rep"
    r = run_cli("report", ROOT / "demo_data" / "many_classes.npz", "--out", out, "--format", "", "--quiet",
                "--sweep-repeats", "1")
    assert r.returncode == 0, r.stderr
    gen = pd.read_csv(out / "tables" / "generalization.csv")
    late = gen[(gen["method"] == "epoch_10")].set_index("metric")
    assert late.loc["recall_at_1", "gap_train_minus_test"] > 0.05  # the late checkpoint fits train better
    g = late.loc["grouped_recall_at_1"]
    assert g["gap_train_minus_test_ci_low"] < g["gap_train_minus_test"] < g["gap_train_minus_test_ci_high"]
    for name in ("grouped_recall", "class_sweep", "histograms", "generalization", "erc", "checkpoints"):
        assert (out / "tables" / f"{name}.csv").exists() and (out / "tables" / f"{name}.tex").exists()
    hist = pd.read_csv(out / "tables" / "histograms.csv")
    assert set(hist["split"]) == {"all", "train", "test"} and set(hist["kind"]) == {"positive", "negative"}
    erc = pd.read_csv(out / "tables" / "erc.csv")
    assert (erc.groupby("method")["spearman"].first() > 0).all()  # demo confidences track difficulty


@pytest.mark.slow
def test_evaluate_cli_group_size_and_max_classes(tmp_path):
    r = run_cli("evaluate", ROOT / "demo_data" / "many_classes.npz", "--group-size", "10", "--max-classes", "200",
                "--seed", "3", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["dataset"]["n_classes"] == 200 and s["dataset"]["sampled_from_classes"] == 600
    g = s["methods"]["epoch_10"]["grouped_recall_at_k"]
    assert g["group_size"] == 10 and g["n_groups"] == 20
    k1 = g["k"]["1"]
    assert k1["ci_low"] < k1["mean"] < k1["ci_high"]
    again = json.loads(run_cli("evaluate", ROOT / "demo_data" / "many_classes.npz", "--group-size", "10",
                               "--max-classes", "200", "--seed", "3", "--quiet").stdout)
    assert again == s  # seeded: the same classes, groups and numbers


def test_evaluate_api_subset_matches_dataset_subset():
    ds = load_files([ROOT / "demo_data" / "many_classes.npz"])
    ev = evaluate(ds, max_classes=50, seed=1, methods=["epoch_3"])
    sub = ds.subset(ev.rows)
    assert np.unique(sub.labels).size == 50
    direct = evaluate(Dataset(labels=sub.labels, embeddings={"epoch_3": sub.embeddings["epoch_3"]}))
    assert ev.summary()["methods"]["epoch_3"]["map"] == direct.summary()["methods"]["epoch_3"]["map"]


@pytest.mark.parametrize("sample", [None, 5])
def test_grouped_recall_interval_covers_with_few_groups_and_stays_in_0_1(sample):
    """3-5 groups: the 95 % interval covers the population mean of grouped Recall@1 in >= 90 % of
    200 seeded draws of classes and never leaves [0, 1]; also when each group (9 queries) ranks a
    sample of 5 of its queries."""
    rng = np.random.default_rng(11)
    n_classes, per, S, dim = 300, 3, 3, 6
    y = np.repeat(np.arange(n_classes), per)
    centres = rng.standard_normal((n_classes, dim)) * 1.2
    spread = rng.uniform(0.2, 1.6, n_classes)  # classes of different difficulty
    X = (centres[y] + spread[y, None] * rng.standard_normal((y.size, dim))).astype(np.float32)
    truth = grouped_recall(X, y, group_size=S, repeats=20, seed=1).table["mean"].iloc[0]
    covered = 0
    for sim in range(200):
        G = 3 + sim % 3
        pick = np.random.default_rng(1000 + sim).choice(n_classes, G * S, replace=False)
        idx = np.nonzero(np.isin(y, pick))[0]
        row = grouped_recall(X[idx], y[idx], group_size=S, seed=sim, query_sample=sample).table.iloc[0]
        assert row["n_groups"] == G
        assert 0.0 <= row["ci_low"] <= row["mean"] <= row["ci_high"] <= 1.0
        covered += row["ci_low"] <= truth <= row["ci_high"]
    assert covered >= 180, covered


def test_grouped_recall_chance_level_equals_random_rankings():
    """The chance level equals a Monte-Carlo estimate: random scores, same class sizes."""
    from analysis_core.stats.grouped_recall import chance_hit_rate
    sizes = np.array([2, 3, 5, 4])
    y = np.repeat(np.arange(sizes.size), sizes)
    n = y.size
    rng = np.random.default_rng(2)
    for k in (1, 2, 4):
        hits = []
        for _ in range(4000):
            scores = rng.random((n, n))
            for q in range(n):
                order = np.argsort(-np.delete(scores[q], q))[:k]
                hits.append(np.any(np.delete(y, q)[order] == y[q]))
        mc = np.mean(hits)
        assert chance_hit_rate(sizes, k) == pytest.approx(mc, abs=4 * np.sqrt(mc * (1 - mc) / len(hits)))
    X = np.random.default_rng(3).standard_normal((n, 4)).astype(np.float32)
    gr = grouped_recall(X, y, group_size=4, ks=(1, 2))
    assert gr.table.set_index("k")["chance"].to_dict() == pytest.approx(
        {1: chance_hit_rate(sizes, 1), 2: chance_hit_rate(sizes, 2)})


def test_grouped_recall_and_erc_results_have_summary_frames_that_agree_with_their_fields():
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(12), 6)
    X = (np.eye(12, 16)[y] * 1.5 + rng.standard_normal((y.size, 16))).astype(np.float32)
    g = grouped_recall(X, y, group_size=4, ks=(1, 2), seed=1)
    f = g.summary_frame()
    block = g.summary_dict()["k"]
    assert list(f["k"]) == [1, 2] and (f["group_size"] == 4).all()
    for r in f.itertuples():
        assert r.mean == pytest.approx(block[str(r.k)]["mean"], abs=0)
    conf = rng.random(30)
    ap = rng.random(30)
    e = error_reject_curve(conf, ap, (ap > 0.5).astype(float), error="ap")
    row = e.summary_frame().iloc[0]
    assert row["auc"] == e.auc and row["spearman"] == e.spearman and row["error"] == "ap"


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**31), n_classes=st.integers(3, 30), share=st.sampled_from([0.05, 0.3, 0.9]))
def test_a_sampled_sweep_point_is_the_stratified_estimate_of_brute_force_metrics_of_its_sampled_queries(
        seed, n_classes, share):
    """A sweep point over more items than ``exact_up_to`` ranks ``query_sample`` queries against
    every item of its C classes: its Recall@1, MAP@R and mAP are sum_h W_h ybar_h of the sampled
    queries' own metrics (brute force over the full score matrix of the C classes, tie-aware: the
    expectation over tie orders; strata from the design, W_h = N_h / N), and the sample is
    stratified by class. Small-integer vectors under the dot product: the scores are integers, the
    same in the engine's float32 as in the oracle's float64 (continuous data have near-ties that
    float32 rounding merges or swaps, which moved MAP@R by 1e-6 at seed 38099), with many ties."""
    rng = np.random.default_rng(seed)
    per_class = int(rng.integers(2, 40))
    y = np.repeat(np.arange(30), per_class)
    X = (rng.integers(-2, 3, (30, 8))[y] * 2 + rng.integers(-2, 3, (y.size, 8))).astype(np.float32)
    n_sample = max(2, int(share * n_classes * per_class))
    row, qs = sweep_run(X, y, n_classes, seed, group_seed=0, group_size=3, similarity="dot",
                        query_sample=n_sample, exact_up_to=0)
    idx = sample_classes(y, n_classes, seed)
    sub = y[idx]
    if n_sample >= idx.size:  # 2 items a class, 3 classes: nothing to sample
        assert qs is None and row["n_queries"] == row["of_queries"] == idx.size
        return
    assert qs is not None and row["n_queries"] == n_sample and row["of_queries"] == idx.size
    S = score_matrix(X[idx], "dot")
    per = []
    for q in qs.chosen:
        others = np.arange(idx.size) != q
        m = expected_by_positions(tie_blocks(S[q, others], sub[others] == sub[q]), ks=(1,))
        per.append(dict(stratum=qs.stratum_of[np.searchsorted(qs.frame, q)], **m))
    per = pd.DataFrame(per)
    W = qs.N_h / qs.N
    for ours, theirs in (("recall_at_1", "recall_at_1"), ("map_at_r", "map_at_r"), ("map", "ap")):
        want = float((per.groupby("stratum")[theirs].mean().sort_index().to_numpy() * W).sum())
        # a plain mean instead of the stratified one is off by ~1e-3
        assert row[ours] == pytest.approx(want, abs=1e-9), ours
    if qs.strata_are_classes:  # equal classes: proportional allocation, up to the rounding
        counts = np.bincount(sub[qs.chosen], minlength=y.max() + 1)[np.unique(sub)]
        assert counts.max() - counts.min() <= 1


def test_a_sweep_with_every_query_sampled_or_under_the_exact_size_is_the_exact_sweep():
    X, y = _clusters(np.random.default_rng(3), 40, 12, dim=8, noise=1.2)
    exact = class_count_sweep(X, y, counts=[5, 20, 40], repeats=2, group_size=5)
    for kw in ({"query_sample": 10_000}, {"query_sample": 50, "exact_up_to": 480}):
        pd.testing.assert_frame_equal(class_count_sweep(X, y, counts=[5, 20, 40], repeats=2, group_size=5, **kw),
                                      exact, check_exact=True)
    sampled = class_count_sweep(X, y, counts=[5, 20, 40], repeats=2, group_size=5, query_sample=50, exact_up_to=100)
    assert (sampled["n_queries"] == np.where(sampled["n_items"] > 100, 50, sampled["n_items"])).all()
    pd.testing.assert_frame_equal(sampled[sampled["n_items"] <= 100], exact[exact["n_items"] <= 100], check_exact=True)
    # Grouped Recall samples too, in the sampled runs' groups of more than 50 queries (5 classes of 12)
    same = sampled["n_items"] <= 100
    pd.testing.assert_series_equal(sampled.loc[same, "grouped_recall_at_1"], exact.loc[same, "grouped_recall_at_1"],
                                   check_exact=True)
    assert not np.allclose(sampled.loc[~same, "grouped_recall_at_1"], exact.loc[~same, "grouped_recall_at_1"])
    np.testing.assert_allclose(sampled.loc[~same, "grouped_recall_at_1"], exact.loc[~same, "grouped_recall_at_1"],
                               atol=0.15)



def _grouped_recall_at_1_by_brute_force(X, y, groups, similarity):
    """Tie-aware Recall@1 within each group of classes (float64 scores, explicit): a query's first
    tie block among its group's other items holds p positives of b items: p / b."""
    S = score_matrix(X, similarity)
    out = []
    for members in groups:
        idx = np.nonzero(np.isin(y, members))[0]
        vals = []
        for q in idx:
            g = idx[idx != q]
            if not (y[g] == y[q]).any():
                continue
            s = S[q, g]
            top = s == s.max()
            vals.append((y[g][top] == y[q]).sum() / top.sum())
        out.append(np.mean(vals) if vals else np.nan)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(3, 9), st.integers(2, 4), st.sampled_from(["dot", "euclidean"]))
def test_grouped_recall_with_sure_hits_equals_the_groups_by_brute_force(seed, n_classes, group_size, similarity):
    """Small integer vectors (exact scores in float32, many exact ties): the sure hits of the pass
    over every item (its Recall@1 = 1) and the groups' passes over the other queries give each
    group's tie-aware Recall@1 exactly as brute force does, on all the classes and on a subset of
    whole classes; and the same per-group table as the passes over every query."""
    from analysis_core.stats.grouped_recall import _partitions, sure_hits

    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, rng.integers(n_classes * 2, n_classes * 8))
    X = (rng.integers(-1, 2, (n_classes, 3))[y] * 2 + rng.integers(-1, 2, (y.size, 3))).astype(np.float32)
    sure = sure_hits(run_pass(X, y, similarity=similarity, ks=(1,)), y.size)
    S = score_matrix(X, similarity)
    for q in range(y.size):  # sure: the first tie block among all other items holds positives only
        others = np.arange(y.size) != q
        s = S[q, others]
        assert sure[q] == bool((y[others] == y[q]).any() and (y[others][s == s.max()] == y[q]).all())
    for idx in (np.arange(y.size), np.nonzero(np.isin(y, np.unique(y)[::2]))[0]):
        Xs, ys = X[idx], y[idx]
        if np.unique(ys).size < group_size:
            continue
        got = grouped_recall(Xs, ys, group_size=group_size, ks=(1, 2), similarity=similarity, seed=seed,
                             sure_hits=sure[idx])
        plain = grouped_recall(Xs, ys, group_size=group_size, ks=(1, 2), similarity=similarity, seed=seed)
        pd.testing.assert_frame_equal(got.per_group, plain.per_group, check_exact=True)
        rows = grouped_recall(X, y, group_size=group_size, ks=(1, 2), similarity=similarity, seed=seed,
                              sure_hits=sure, items=idx)  # the items' rows read from X itself
        pd.testing.assert_frame_equal(rows.per_group, plain.per_group, check_exact=True)
        groups = next(_partitions(np.unique(ys), group_size, seed, 1))[1]
        want = _grouped_recall_at_1_by_brute_force(Xs, ys, groups, similarity)
        np.testing.assert_allclose(got.per_group.query("k == 1")["recall"].to_numpy(), want, rtol=0, atol=1e-12)


def test_a_sweep_with_sure_hits_is_the_sweep_and_the_groups_rank_only_the_other_queries(monkeypatch):
    """On clustered float data (cosine): the sweep and Grouped Recall with the sure hits of the
    full pass equal them without; the groups' passes rank only the queries that are not sure."""
    from analysis_core.stats import grouped_recall as gr_module
    from analysis_core.stats.grouped_recall import sure_hits

    X, y = _clusters(np.random.default_rng(7), 40, 25, dim=16, noise=1.1)
    sure = sure_hits(run_pass(X, y, ks=(1, 2)), y.size)
    assert 0.2 < sure.mean() < 0.95  # some sure, some not: both paths run
    plain = class_count_sweep(X, y, counts=[10, 40], repeats=2, group_size=5)
    ranked: list[int] = []
    original = gr_module.run_pass

    def counting(X, codes, *, is_query=None, **kw):
        ranked.append(len(codes) if is_query is None else int(np.sum(is_query)))
        return original(X, codes, is_query=is_query, **kw)

    monkeypatch.setattr(gr_module, "run_pass", counting)
    fast = class_count_sweep(X, y, counts=[10, 40], repeats=2, group_size=5, sure_hits=sure)
    pd.testing.assert_frame_equal(fast, plain, check_exact=True)
    # every group's pass ranked its not-sure queries only: in all, each sampled run's not-sure items
    assert sum(ranked) < (1 - sure.mean() + 0.1) * sum(len(y) * r for r in (10 / 40, 10 / 40, 1))


def test_the_sweeps_point_with_every_class_reads_the_given_pass_exactly():
    """With the leave-one-out pass over every item given, the point with every class is that
    pass's exact values (no sample, even over exact_up_to), and every other point is the sweep's
    own (the same as without it)."""
    X, y = _clusters(np.random.default_rng(9), 12, 40, dim=8, noise=1.3)
    p = run_pass(X, y, ks=(1, 4))
    opts = dict(counts=[4, 12], repeats=2, group_size=3, query_sample=100, exact_up_to=50)
    plain = class_count_sweep(X, y, **opts)
    got = class_count_sweep(X, y, loo_pass=p, **opts)
    pd.testing.assert_frame_equal(got[got.n_classes == 4], plain[plain.n_classes == 4], check_exact=True)
    assert (plain[plain.n_classes == 12]["n_queries"] < y.size).all()  # sampled without the pass
    row = got[got.n_classes == 12].iloc[0]
    S = score_matrix(X, "cosine")
    ref = [ranking_metrics(rel[np.argsort(-s, kind="stable")], ks=(1,)) for _, s, rel in leave_one_out_rows(S, y)]
    assert row["n_queries"] == row["of_queries"] == y.size
    assert row["recall_at_1"] == pytest.approx(np.mean([r["recall_at_1"] for r in ref]), abs=1e-12)
    assert row["map_at_r"] == pytest.approx(np.mean([r["map_at_r"] for r in ref]), abs=1e-12)
    assert row["map"] == pytest.approx(np.mean([r["ap"] for r in ref]), abs=1e-12)
    assert row["jsd"] == jensen_shannon(p.hist_pos, p.hist_neg)
    whole = grouped_recall(X, y, group_size=3, ks=(1,), seed=0).table.iloc[0]  # group seed of repeat 0
    assert row["grouped_recall_at_1"] == whole["mean"]


def _per_query_recall_at_1_in_groups(X, y, groups, similarity):
    """Per group: (its rows, each query's tie-aware Recall@1 among the group's other items, NaN for
    a query without a positive), float64 scores, explicit."""
    S = score_matrix(X, similarity)
    out = []
    for members in groups:
        idx = np.nonzero(np.isin(y, members))[0]
        vals = np.full(idx.size, np.nan)
        for j, q in enumerate(idx):
            g = idx[idx != q]
            if (y[g] == y[q]).any():
                s = S[q, g]
                top = s == s.max()
                vals[j] = (y[g][top] == y[q]).sum() / top.sum()
        out.append((idx, vals))
    return out


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(4, 9), st.integers(2, 4), st.integers(2, 12),
       st.sampled_from(["dot", "euclidean"]))
@example(14, 9, 2, 3, "dot")  # its third group holds two one-item classes: no query has a positive
def test_a_sampled_grouped_recall_is_the_stratified_estimate_of_its_sampled_queries_by_brute_force(
        seed, n_classes, group_size, m, similarity):
    """``query_sample=m``: each group with more than m queries (with a positive) ranks the stratified
    sample of m of them that ``stratified_sample(codes, frame, m, group_sample_seed(seed, r, g))`` draws, and its
    Recall@1 is sum_h W_h ybar_h of their brute-force tie-aware Recall@1 (small integer vectors:
    exact scores, many ties); with the sure hits of the full pass the same values (they only save
    passes); a group with at most m queries is exact. ``n_observed`` counts the sampled queries."""
    from analysis_core.stats.grouped_recall import _partitions, group_sample_seed, sure_hits
    from analysis_core.stats.sampling import query_frame, stratified_sample

    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, rng.integers(n_classes * 2, n_classes * 8))
    X = (rng.integers(-1, 2, (n_classes, 3))[y] * 2 + rng.integers(-1, 2, (y.size, 3))).astype(np.float32)
    if np.unique(y).size < group_size:
        return
    got = grouped_recall(X, y, group_size=group_size, ks=(1,), similarity=similarity, seed=seed, query_sample=m)
    sure = sure_hits(run_pass(X, y, similarity=similarity, ks=(1,)), y.size)
    fast = grouped_recall(X, y, group_size=group_size, ks=(1,), similarity=similarity, seed=seed, query_sample=m,
                          sure_hits=sure)
    pd.testing.assert_frame_equal(fast.per_group, got.per_group, check_exact=True)
    groups = next(_partitions(np.unique(y), group_size, seed, 1))[1]
    for g, (idx, vals) in enumerate(_per_query_recall_at_1_in_groups(X, y, groups, similarity)):
        row = got.per_group.iloc[g]
        frame = query_frame(y[idx])
        assert row["n_queries"] == frame.size
        assert np.count_nonzero(~np.isnan(vals)) == frame.size  # the frame: the queries with a positive
        if m >= frame.size:  # every query ranked: the group's exact value (NaN: no query has a positive)
            assert row["n_observed"] == frame.size
            want = vals[~np.isnan(vals)].mean() if frame.size else np.nan
            np.testing.assert_allclose(row["recall"], want, rtol=0, atol=1e-12, equal_nan=True)
            continue
        qs = stratified_sample(y[idx], frame, m, group_sample_seed(seed, 0, g))
        W = qs.N_h / qs.N
        strata = qs.stratum_of[np.searchsorted(qs.frame, qs.chosen)]
        want = sum(W[h] * vals[qs.chosen[strata == h]].mean() for h in range(W.size))
        assert row["n_observed"] == m
        assert row["recall"] == pytest.approx(want, abs=1e-12)


@pytest.mark.r_oracle
@pytest.mark.parametrize("noise", [0.6, 0.7, 1.2])
def test_the_grouped_recall_interval_is_r_surveys_for_a_proportion_over_clusters(noise):
    """Equal classes, so that the mean of the groups' means is the pooled mean of their queries and
    the spread over groups is the ultimate-cluster variance: R's ``survey`` package, with the
    groups as clusters (``svydesign(ids = ~group)``) and each query's brute-force Recall@1, gives
    the interval — ``svyciprop(method = "beta")`` (Korn & Graubard) where n min(p, 1 - p) < 10,
    the t interval on G - 1 df (``svyciprop(method = "mean")``, clipped) elsewhere. The noise
    levels reach both, with some misses (R's effective n is 0 / 0 for p = 1; that edge is
    :func:`test_groups_that_all_score_1_get_an_interval_below_1_not_a_point`)."""
    if not r_has("survey"):
        pytest.skip("R's survey package is missing (apt-get install r-cran-survey)")
    from analysis_core.stats.grouped_recall import _partitions

    rng = np.random.default_rng(3)
    n_classes, per, S = 24, 6, 4
    y = np.repeat(np.arange(n_classes), per)
    X = (rng.standard_normal((n_classes, 8))[y] + noise * rng.standard_normal((y.size, 8))).astype(np.float32)
    gr = grouped_recall(X, y, group_size=S, ks=(1,), seed=5, alpha=0.1)
    groups = next(_partitions(np.unique(y), S, 5, 1))[1]
    rows = [dict(group=g, hit=v) for g, (_, vals) in enumerate(_per_query_recall_at_1_in_groups(X, y, groups, "cosine"))
            for v in vals]
    script = """suppressMessages(library(survey)); d <- read.csv(file("stdin"))
des <- svydesign(ids = ~group, data = d)
for (m in c("beta", "mean")) { ci <- svyciprop(~hit, des, method = m, level = 0.9); cat(coef(ci), confint(ci), "\\n") }
"""
    out = subprocess.run(["Rscript", "-e", script], input=pd.DataFrame(rows).to_csv(index=False), capture_output=True,
                         text=True, check=True).stdout.split("\n")
    beta, mean = (np.array(line.split(), float) for line in out[:2])
    row = gr.table.iloc[0]
    assert row["mean"] == pytest.approx(beta[0], abs=1e-6)  # float32 scores against R's float64 brute force
    few = y.size * min(row["mean"], 1 - row["mean"]) < 10  # few misses: Korn-Graubard
    want = beta[1:] if few else np.clip(mean[1:], 0, 1)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx(tuple(want), abs=1e-6)
    assert few == (noise < 1)  # the noise levels reach both branches (R's n_eff not capped at n: checked)
    assert row["mean"] * (1 - row["mean"]) / row["se"] ** 2 < y.size


def test_groups_that_all_score_1_get_an_interval_below_1_not_a_point():
    """Zero variance over groups (every query a hit): the t interval would be the point 1 (what
    undercovered near the ceiling); Korn-Graubard gives [Clopper-Pearson's lower bound at the G - 1
    df effective n, 1]."""
    y = np.repeat(np.arange(12), 5)
    X = (np.eye(12, dtype=np.float32)[y] * 10 + 0.01 * np.random.default_rng(0).standard_normal((60, 12))
         ).astype(np.float32)
    row = grouped_recall(X, y, group_size=3, ks=(1,)).table.iloc[0]
    assert row["mean"] == 1.0 and row["se"] == 0.0 and row["n_groups"] == 4
    n_eff = 60 * (stats.t.ppf(0.975, 59) / stats.t.ppf(0.975, 3)) ** 2
    assert row["ci_high"] == 1.0
    assert row["ci_low"] == pytest.approx(stats.beta.ppf(0.025, n_eff, 1), rel=1e-12)
    assert row["ci_low"] < 0.95


@pytest.mark.parametrize("sample", [None, 8])
def test_evaluate_with_a_query_sample_samples_each_group_and_stays_defined_on_edges(sample):
    """``evaluate(query_sample=n, group_size=S)``: the groups rank at most n of their queries
    (summary says so); on collapsed data (one vector), two classes (one group: no interval) and
    classes of two items nothing raises and no interval claims more than the data hold."""
    rng = np.random.default_rng(2)
    cases = {"collapsed": (np.ones((60, 4), np.float32), np.repeat(np.arange(6), 10)),
             "two classes": (rng.standard_normal((30, 4)).astype(np.float32), np.repeat([0, 1], 15)),
             "pairs": (rng.standard_normal((40, 4)).astype(np.float32), np.repeat(np.arange(20), 2))}
    for name, (X, y) in cases.items():
        ev = evaluate(X, y, ks=(1,), group_size=2, query_sample=sample)
        g = ev.summary()["methods"][ev.methods[0]]["grouped_recall_at_k"]
        assert g["query_sample"] == sample, name
        # groups of more queries than the sample rank the sample only (pairs: groups of 4 queries)
        assert (g["n_observed"] < g["n_queries"]) == (sample is not None and name != "pairs"), name
        k1 = g["k"]["1"]
        if g["n_groups"] < 2:
            assert k1["ci_low"] is None and k1["ci_high"] is None, name
        else:
            assert 0 <= k1["ci_low"] <= k1["mean"] <= k1["ci_high"] <= 1, name
        if name == "collapsed":  # one tie block of everything: a random ranking's hit rate, 9 / 19
            assert k1["mean"] == pytest.approx(9 / 19, abs=1e-12), name
            assert k1["ci_low"] - 1e-12 <= 9 / 19 <= k1["ci_high"] + 1e-12, name


def test_grouped_recall_refuses_a_query_sample_of_fewer_than_two():
    X, y = _clusters(np.random.default_rng(0), 6, 4)
    for bad in (0, 1, -3):
        with pytest.raises(ValueError, match="query_sample must be at least 2"):
            grouped_recall(X, y, group_size=2, query_sample=bad)
