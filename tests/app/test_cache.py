"""The dashboard's store: bounded in bytes and entries, refused data kept nowhere, one
computation per key however many sessions ask, abandoned runs kept, one token per evaluation."""

from __future__ import annotations

import dataclasses
import io
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import StopException
from streamlit.testing.v1 import AppTest

from analysis_core import InputError, evaluate, load_files
from analysis_core.stats.bands import pr_bands
from analysis_core_dashboard import cache, jobs

ROOT = Path(__file__).resolve().parents[2]
MB = 2**20


def _array(mb: int, fill: float = 1.0) -> np.ndarray:
    return np.full(mb * MB // 8, fill)


def test_the_store_keeps_within_its_byte_budget_least_recently_used_first():
    s = cache.Store(budget=10 * MB, max_entries=100)
    for i in range(3):
        s.result(f"k{i}", lambda p, i=i: _array(4, i), group=f"g{i}", label="x")
    assert "k0" not in s and "k1" in s and "k2" in s  # 12 MB > 10 MB: the oldest went
    assert s.used <= 10 * MB
    s.entry("k1")  # used: k2 is now the least recently used
    s.result("k3", lambda p: _array(4), group="g3", label="x")
    assert set(s._items) == {"k1", "k3"} and s.used <= 10 * MB
    big = s.result("big", lambda p: _array(11), group="g", label="x")  # larger than the budget: not kept
    assert big.nbytes == 11 * MB and "big" not in s and s.used <= 10 * MB


def test_the_store_keeps_at_most_max_entries():
    s = cache.Store(budget=10**9, max_entries=3)
    for i in range(5):
        s.result(f"k{i}", lambda p, i=i: i, group=f"g{i}", label="x")
    assert set(s._items) == {"k2", "k3", "k4"}


def test_an_evicted_dataset_takes_its_derived_results_along():
    s = cache.Store(budget=10 * MB, max_entries=100)
    s.result("data/a", lambda p: _array(4), group="a", label="x")
    s.result("ev/a1", lambda p: _array(1), group="a", label="x")
    s.result("data/b", lambda p: _array(4), group="b", label="x")
    s.entry("ev/a1")  # the evaluation is recent, its dataset is the oldest entry
    s.result("data/c", lambda p: _array(4), group="c", label="x")
    assert set(s._items) == {"data/b", "data/c"}


def test_nbytes_counts_arrays_once_and_not_the_dataset_inside_an_evaluation():
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    ev = evaluate(ds, methods=["pca16"])
    arrays = sum(e.nbytes for e in ds.embeddings.values())
    assert jobs.nbytes(ds) >= arrays
    a = np.ones(1000)
    assert jobs.nbytes([a, a, (a,)]) < 2 * a.nbytes
    r = ev.results["pca16"]
    kept = r.cutoff_blocks.nbytes  # the tie blocks kept for new cutoffs: more than 16-d vectors take
    assert r.values.nbytes + r.pr_curves.nbytes + kept <= jobs.nbytes(ev) < jobs.nbytes(ds) + kept


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_a_refused_upload_is_not_kept_and_a_dataset_refused_later_is_dropped(monkeypatch):
    monkeypatch.setattr(cache, "STORE", cache.Store(budget=10**9, max_entries=10))
    zeros = [("zeros.npz", _npz(embeddings=np.zeros((6, 3), np.float32), labels=np.repeat([0, 1], 3)))]
    digest = cache.files_digest(zeros)
    with pytest.raises(InputError, match="all-zero"):
        cache.dataset(digest, lambda: zeros, "cosine")
    assert len(cache.STORE) == 0
    ds = cache.dataset(digest, lambda: zeros, "dot")  # the same data is fine for the dot product
    assert ds.n_items == 6 and len(cache.STORE) == 1
    tok = cache.Token(digest, "dot", (1,), 11, None, 0, 0.05)
    cache.evaluation(tok, ds)
    assert len(cache.STORE) == 2
    with pytest.raises(InputError, match="all-zero"):
        cache.dataset(digest, lambda: zeros, "cosine")
    assert len(cache.STORE) == 0  # the dataset and its evaluation are gone


def test_identical_requests_share_one_computation_and_an_abandoned_run_is_kept(monkeypatch):
    """A session stopped while waiting (Streamlit raises StopException in its next st call, here
    the progress bar) leaves the computation running; its result is stored, and the next request
    gets it without a second computation."""
    s = cache.Store(budget=10**9, max_entries=10)
    release, calls = threading.Event(), []

    def slow(progress):
        calls.append(1)
        progress(1, 2, "half way")
        release.wait(30)
        return "result"

    def stopped(*args, **kwargs):
        raise StopException()

    monkeypatch.setattr(cache.st, "progress", stopped)
    with pytest.raises(StopException):
        s.result("k", slow, group="g", label="x")  # the session goes away mid-run
    other = []
    t = threading.Thread(target=lambda: other.append(s._running["k"][0].result()))
    t.start()
    release.set()
    t.join(30)
    deadline = time.time() + 30
    while "k" not in s and time.time() < deadline:
        time.sleep(0.05)
    assert s.result("k", slow, group="g", label="x") == "result" == other[0]
    assert len(calls) == 1 and s.computed == 1


def test_concurrent_identical_requests_run_once():
    s = cache.Store(budget=10**9, max_entries=10)
    calls = []

    def fn(progress):
        calls.append(1)
        time.sleep(0.2)
        return len(calls)

    got = []
    threads = [threading.Thread(target=lambda: got.append(s.result("k", fn, group="g", label="x")))
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert got == [1, 1, 1, 1] and calls == [1]


def test_the_token_covers_every_setting():
    base = cache.Token("d", "cosine", (1, 2), 11, 300, 0, 0.05)
    fields = {"data": "e", "similarity": "dot", "ks": (1,), "n_recall": 12, "query_sample": None, "seed": 1,
              "alpha": 0.01, "precision": "float64"}
    import dataclasses

    keys = {dataclasses.replace(base, **{f: v}).key for f, v in fields.items()}
    assert len(keys | {base.key}) == len(fields) + 1
    assert base.derived("bands", "t") != dataclasses.replace(base, query_sample=None).derived("bands", "t")


def test_the_bands_page_follows_the_query_sample():
    """The PR-band bug: with a 300-query sample the page showed the full run's bands."""
    at = AppTest.from_file(str(ROOT / "analysis_core_dashboard" / "app.py"), default_timeout=300).run()
    at.switch_page("views/pr_bands.py").run()
    assert any("n = 1,797" in c.value for c in at.caption)
    at.number_input(key="query_sample").set_value(300).run()
    at.number_input(key="query_seed").set_value(4).run()
    assert not at.exception and not at.error
    assert any("n = 300)" in c.value for c in at.caption), [c.value for c in at.caption]
    ref = pr_bands(evaluate(load_files([ROOT / "demo_data" / "digits.npz"]), query_sample=300, seed=4),
                   alpha=0.05, kind="t")
    assert int(ref.loc[ref["class"] == "all", "n"].max()) == 300
    at.number_input(key="query_sample").set_value(0).run()
    assert any("n = 1,797" in c.value for c in at.caption)


def test_a_refused_upload_releases_its_memory_without_a_garbage_collection(monkeypatch):
    """Nothing (no store entry, no reference cycle through the failed computation's traceback)
    keeps a refused upload's arrays: with the garbage collector off, resident memory returns."""
    import gc

    psutil = pytest.importorskip("psutil")
    monkeypatch.setattr(cache, "STORE", cache.Store(budget=10**10, max_entries=10))
    buf = io.BytesIO()
    np.savez_compressed(buf, embeddings=np.zeros((100_000, 1000), np.float32), labels=np.arange(100_000) % 2)
    files = [("zeros.npz", buf.getvalue())]
    proc = psutil.Process()
    gc.collect()
    gc.disable()
    try:
        start = proc.memory_info().rss
        for i in range(3):  # 400 MB each
            with pytest.raises(InputError, match="all-zero"):
                cache.dataset(f"zeros{i}", lambda: files, "cosine")
        grown = (proc.memory_info().rss - start) / MB
    finally:
        gc.enable()
    assert len(cache.STORE) == 0 and grown < 100, grown


def test_a_prefetch_runs_only_on_an_idle_store_and_is_stored_like_a_result():
    s = cache.Store(budget=10 * MB, max_entries=10)
    gate = threading.Event()
    s._start("busy", lambda p: gate.wait(10), "g", set())
    s.prefetch("guess", lambda p: 1, group="g")  # something runs: no guess queued ahead of it
    assert "guess" not in s._running
    gate.set()
    s.result("busy", lambda p: None, group="g", label="x")
    while s._running:
        time.sleep(0.01)
    s.prefetch("guess", lambda p: 42, group="g")
    while s._running:
        time.sleep(0.01)
    assert s.result("guess", lambda p: 0, group="g", label="x") == 42


def _reporting_until(gate: threading.Event, value: object):
    """A computation that reports progress until ``gate`` is set, then returns ``value``."""
    def fn(progress):
        while not gate.wait(0.01):
            progress(0, 1, "waiting")
        return value

    return fn


def test_a_newer_guess_replaces_a_running_one_nobody_asked_for_but_not_one_a_request_waits_for():
    s = cache.Store(budget=10 * MB, max_entries=10)
    gate = threading.Event()
    s.prefetch("old guess", _reporting_until(gate, "old"), group="g")
    while "old guess" not in s._running:
        time.sleep(0.01)
    s.prefetch("new guess", lambda p: "new", group="g")  # the page changed: the old guess stops
    while s._running:
        time.sleep(0.01)
    assert "old guess" not in s and s.result("new guess", lambda p: None, group="g", label="x") == "new"

    s.prefetch("asked", _reporting_until(gate, "asked"), group="g")
    got: list = []
    asking = threading.Thread(target=lambda: got.append(s.result("asked", lambda p: "again", group="g", label="x")))
    asking.start()
    while s._running["asked"][1].guess:  # the request reached the running guess
        time.sleep(0.01)
    s.prefetch("other guess", lambda p: "other", group="g")  # a request runs: no guess, none stopped
    gate.set()
    asking.join()
    assert got == ["asked"] and "other guess" not in s and "asked" in s


def test_a_request_reaching_a_guess_that_already_gave_up_computes_it():
    s = cache.Store(budget=10 * MB, max_entries=10)
    gate = threading.Event()
    fn = _reporting_until(gate, "value")
    fut, progress = s._start("k", fn, "g", set(), pool=s._guesses)
    progress.superseded = True  # replaced by a newer guess; it stops at its next report
    assert fut.result(timeout=10) is jobs._GAVE_UP and "k" not in s
    gate.set()
    assert s.result("k", fn, group="g", label="x") == "value"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_a_prefetch_runs_at_the_lowest_priority_with_the_threads_it_starts_and_a_request_does_not():
    """A guess yields the cores to a request made meanwhile: its thread, and the engine's worker
    threads it starts, run at nice 19; a request's thread keeps the server's priority."""
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    def nice_here_and_in_a_started_thread(progress) -> tuple[int, int]:
        seen = []
        t = threading.Thread(target=lambda: seen.append(nice()))
        t.start()
        t.join()
        return nice(), seen[0]

    s = cache.Store(budget=10 * MB, max_entries=10)
    base = nice()
    s.prefetch("guess", nice_here_and_in_a_started_thread, group="g")
    while s._running:
        time.sleep(0.01)
    assert s.result("guess", lambda p: None, group="g", label="x") == (jobs.LOWEST_PRIORITY,) * 2
    assert s.result("asked", nice_here_and_in_a_started_thread, group="g", label="x") == (base, base)
    assert nice() == base  # the server's own thread is untouched


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice values are Linux's")
def test_a_request_joining_a_running_guess_raises_its_threads_to_the_servers_priority():
    """A request that reaches a running guess waits for it: the guess's thread and the threads it
    started run at the server's priority from then on (where raising a priority is permitted:
    root here), and the next guess is at the lowest again."""
    def nice(tid: int | None = None) -> int:
        return os.getpriority(os.PRIO_PROCESS, tid or threading.get_native_id())

    base = nice()
    probe = threading.Thread(target=lambda: (jobs.lower_priority(), time.sleep(0.2)))
    probe.start()
    time.sleep(0.05)
    permitted = jobs.restore_priority() >= 1 and nice(probe.native_id) == base
    probe.join()
    if not permitted:
        pytest.skip("raising a thread's priority is not permitted here")
    go, started = threading.Event(), threading.Event()
    tids: list[int] = []

    def guess(progress):
        helper = threading.Thread(target=lambda: (tids.append(threading.get_native_id()), go.wait(20)))
        helper.start()
        tids.append(threading.get_native_id())
        started.set()
        go.wait(20)
        helper.join()
        return "done"

    s = cache.Store(budget=10 * MB, max_entries=10)
    s.prefetch("guess", guess, group="g")
    assert started.wait(20)
    assert [nice(t) for t in tids] == [jobs.LOWEST_PRIORITY] * 2
    waiter = threading.Thread(target=lambda: s.result("guess", guess, group="g", label="x"))
    waiter.start()
    deadline = time.time() + 10
    while [nice(t) for t in tids] != [base] * 2 and time.time() < deadline:
        time.sleep(0.01)
    assert not s._running["guess"][1].guess
    assert [nice(t) for t in tids] == [base] * 2
    go.set()
    waiter.join(20)
    assert s.result("guess", guess, group="g", label="x") == "done"

    def own_nice(progress):
        return nice()

    s.prefetch("next", own_nice, group="g")
    while s._running:
        time.sleep(0.01)
    assert s.result("next", own_nice, group="g", label="x") == jobs.LOWEST_PRIORITY


def test_results_start_every_missing_computation_before_waiting_and_return_stored_ones():
    """Two computations that can only finish together (a barrier of two) finish: they ran side by
    side; a stored one is returned without running; each result is stored."""
    s = cache.Store(budget=10**9, max_entries=10)
    both = threading.Barrier(2, timeout=20)
    ran: list[str] = []

    def meet(name: str):
        def fn(progress):
            ran.append(name)
            both.wait()
            return name.upper()
        return fn

    assert s.results([("a", meet("a"), "A"), ("b", meet("b"), "B")], group="g") == ["A", "B"]
    assert s.results([("a", meet("x"), "A"), ("c", lambda p: "C", "C")], group="g") == ["A", "C"]
    assert sorted(ran) == ["a", "b"] and "a" in s and "b" in s and "c" in s


def test_the_class_count_page_has_the_other_methods_ready_when_the_method_changes():
    at = AppTest.from_file(str(ROOT / "analysis_core_dashboard" / "app.py"), default_timeout=300).run()
    at.radio(key="data_source").set_value("many_classes").run()
    from tests.app.conftest import settle

    # its own sweep drawn (the rerun its progress fragment makes when the sweep is done)
    settle(at.switch_page("views/class_count.py").run())
    methods = next(s for s in at.selectbox if s.label == "Method").options
    assert len(methods) >= 2
    # no rerun: the page sits idle, and its guesses follow one another (each started when the
    # previous one is stored) until every other method's results are stored
    deadline = time.monotonic() + 240
    while cache.STORE._running and time.monotonic() < deadline:
        time.sleep(0.05)
    done = cache.STORE.computed
    for m in methods[1:]:
        next(s for s in at.selectbox if s.label == "Method").set_value(m).run()
        assert not at.exception and not at.error
        assert cache.STORE.computed == done, m  # nothing computed on the switch: it was all stored


def test_the_class_count_subset_is_the_evaluation_with_its_group_size_and_the_group_size_reuses_the_pass():
    import json

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    tok = cache.Token(data="digits-subset-test", similarity="cosine", ks=(1,), n_recall=11, query_sample=None, seed=0,
                      alpha=0.05)
    m = ds.methods[0]
    main = evaluate(ds, ks=(1, 4), methods=[m])  # the page's evaluation: its pass gives the sure hits
    assert 0 < cache.sure_hits(tok, main, m).mean() < 1
    for n_classes, group_size, seed in ((10, 3, 0), (10, 5, 0), (10, 5, 4), (6, 2, 1), (6, 6, 1), (10, 10, 2)):
        want = evaluate(ds, ks=(1,), methods=[m], max_classes=n_classes, group_size=group_size, seed=seed)
        done = cache.STORE.computed
        got = cache.subset_evaluation(tok, ds, m, n_classes, group_size, seed, main=main)
        if n_classes == ds.n_classes:  # every class: the page's pass (exact, no new pass), not "sampled" ones
            assert got.results[m] is not main.results[m] and got.sampled_from_classes is None
            want = evaluate(ds, ks=(1,), methods=[m], group_size=group_size, seed=seed)
        g, w = got.summary(), want.summary()
        if n_classes == ds.n_classes:  # the options recorded: the page's cutoffs (1, 4), not evaluate's
            g.pop("provenance", None), w.pop("provenance", None)
        assert json.dumps(g, sort_keys=True) == json.dumps(w, sort_keys=True)
        pd.testing.assert_frame_equal(got.grouped[m].per_group, want.grouped[m].per_group, check_exact=True)
        if n_classes == 10 and (group_size, seed) != (3, 0):
            # a new group size, or a new seed with every class drawn (the same items whatever the
            # seed): Grouped Recall only, not the pass
            assert cache.STORE.computed == done + 1


def test_the_class_count_page_at_another_alpha_runs_no_pass_and_equals_the_core(monkeypatch):
    """α enters neither the pass over the sampled classes nor Grouped Recall's passes nor the
    sweep: at a new α they are views (the same numbers as ``evaluate(..., alpha=new)``), and the
    sweep is the stored one."""
    import json

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    tok = cache.Token(data="digits-subset-alpha", similarity="cosine", ks=(1,), n_recall=11, query_sample=None,
                      seed=0, alpha=0.05)
    m = ds.methods[0]
    cases = [(8, 3, 1), (10, 10, 0)]  # a group size below the class count, and one group of every class
    wants = {(c, a): evaluate(ds, ks=(1,), methods=[m], max_classes=c, group_size=s, seed=seed, alpha=a)
             for c, s, seed in cases for a in (0.01, 0.1)}
    for c, s, seed in cases:
        cache.subset_evaluation(tok, ds, m, c, s, seed)
    sweep = cache.sweep(tok, ds, m, 3, 2)
    calls = _count_passes(monkeypatch)
    for c, s, seed in cases:
        for a in (0.01, 0.1):
            got = cache.subset_evaluation(dataclasses.replace(tok, alpha=a), ds, m, c, s, seed)
            want = wants[(c, a)]
            assert json.dumps(got.summary(), sort_keys=True) == json.dumps(want.summary(), sort_keys=True)
            pd.testing.assert_frame_equal(got.grouped[m].table, want.grouped[m].table, check_exact=True)
            assert cache.sweep(dataclasses.replace(tok, alpha=a), ds, m, 3, 2) is sweep
    assert calls == []


def test_the_class_count_summary_is_computed_once_with_its_pass_whatever_the_group_size(monkeypatch):
    """The subset's summary (its pair-statistic intervals cost a bootstrap under query sampling)
    is computed in the stored computation, and the evaluation with Grouped Recall attached for
    each group size reuses it: the page asks again at no cost."""
    from analysis_core import Evaluation

    calls: list[str] = []
    original = Evaluation._method_summary
    monkeypatch.setattr(Evaluation, "_method_summary", lambda self, m, a: calls.append(m) or original(self, m, a))
    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    tok = cache.Token(data="digits-summary-once", similarity="cosine", ks=(1,), n_recall=11, query_sample=None,
                      seed=0, alpha=0.05)
    m = ds.methods[1]
    for group_size in (2, 3, 5):
        got = cache.subset_evaluation(tok, ds, m, 8, group_size, 1)
        s = got.summary()["methods"][m]
        assert s["grouped_recall_at_k"]["group_size"] == group_size
    assert calls == [m]


def test_statistics_of_new_selections_of_the_same_methods_build_their_metric_table_once(monkeypatch):
    """The paired tests' every-metric table of the chosen methods is built once and filtered for
    each class selection or subsample; the statistics still equal the core's on that selection."""
    from analysis_core.stats import variability
    from analysis_core.stats.analysis import analyse
    from analysis_core.stats.variability import ap_frame, metric_frame

    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    calls: list[tuple] = []
    monkeypatch.setattr(variability, "metric_frame", lambda e, ms: calls.append(tuple(ms)) or metric_frame(e, ms))
    tok = cache.Token(data="digits-metric-table-once", similarity="cosine", ks=ev.ks, n_recall=11, query_sample=None,
                      seed=0, alpha=0.05)
    methods = tuple(ev.methods[:2])
    labels = tuple(sorted(ap_frame(ev, list(methods))["label"].unique()))
    for selection in ((methods, labels, None, "query"), (methods, labels[:4], None, "query"),
                      (methods, labels, (6, 1), "query")):
        ap = cache.selection_frame(ap_frame(ev, list(methods)), selection)
        got = cache.statistics(tok, ev, selection, ap)
        metrics = metric_frame(ev, list(methods))
        want = analyse(ap, alpha=0.05, metrics=metrics[metrics["query"].isin(ap["query"])].reset_index(drop=True))
        pd.testing.assert_frame_equal(got.paired, want.paired, check_exact=True)
    assert calls == [tuple(sorted(methods))]


def test_statistics_at_another_alpha_reuse_the_alpha_free_part_and_equal_the_core():
    from analysis_core.stats.analysis import analyse
    from analysis_core.stats.variability import ap_frame, metric_frame

    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    ap = ap_frame(ev, ev.methods)
    metrics = metric_frame(ev, ev.methods)
    tok = cache.Token(data="digits-stats-test", similarity="cosine", ks=ev.ks, n_recall=11, query_sample=None,
                      seed=0, alpha=0.05)
    labels = tuple(sorted(ap["label"].unique()))
    first = cache.statistics(tok, ev, (tuple(ev.methods), labels, None, "query"), ap)
    done = cache.STORE.computed
    again = cache.statistics(tok, ev, (tuple(ev.methods[::-1]), labels[::-1], None, "query"), ap)  # same selection
    assert again is first and cache.STORE.computed == done
    for alpha in (0.01, 0.1):
        got = cache.statistics(dataclasses.replace(tok, alpha=alpha), ev, (tuple(ev.methods), labels, None, "query"),
                               ap)
        want = analyse(ap, alpha, metrics=metrics)
        pd.testing.assert_frame_equal(got.paired, want.paired, check_exact=True)
        assert got.warnings == want.warnings
    assert cache.STORE.computed == done + 2  # one α-dependent step per α, no new analysis
    # the class unit: the core's analysis with the evaluation's jackknife over classes
    got = cache.statistics(tok, ev, (tuple(ev.methods), labels, None, "class"), ap)
    want = analyse(ap, 0.05, metrics=metrics, jackknife=ev.class_jackknife())
    assert got.unit == "class" and got.n_units == 10
    pd.testing.assert_frame_equal(got.paired, want.paired, check_exact=True)


def test_new_cutoffs_and_alpha_reuse_the_sidebars_passes_and_equal_the_core(monkeypatch):
    """Changing K or α in the sidebar runs no pass of the evaluation, nor of a split's (whose
    Grouped Recall@K, its own passes over groups of classes, follows K and α): the results equal
    the core's evaluation at those settings."""
    import json

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    settings = [((1,), 0.05), ((1, 2, 4, 8, 16, 32), 0.01), ((2, 8), 0.1), ((1, 2, 4, 8), 0.05)]
    wants = {ks: evaluate(ds, ks=ks) for ks, _ in settings}
    split_wants = {(ks, a): evaluate(ds, ks=ks, alpha=a).within_split("test", 5, 0) for ks, a in settings}
    calls = _count_passes(monkeypatch)
    tok = cache.Token(data="digits-ks-test", similarity="cosine", ks=(1, 2, 4, 8), n_recall=11, query_sample=None,
                      seed=0, alpha=0.05)
    cache.evaluation(tok, ds)
    cache.split_evaluation(tok, ds, "test", 5, 0)
    first = len(calls)
    assert first >= 2 * len(ds.methods)  # the two evaluations' passes (and Grouped Recall's)
    for ks, alpha in settings:
        t = dataclasses.replace(tok, ks=ks, alpha=alpha)
        for got, want in ((cache.evaluation(t, ds), wants[ks]), (cache.split_evaluation(t, ds, "test", 5, 0),
                                                                 split_wants[(ks, alpha)])):
            pd.testing.assert_frame_equal(got.per_query(), want.per_query(), check_exact=True)
            assert json.dumps(got.summary(alpha), sort_keys=True) == json.dumps(want.summary(alpha), sort_keys=True)
    assert len(calls) == first  # no pass after the first


def _count_passes(monkeypatch) -> list:
    """Count every engine pass: the evaluation's, the class jackknife's, Grouped Recall's and the
    class-count sweep's."""
    from analysis_core import evaluation as evaluation_module
    from analysis_core.engine import core
    from analysis_core.stats import class_sweep, grouped_recall

    calls: list[str] = []
    original = core.run_pass
    spy = lambda *a, **k: calls.append("pass") or original(*a, **k)  # noqa: E731
    for module in (core, evaluation_module, grouped_recall, class_sweep):  # each imported run_pass by name
        monkeypatch.setattr(module, "run_pass", spy)
    return calls


def test_the_class_jackknife_at_new_cutoffs_and_alpha_runs_no_pass_and_equals_the_core(monkeypatch):
    """The Overview's intervals over classes and the Statistics page's class unit, after the
    first jackknife: new cutoffs K (up to 32) and α run no pass, and equal the jackknife of a
    fresh ``evaluate(..., ks=new)``."""
    from analysis_core.export.main_table import summary_frame
    from analysis_core.stats.analysis import analyse
    from analysis_core.stats.variability import ap_frame, metric_frame

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    settings = [((1, 2, 4, 8, 16, 32), 0.01), ((2, 8), 0.1), ((1,), 0.05), ((1, 2, 4, 8), 0.05)]
    wants = {ks: evaluate(ds, ks=ks) for ks, _ in settings}
    for want in wants.values():
        want.class_jackknife()  # the oracle's passes, before they are counted
    tok = cache.Token(data="digits-jackknife-ks", similarity="cosine", ks=(1, 2, 4, 8), n_recall=11,
                      query_sample=None, seed=0, alpha=0.05)
    cache.class_jackknife(tok, cache.evaluation(tok, ds))
    calls = _count_passes(monkeypatch)
    for ks, alpha in settings:
        t = dataclasses.replace(tok, ks=ks, alpha=alpha)
        ev, want = cache.evaluation(t, ds), wants[ks]
        got = cache.class_jackknife(t, ev)
        pd.testing.assert_frame_equal(got.intervals(alpha), want.class_jackknife().intervals(alpha), check_exact=True)
        pd.testing.assert_frame_equal(summary_frame({"all": ev}, alpha, unit="class"),
                                      summary_frame({"all": want}, alpha, unit="class"), check_exact=True)
        ap = ap_frame(ev, ev.methods)
        selection = (tuple(ev.methods), tuple(sorted(ap["label"].unique())), None, "class")
        stats = cache.statistics(t, ev, selection, ap)
        pd.testing.assert_frame_equal(stats.paired, analyse(ap, alpha, metrics=metric_frame(want, want.methods),
                                                            jackknife=want.class_jackknife()).paired, check_exact=True)
    assert calls == []


def test_the_overview_pages_controls_run_no_pass_after_the_first(monkeypatch):
    """In the app: once the Overview has shown its intervals over classes (one jackknife), the
    sidebar's cutoffs K, α and unit of inference, on the Overview, Statistics, Training and PR
    bands pages, run no pass (nor does opening the PR bands page: its curves are the Overview's
    pass's)."""
    at = AppTest.from_file(str(ROOT / "analysis_core_dashboard" / "app.py"), default_timeout=300).run()
    at.radio(key="data_source").set_value("digits").run()
    assert not at.exception and not at.error
    assert any("unit: class" in h.value for h in at.subheader)
    calls = _count_passes(monkeypatch)
    for page in ("views/overview.py", "views/statistics.py", "views/training.py", "views/pr_bands.py"):
        at.switch_page(page).run()
        for change in (lambda: at.multiselect(key="ks").set_value([1, 2, 16]),
                       lambda: at.select_slider(key="alpha").set_value(0.01),
                       lambda: at.radio(key="unit").set_value("query"),
                       lambda: at.radio(key="unit").set_value("class"),
                       lambda: at.multiselect(key="ks").set_value([1, 2, 4, 8]),
                       lambda: at.select_slider(key="alpha").set_value(0.05)):
            change()
            at.run()
            assert not at.exception and not at.error, page
    assert calls == []


def test_new_cutoffs_while_the_class_jackknife_runs_wait_for_its_passes(monkeypatch):
    """Requests at two cutoffs K at once (another session, or the sidebar moved) run no replicate
    pass (the evaluations' passes counted them) and get the jackknife of a fresh
    ``evaluate(..., ks=new)``; so does an evaluation that does not share the first one's kept
    state."""
    from concurrent.futures import ThreadPoolExecutor

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    tok = cache.Token(data="digits-jackknife-concurrent", similarity="cosine", ks=(1, 2, 4, 8), n_recall=11,
                      query_sample=None, seed=0, alpha=0.05)
    other = dataclasses.replace(tok, ks=(1, 16))
    want = evaluate(ds, ks=(1, 16)).class_jackknife()
    pairs = [(tok, cache.evaluation(tok, ds)), (other, cache.evaluation(other, ds))]
    calls = _count_passes(monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda te: cache.class_jackknife(*te), pairs))
    assert calls == []  # the evaluation's passes counted the replicates: the jackknife runs none
    pd.testing.assert_frame_equal(got[1].intervals(), want.intervals(), check_exact=True)
    fresh = evaluate(ds, ks=(2, 32))  # its own kept state: none
    calls.clear()
    jk = cache.class_jackknife(dataclasses.replace(tok, ks=(2, 32)), fresh)
    assert calls == []
    pd.testing.assert_frame_equal(jk.intervals(), evaluate(ds, ks=(2, 32)).class_jackknife().intervals(),
                                  check_exact=True)


def test_the_statistics_at_the_class_unit_share_the_jackknifes_passes_with_the_overview(monkeypatch):
    """The Statistics page's analysis at the class unit, asked for while the Overview's jackknife
    is read (or before it), runs no pass of its own and equals the core's."""
    from concurrent.futures import ThreadPoolExecutor

    from analysis_core.stats.analysis import analyse
    from analysis_core.stats.variability import ap_frame, metric_frame

    ds = load_files([ROOT / "demo_data" / "digits.npz"])
    tok = cache.Token(data="digits-statistics-jackknife", similarity="cosine", ks=(1, 2, 4, 8), n_recall=11,
                      query_sample=None, seed=0, alpha=0.05)
    ev = cache.evaluation(tok, ds)
    ap = ap_frame(ev, ev.methods)
    selection = (tuple(ev.methods), tuple(sorted(ap["label"].unique())), None, "class")
    want = analyse(ap, 0.05, metrics=metric_frame(ev, ev.methods), jackknife=evaluate(ds).class_jackknife()).paired
    calls = _count_passes(monkeypatch)
    with ThreadPoolExecutor(2) as pool:
        stats = pool.submit(cache.statistics, tok, ev, selection, ap)
        pool.submit(cache.class_jackknife, tok, ev).result()
        got = stats.result().paired
    assert calls == []  # the evaluation's passes counted the replicates: neither page runs one
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_the_class_count_sweep_runs_in_the_background_while_the_controls_answer(monkeypatch):
    """A method's sweep (20-odd passes) does not hold the page: it starts in the background with
    its progress shown, the C slider answers meanwhile with the core's numbers, and once it is done
    the page draws the sweep that was stored. A sweep that fails shows the page's error message once
    (it is not restarted by every poll)."""
    from tests.app.conftest import settle

    deadline = time.monotonic() + 300
    while cache.STORE._running and time.monotonic() < deadline:  # another test's guesses end first
        time.sleep(0.05)
    with cache.STORE._lock:
        cache.STORE._items.clear()  # no sweep stored from another test
        cache.STORE._failed.clear()
    gate = threading.Event()
    real = cache.class_count_sweep

    def held(*args, **kw):
        assert gate.wait(120), "the test never released the sweep"
        return real(*args, **kw)

    monkeypatch.setattr(cache, "class_count_sweep", held)
    at = AppTest.from_file(str(ROOT / "analysis_core_dashboard" / "app.py"), default_timeout=300).run()
    at.radio(key="data_source").set_value("many_classes").run()
    at.switch_page("views/class_count.py").run()
    assert not at.exception and not at.error
    assert "The controls above stay usable meanwhile." in [c.value for c in at.main.caption]
    assert cache.STORE.background_running()
    at.slider(key="cc-classes").set_value(100).run()  # answers while the sweep waits
    assert not at.exception and not at.error and cache.STORE.background_running()
    ds = load_files([ROOT / "demo_data" / "many_classes.npz"])
    method = next(s for s in at.selectbox if s.label == "Method").value
    ref = evaluate(ds, methods=[method], ks=(1,), max_classes=100, group_size=10, seed=0).summary()
    assert {m.label: m.value for m in at.metric}["Recall@1"] == f"{ref['methods'][method]['recall_at_k']['1']:.4f}"
    gate.set()
    settle(at)
    assert not at.exception and not at.error and not cache.STORE.background_running()
    assert "The controls above stay usable meanwhile." not in [c.value for c in at.main.caption]
    shown = at.main.dataframe[-1].value  # the sweep's table: one row per class count, up to every class
    assert list(shown.index) == sorted(shown.index) and len(shown) > 3 and shown.index[-1] == ds.n_classes

    calls = []

    def broken(*args, **kw):
        # counted on the page's background worker only (the page's guesses for the other method
        # may run this sweep too, on their own thread)
        calls.append(threading.current_thread().name.startswith("dashboard-background"))
        raise RuntimeError("a sweep that fails")

    monkeypatch.setattr(cache, "class_count_sweep", broken)
    at.slider(key="cc-repeats").set_value(4).run()  # more repeats than stored: a new sweep
    settle(at)  # it failed in the background: the page's rerun shows the error, without running it again
    assert [e.value.startswith("Something went wrong in this page. This is a bug") for e in at.error] == [True]
    assert calls.count(True) == 1 and not cache.STORE.background_running()
    with cache.STORE._lock:
        cache.STORE._failed.clear()


def test_store_start_runs_in_the_background_and_a_failure_is_raised_once_without_its_frames():
    """``Store.start``: the computation runs without the caller waiting, its progress readable, and
    a request made meanwhile is not queued behind it; once stored, ``start`` gives the value. A
    failure is raised by the next ``start`` once (then it runs again), and the failed computation's
    frames are let go: an array it held is freed although the error is kept."""
    import gc
    import weakref

    s = cache.Store(budget=10 * MB, max_entries=10)
    gate = threading.Event()
    done, progress = s.start("k", _reporting_until(gate, "value"), group="g")
    assert done is False and isinstance(progress, jobs.Progress) and progress.background
    assert s.background_running() and s.result("other", lambda p: "now", group="g", label="x") == "now"
    gate.set()
    deadline = time.monotonic() + 10
    while not progress.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.start("k", lambda p: "never run", group="g") == (True, "value") and not s.background_running()

    held: list = []
    calls = []

    def failing(p):
        big = np.ones(1000)
        held.append(weakref.ref(big))
        calls.append(1)
        raise InputError("settings", "no good.", "change it.")

    _, progress = s.start("bad", failing, group="g")
    deadline = time.monotonic() + 10
    while not progress.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    gc.collect()
    assert held[0]() is None  # the failed frame's array is gone, the error is kept
    with pytest.raises(InputError, match="no good"):
        s.start("bad", failing, group="g")
    assert calls == [1]
    done, progress = s.start("bad", failing, group="g")  # asked again: it runs again
    assert done is False
    deadline = time.monotonic() + 10
    while not progress.finished and time.monotonic() < deadline:
        time.sleep(0.01)
    assert calls == [1, 1]


def test_a_sessions_later_background_work_stops_its_earlier_one_but_never_another_sessions():
    """The page moved on (another method): what the same session started before and nobody else
    asked for stops at its next progress report (running) or never starts (queued), so the one
    background worker serves the page now shown; work another session also asked for goes on."""
    s = cache.Store(budget=10 * MB, max_entries=10)
    gates = {k: threading.Event() for k in "abcd"}

    def wait_finished(p, timeout=10):
        deadline = time.monotonic() + timeout
        while not p.finished and time.monotonic() < deadline:
            time.sleep(0.01)
        return p.finished

    _, pa = s.start("a", _reporting_until(gates["a"], "A"), group="g")
    _, pb = s.start("b", _reporting_until(gates["b"], "B"), group="g")  # a stops, b runs
    assert wait_finished(pa) and "a" not in s
    pb.watchers.add("another session")  # b is also another session's: it goes on
    _, pc = s.start("c", _reporting_until(gates["c"], "C"), group="g")  # queued behind b
    _, pd = s.start("d", _reporting_until(gates["d"], "D"), group="g")  # c never starts, b goes on
    assert pc.finished and not pb.finished and not pd.finished
    gates["b"].set()
    gates["d"].set()
    assert wait_finished(pb) and wait_finished(pd)
    assert s.start("b", lambda p: "x", group="g") == (True, "B")
    assert s.start("d", lambda p: "x", group="g") == (True, "D")
    assert "c" not in s and "a" not in s
