"""Scale-out: the pass on Dask (a LocalCluster, and a scheduler + two worker processes on
127.0.0.1) equals the in-process pass bit for bit, survives a killed worker, fails clearly when
every worker is gone; query sampling's intervals cover the exact mAP and shrink like 1/sqrt(n)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.dask
pytest.importorskip("distributed")

from analysis_core.cli import main as cli_main  # noqa: E402
from analysis_core.engine.core import run_pass  # noqa: E402
from analysis_core.engine.distributed import DaskCompute  # noqa: E402
from analysis_core.errors import ComputeError  # noqa: E402
from analysis_core.evaluation import evaluate  # noqa: E402
from analysis_core.io import load_files  # noqa: E402
from analysis_core.metrics.registry import get_key, metric_table  # noqa: E402
from analysis_core.stats.sampling import stratified_sample  # noqa: E402
from analysis_core.stats.variability import ap_frame, class_summary  # noqa: E402

from ..helpers import free_port  # noqa: E402

DEMO = Path(__file__).resolve().parents[2] / "demo_data"


def assert_identical(a, b) -> None:
    assert a.columns == b.columns
    np.testing.assert_array_equal(a.query_items, b.query_items)
    assert a.values.tobytes() == b.values.tobytes()  # bit for bit, NaN rows included
    assert a.pr_curves.tobytes() == b.pr_curves.tobytes()
    np.testing.assert_array_equal(a.hist_pos, b.hist_pos)
    np.testing.assert_array_equal(a.hist_neg, b.hist_neg)
    assert (a.sum_pos, a.sum_neg) == (b.sum_pos, b.sum_neg)


def clustered(n: int, d: int, n_classes: int, seed: int, dup_share: float = 0.0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, n)
    X = (rng.standard_normal((n_classes, d))[y] * 0.6 + rng.standard_normal((n, d))).astype(np.float32)
    X = np.round(X, 1)  # coarse values: exact ties between different vectors
    if dup_share:
        k = int(n * dup_share)
        X[:k] = X[rng.integers(k, n, k)]  # exact duplicates (the general kernel)
    return X, y


def test_local_cluster_equals_in_process_bit_for_bit():
    X, y = clustered(3000, 24, 30, 0, dup_share=0.05)
    Xl, yl = clustered(2600, 16, 12, 1)
    role_q = np.random.default_rng(2).random(2600) < 0.3
    with DaskCompute(workers=2, tasks_per_worker=5) as dc:
        assert dc.n_workers() == 2
        for kw in ({"similarity": "cosine"}, {"similarity": "euclidean"}):
            assert_identical(run_pass(X, y, **kw), run_pass(X, y, compute=dc, **kw))
        assert_identical(run_pass(Xl, yl), run_pass(Xl, yl, compute=dc))  # the fast leave-one-out kernel
        # roles: queries against a gallery, chunked by a small memory budget as well
        kw = {"is_query": role_q, "is_gallery": ~role_q | (np.arange(2600) % 2 == 0)}
        assert_identical(run_pass(Xl, yl, **kw), run_pass(Xl, yl, compute=dc, memory_mb=1, **kw))
        # per-query pair histograms and sums (query sampling's pair statistics)
        kw = {"is_query": np.random.default_rng(3).random(3000) < 0.2, "is_gallery": np.ones(3000, bool)}
        a, b = run_pass(X, y, per_query_pairs=True, **kw), run_pass(X, y, compute=dc, per_query_pairs=True, **kw)
        assert_identical(a, b)
        np.testing.assert_array_equal(a.query_hist, b.query_hist)
        assert a.query_pair_sums.tobytes() == b.query_pair_sums.tobytes()
        ds = load_files([str(DEMO / "digits.npz")])
        assert evaluate(ds).summary() == evaluate(ds, compute=dc).summary()
        assert (evaluate(ds, query_sample=200, seed=1).summary()
                == evaluate(ds, query_sample=200, seed=1, compute=dc).summary())
        # precision float64 on float64 data with near-ties: the workers' dgemm tiles, the same bits
        X64 = X.astype(np.float64) + 1e-9 * np.random.default_rng(4).standard_normal(X.shape)
        assert_identical(run_pass(X64, y, precision="float64"), run_pass(X64, y, compute=dc, precision="float64"))
        kw = {"is_query": role_q, "is_gallery": np.ones(2600, bool), "per_query_pairs": True, "precision": "float64"}
        a, b = run_pass(Xl.astype(np.float64), yl, **kw), run_pass(Xl.astype(np.float64), yl, compute=dc, **kw)
        assert_identical(a, b)
        assert a.query_pair_sums.tobytes() == b.query_pair_sums.tobytes()


# ---------------------------------------------------------------- a scheduler and workers as processes

class Cluster:
    """``dask scheduler`` and ``dask worker`` processes (no nanny: a killed worker stays dead)."""

    def __init__(self, n_workers: int) -> None:
        dask_cli = str(Path(sys.executable).parent / "dask")
        self.address = f"tcp://127.0.0.1:{free_port()}"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "start_new_session": True}
        port = self.address.rsplit(":", 1)[1]
        self.scheduler = subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", port,
                                           "--no-dashboard"], **common)
        self.workers = [subprocess.Popen([dask_cli, "worker", self.address, "--host", "127.0.0.1", "--nthreads", "1",
                                          "--no-nanny", "--no-dashboard", "--name", f"w{i}"], **common)
                        for i in range(n_workers)]

    def wait_for_workers(self, client_compute: DaskCompute, n: int) -> None:
        t0 = time.monotonic()
        while client_compute.n_workers() < n:
            assert time.monotonic() - t0 < 60, "workers did not connect"
            time.sleep(0.2)

    def kill_worker(self, i: int) -> None:
        self.workers[i].send_signal(signal.SIGKILL)
        self.workers[i].wait(10)

    def close(self) -> None:
        for p in [*self.workers, self.scheduler]:
            if p.poll() is None:
                p.kill()
                p.wait(10)


@pytest.fixture
def cluster2():
    c = Cluster(2)
    try:
        yield c
    finally:
        c.close()


def _connect(cluster: Cluster, n: int, **kw) -> DaskCompute:
    t0 = time.monotonic()
    while True:  # the scheduler process may not listen yet
        try:
            dc = DaskCompute(scheduler=cluster.address, connect_timeout=5, **kw).start()
            break
        except ComputeError:
            assert time.monotonic() - t0 < 60, "scheduler did not start"
    cluster.wait_for_workers(dc, n)
    return dc


def test_scheduler_and_two_worker_processes_equal_in_process(cluster2, tmp_path):
    X, y = clustered(3000, 24, 30, 3, dup_share=0.03)
    dc = _connect(cluster2, 2, tasks_per_worker=4)
    try:
        assert_identical(run_pass(X, y), run_pass(X, y, compute=dc))
    finally:
        dc.close()
    # the command line on the same cluster writes the same per-query table as in-process
    src = str(DEMO / "digits.npz")
    assert cli_main(["evaluate", src, "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert cli_main(["evaluate", src, "--out", str(tmp_path / "b"), "--quiet", "--scheduler", cluster2.address]) == 0
    assert (tmp_path / "a" / "per_query.csv").read_bytes() == (tmp_path / "b" / "per_query.csv").read_bytes()
    a, b = (json.loads((tmp_path / x / "summary.json").read_text()) for x in "ab")
    assert a["provenance"]["options"].get("scheduler") is None  # provenance records where each ran
    a.pop("provenance"), b.pop("provenance")
    assert a == b  # every number equal


def test_a_worker_killed_mid_run_gives_identical_results(cluster2):
    X, y = clustered(9000, 48, 60, 4)
    expected = run_pass(X, y)
    dc = _connect(cluster2, 2, tasks_per_worker=12)
    seen = []

    def kill_on_first_block(done: int, total: int, stage: str) -> None:
        seen.append(done)
        if done >= 1 and cluster2.workers[0].poll() is None:
            cluster2.kill_worker(0)  # it is busy with its next block: Dask reruns that block elsewhere

    try:
        got = run_pass(X, y, compute=dc, progress=kill_on_first_block)
        assert cluster2.workers[0].poll() is not None
        t0 = time.monotonic()
        while dc.n_workers() != 1:  # the scheduler has dropped the dead worker
            assert time.monotonic() - t0 < 30
            time.sleep(0.2)
    finally:
        dc.close()
    assert max(seen) == seen[-1] and seen[-1] > 1
    assert_identical(expected, got)


def test_every_worker_lost_fails_with_a_clear_message_and_nothing_partial():
    c = Cluster(1)
    try:
        dc = _connect(c, 1, tasks_per_worker=20, no_worker_timeout=3)
        X, y = clustered(6000, 32, 40, 5)

        def kill(done: int, total: int, stage: str) -> None:
            if done >= 1 and c.workers[0].poll() is None:
                c.kill_worker(0)

        with pytest.raises(ComputeError, match="lost (all its|the) workers.*No partial result"):
            run_pass(X, y, compute=dc, progress=kill)
        dc.close()
    finally:
        c.close()


def test_unreachable_scheduler_exits_3_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli_main(["evaluate", str(DEMO / "digits.npz"), "--out", str(out), "--quiet",
                   "--scheduler", f"tcp://127.0.0.1:{free_port()}"])
    err = capsys.readouterr().err
    assert rc == 3 and "cannot reach the Dask scheduler" in err and "Traceback" not in err
    assert not out.exists()


# ---------------------------------------------------------------- query sampling

def _flat(summary: dict, ks: tuple[int, ...]) -> dict[str, float]:
    """The full run's value of every metric that gets an interval under sampling: every metric
    of the registry, and the share of queries with mixed ties."""
    out = {m.name: get_key(summary, m.key) for m in metric_table(ks)}
    out["share_queries_with_mixed_ties"] = summary["ties"]["share_queries_with_mixed_ties"]
    return out


@pytest.mark.parametrize("name,n", [("digits.npz", 100), ("many_classes.npz", 300)])
def test_sampled_intervals_cover_the_exact_values(name, n):
    """mAP: >= 90 of 100 seeded 95 % intervals cover the full run's value (the acceptance line).
    Every other summary metric gets an interval too; they are held to >= 87 of 100 (the pair
    statistics are nonlinear: ratio and bootstrap intervals)."""
    ds = load_files([str(DEMO / name)])
    m = ds.methods[0]
    full = evaluate(ds, methods=[m])
    exact = _flat(full.summary()["methods"][m], full.ks)
    covered = dict.fromkeys(exact, 0)
    for seed in range(100):
        s = evaluate(ds, methods=[m], query_sample=n, seed=seed).summary()
        ivs = s["methods"][m]["intervals"]
        assert set(ivs) == set(exact) and s["dataset"]["n_queries"] == n
        assert ivs["map"]["low"] < ivs["map"]["estimate"] < ivs["map"]["high"]
        for k, v in exact.items():
            covered[k] += ivs[k]["low"] <= v <= ivs[k]["high"]
    assert covered["map"] >= 90, covered
    assert min(covered.values()) >= 87, covered


def test_interval_width_shrinks_like_one_over_sqrt_n():
    ds = load_files([str(DEMO / "digits.npz")])
    m = "pixels"  # a method of moderate mAP (lda9, first in natural order, is near 1: hit-rate intervals)
    N = ds.n_items
    widths = {}
    for n in (60, 240, 960):
        w = [evaluate(ds, methods=[m], query_sample=n, seed=s).summary()["methods"][m]["intervals"]["map"]
             for s in range(30)]
        widths[n] = np.median([x["high"] - x["low"] for x in w])
    for a, b in ((60, 240), (240, 960)):
        theory = np.sqrt((1 - a / N) / a) / np.sqrt((1 - b / N) / b)  # 1/sqrt(n) with the finite-population factor
        assert widths[a] / widths[b] == pytest.approx(theory, rel=0.15)


@pytest.mark.parametrize("similarity", ["cosine", "euclidean"])
def test_per_query_pair_statistics_equal_brute_force(similarity):
    X, y = clustered(1400, 12, 15, 6, dup_share=0.04)
    q = np.random.default_rng(7).random(1400) < 0.25
    r = run_pass(X, y, is_query=q, is_gallery=np.ones(1400, bool), similarity=similarity, per_query_pairs=True,
                 n_bins=40, memory_mb=1, n_threads=2)
    qi = r.query_items
    X64 = X.astype(np.float64)
    if similarity == "cosine":
        Xn = X64 / np.linalg.norm(X64, axis=1, keepdims=True)
        S = Xn[qi] @ Xn.T
    else:
        S = -np.sqrt(((X64[qi, None, :] - X64[None, :, :]) ** 2).sum(-1))
    other = qi[:, None] != np.arange(1400)[None, :]
    same = (y[qi][:, None] == y[None, :]) & other
    diff = (y[qi][:, None] != y[None, :]) & other
    np.testing.assert_array_equal(r.query_hist[:, 1].sum(1), same.sum(1))
    np.testing.assert_array_equal(r.query_hist[:, 0].sum(1), diff.sum(1))
    np.testing.assert_allclose(r.query_pair_sums[:, 1], np.where(same, S, 0).sum(1), atol=1e-4)
    np.testing.assert_allclose(r.query_pair_sums[:, 0], np.where(diff, S, 0).sum(1), atol=1e-4)
    # bins: brute-force binning of float64 scores agrees, except for scores within float32
    # rounding of a bin edge (each such pair can move one count between two bins)
    edges = r.hist_edges
    pos = (S - edges[0]) / (edges[1] - edges[0])
    k = np.clip(np.floor(pos).astype(int), 0, 39)
    near_edge = (np.abs(pos - np.round(pos)) < 1e-4) & (pos > 0.5) & (pos < 39.5)
    for j, mask in ((1, same), (0, diff)):
        brute = np.stack([np.bincount(k[s][mask[s]], minlength=40) for s in range(qi.size)])
        assert np.abs(brute - r.query_hist[:, j]).sum() <= 2 * (near_edge & mask).sum()
    # leave-one-out: every unordered pair is counted from both ends, so the per-query histograms
    # add up to twice the pass's own pair histogram, exactly
    loo = run_pass(X, y, similarity=similarity, per_query_pairs=True, n_bins=40)
    np.testing.assert_array_equal(loo.query_hist[:, 1].sum(0), 2 * loo.hist_pos)
    np.testing.assert_array_equal(loo.query_hist[:, 0].sum(0), 2 * loo.hist_neg)
    assert loo.query_pair_sums[:, 1].sum() == pytest.approx(2 * loo.sum_pos, rel=1e-9)


def test_stratified_sample_is_proportional_seeded_and_merges_small_classes():
    rng = np.random.default_rng(0)
    codes = rng.integers(0, 7, 3000)
    frame = np.nonzero(rng.random(3000) < 0.9)[0]
    s = stratified_sample(codes, frame, 500, seed=1)
    assert s.strata_are_classes and s.n == 500 and np.unique(s.chosen).size == 500
    assert np.isin(s.chosen, frame).all()
    expected = 500 * s.N_h / s.N
    assert np.all(np.abs(s.n_h - expected) < 1)
    got = np.bincount(codes[s.chosen], minlength=7)
    np.testing.assert_array_equal(np.sort(got), np.sort(s.n_h))
    np.testing.assert_array_equal(stratified_sample(codes, frame, 500, seed=1).chosen, s.chosen)
    assert not np.array_equal(stratified_sample(codes, frame, 500, seed=2).chosen, s.chosen)
    # 1000 classes of 3 and a sample of 300: classes merged into strata of >= 2 expected queries
    codes = np.repeat(np.arange(1000), 3)
    s = stratified_sample(codes, np.arange(3000), 300, seed=0)
    assert not s.strata_are_classes and s.n_h.min() >= 2 and s.n == 300
    assert np.all(np.abs(s.n_h - 300 * s.N_h / 3000) < 1)


def test_per_class_table_says_how_many_queries_each_class_contributed(tmp_path):
    ds = load_files([str(DEMO / "digits.npz")])
    m = ds.methods[0]
    ev = evaluate(ds, methods=[m], query_sample=150, seed=7)
    table = class_summary(ap_frame(ev), ev.class_query_counts())
    sampled = ev.per_query()["label"].astype(str).value_counts()
    population = {str(k): v for k, v in zip(*np.unique(ds.labels, return_counts=True), strict=True)}
    for _, row in table.iterrows():
        assert row["n_queries"] == sampled[row["label"]]
        assert row["of_queries"] == population[row["label"]]
    assert table["n_queries"].sum() == 150
    # the command line: intervals for every mean, the sampled rows only, and the report's class table
    out = tmp_path / "ev"
    assert cli_main(["evaluate", str(DEMO / "digits.npz"), "--query-sample", "150", "--seed", "7", "--out", str(out),
                     "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    iv = summary["methods"][m]["intervals"]
    assert {"map", "map_at_r", "r_precision", "precision_at_1", "mrr", "recall_at_1", "recall_at_8",
            "precision_at_8", "share_queries_with_mixed_ties"} <= set(iv)
    assert summary["methods"][m]["map"]["expected"] == iv["map"]["estimate"]
    assert "Satterthwaite" in summary["dataset"]["query_sample"]["method"]
    assert sum(1 for _ in open(out / "per_query.csv")) - 1 == 150 * len(ds.methods)


def test_workers_without_this_package_get_a_clear_message(tmp_path):
    """A worker whose Python cannot import analysis_core: refused at start with what to install."""
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    dask_cli = str(Path(sys.executable).parent / "dask")
    # the worker runs from an empty folder with a PYTHONPATH that shadows analysis_core
    shadow = tmp_path / "shadow" / "analysis_core"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('analysis_core is not installed here')\n")
    env = {**os.environ, "PYTHONPATH": str(shadow.parent)}
    common = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "start_new_session": True, "cwd": tmp_path}
    procs = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              env=os.environ, **common),
             subprocess.Popen([dask_cli, "worker", address, "--host", "127.0.0.1", "--nthreads", "1", "--no-nanny",
                               "--no-dashboard"], env=env, **common)]
    try:
        t0 = time.monotonic()
        while True:
            try:
                dc = DaskCompute(scheduler=address, connect_timeout=5)
                dc.start()
                dc.close()
                raise AssertionError("a worker without the package was accepted")
            except ComputeError as exc:
                if "cannot reach" in str(exc) and time.monotonic() - t0 < 60:
                    continue  # the scheduler is not listening yet
                assert "cannot run this package's code" in str(exc) and "pip install" in str(exc), str(exc)
                break
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


@pytest.mark.parametrize("roles", ["loo", "sample", "query_gallery"])
def test_fast_kernels_agree_with_the_general_kernel(roles):
    """The leave-one-out and roles kernels give the general kernel's counts, bit for bit (tile
    score sums may differ in the last bits: they are summed in another order)."""
    X, y = clustered(2500, 10, 20, 8)  # coarse values: many exact ties, no duplicate vectors
    rng = np.random.default_rng(9)
    kw = {"loo": {}, "sample": {"is_query": rng.random(2500) < 0.1, "is_gallery": np.ones(2500, bool)},
          "query_gallery": {"is_query": np.arange(2500) % 3 == 0, "is_gallery": np.arange(2500) % 3 != 1}}[roles]
    per_query = roles != "loo"
    fast = run_pass(X, y, per_query_pairs=per_query, n_bins=64, **kw)
    general = run_pass(X, y, per_query_pairs=per_query, n_bins=64, kernel="general", **kw)
    assert fast.values.tobytes() == general.values.tobytes()
    assert fast.pr_curves.tobytes() == general.pr_curves.tobytes()
    np.testing.assert_array_equal(fast.hist_pos, general.hist_pos)
    np.testing.assert_array_equal(fast.hist_neg, general.hist_neg)
    assert fast.sum_pos == pytest.approx(general.sum_pos, rel=1e-12)
    if per_query:
        np.testing.assert_array_equal(fast.query_hist, general.query_hist)
        np.testing.assert_array_equal(fast.query_pair_sums, general.query_pair_sums)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_classes=st.integers(2, 60), per_class=st.integers(1, 30),
       kind=st.sampled_from(["uniform", "hits", "constant", "constant_strata"]))
def test_stratified_variance_and_df_equal_the_textbook_formula(seed, n_classes, per_class, kind):
    """v = sum_h W_h^2 (1 - n_h/N_h) s_h^2 / n_h and Satterthwaite's df, against the formula with
    exact per-stratum variances (``statistics.variance``: rational arithmetic); a stratum (or every
    stratum) of equal values has variance exactly 0, so constant data claim no spread."""
    import statistics

    from analysis_core.stats.sampling import _satterthwaite

    rng = np.random.default_rng(seed)
    codes = rng.integers(0, n_classes, n_classes * per_class)
    N = codes.size
    assume(N >= 4)
    qs = stratified_sample(codes, np.arange(N), int(rng.integers(2, N)), seed=seed % 1000)
    strata = qs.strata_of(qs.chosen)
    z = {"uniform": rng.random(strata.size), "hits": (rng.random(strata.size) < 0.3).astype(float),
         "constant": np.full(strata.size, 0.1), "constant_strata": (strata % 3) * 0.1 + 0.7}[kind]
    var, df = _satterthwaite(z, strata, qs)
    W = qs.N_h / qs.N
    g = [W[h] ** 2 * (1 - qs.n_h[h] / qs.N_h[h]) / qs.n_h[h] * statistics.variance(z[strata == h].tolist())
         if qs.n_h[h] > 1 else 0.0 for h in range(qs.N_h.size)]
    want = math.fsum(g)
    if kind.startswith("constant"):
        assert (var, df) == (0.0, math.inf)
    elif want == 0:
        assert var == 0.0
    else:
        assert var == pytest.approx(want, rel=1e-12)
        want_df = want ** 2 / math.fsum(gh ** 2 / (qs.n_h[h] - 1) for h, gh in enumerate(g) if qs.n_h[h] > 1)
        assert df == pytest.approx(want_df, rel=1e-9)
