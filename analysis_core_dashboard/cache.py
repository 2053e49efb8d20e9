"""Loading and analyses, cached in one store shared by every session of this server process (the
store itself, its threads and priorities: :mod:`analysis_core_dashboard.jobs`; here: what is computed, under
which key).

* **Keys.** A dataset is keyed by a digest of its files' names and bytes (an upload's bytes are
  hashed once, when the uploader gives it a new file id). An evaluation is keyed by a
  :class:`Token`: the dataset digest and every sidebar setting (similarity, precision, cutoffs,
  recall points, query sample, seed, significance level, and the design table's content when it is
  not the one the method names give). Every result derived from an evaluation (PR bands, the
  class-count sweep, split and class-subset evaluations) is keyed by the token plus its own
  parameters, so no derived result can outlive a change of data or settings. What a setting does
  not enter is keyed without it and answered as a view: passes without α and K (new cutoffs from
  the tie blocks the passes kept, a new level from their per-query values and groups).
* **Validated before cached.** A dataset enters the store only after the loader's checks and
  :func:`analysis_core.io.validate` for the chosen similarity; a refused upload keeps nothing (and
  a stored dataset refused under another similarity is dropped with everything derived from it).
* **Bounded in bytes and entries.** At most :data:`BUDGET_BYTES` (``DASHBOARD_CACHE_MB``, default a
  quarter of the machine's memory) and :data:`MAX_ENTRIES` results; the least recently used go
  first, and a dataset goes with everything derived from it. A result larger than the whole budget
  is returned but not kept.
* **Guesses yield to requests.** Prefetches (a guess at the next request, started only while
  nothing else runs) have their own single thread at the lowest CPU priority (Linux: nice 19,
  inherited by the engine's worker threads it starts), so a request made while a guess runs gets
  the cores; a request for the very result being guessed waits for it. A newer guess replaces a
  running one nobody has asked for (at its next progress report): guesses follow the page in view.
* **Abandoned runs are kept.** Computations run on a small thread pool, not in the session's
  script thread; the session waits for them and shows their progress. When the session goes away
  (the browser closed or reloaded, the script stopped or rerun), the computation still finishes and
  its result is stored: the next identical request gets it at once, and an identical request
  during the run waits for the same computation instead of starting another.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import streamlit as st

from analysis_core import Dataset, Evaluation, InputError, demo, evaluate, load_bytes
from analysis_core.design import COLUMNS as DESIGN_COLUMNS
from analysis_core.engine.cutoffs import answers
from analysis_core.io import validate
from analysis_core.stats.analysis import PreparedAnalysis, VariabilityAnalysis, prepare
from analysis_core.stats.bands import ALL, pr_bands
from analysis_core.stats.checkpoints import CheckpointAnalysis, checkpoint_analysis
from analysis_core.stats.class_sweep import class_count_sweep
from analysis_core.stats.runs import RunAnalysis, run_analysis
from analysis_core_dashboard import kept, uploads
from analysis_core_dashboard.jobs import BUDGET_BYTES, MAX_ENTRIES, Progress, Store

STORE = Store(BUDGET_BYTES, MAX_ENTRIES)
# the upload budget makes room by dropping stored datasets (they can be loaded again), then uploads kept for a reload
uploads.LEDGER.evict = lambda: STORE.drop_oldest_data() or kept.KEPT.drop_oldest()


@dataclasses.dataclass(frozen=True)
class Token:
    """The data and every setting an evaluation depends on; derived results extend its key."""

    data: str
    similarity: str
    ks: tuple[int, ...]
    n_recall: int
    query_sample: int | None
    seed: int
    alpha: float
    split: str | None = None  # one split as its own retrieval problem, or every item
    precision: str = "float32"  # the dtype similarities are computed in
    # the design table's rows (method, family, run, step) when the sidebar's differs from the one the
    # method names give; () = from the names (so the default shares its key with every session's)
    design: tuple[tuple[str, str, str, int | None], ...] = ()

    @property
    def design_table(self) -> pd.DataFrame | None:
        """The design :func:`evaluate` takes (None: from the method names)."""
        return pd.DataFrame(list(self.design), columns=list(DESIGN_COLUMNS)) if self.design else None

    @property
    def key(self) -> str:
        return "ev/" + hashlib.blake2b(repr(dataclasses.astuple(self)).encode(), digest_size=16).hexdigest()

    def derived(self, name: str, *params: object) -> str:
        return f"{self.key}/{name}/{params!r}"


# --------------------------------------------------------------------------- data


def _digest_of(parts: Sequence[tuple[str, str]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name, content in parts:
        h.update(name.encode() + b"\0" + content.encode() + b"\0")
    return h.hexdigest()


def content_digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def upload_digest(uploads: Sequence, memo: dict[str, str]) -> str:
    """The digest of uploaded files (names and bytes). Each file's bytes are hashed once, when the
    uploader gives it a new file id (``memo``: the session's file id -> content digest)."""
    for u in uploads:
        if u.file_id not in memo:
            memo[u.file_id] = content_digest(u.getvalue())
    live = {u.file_id for u in uploads}
    for fid in [f for f in memo if f not in live]:
        del memo[fid]
    return _digest_of([(u.name, memo[u.file_id]) for u in uploads])


def demo_files(name: str) -> list[tuple[str, bytes]]:
    path = demo.path(name)
    return [(path.name, path.read_bytes())]


def files_digest(files: Sequence[tuple[str, bytes]]) -> str:
    return _digest_of([(name, content_digest(data)) for name, data in files])


def dataset(digest: str, read: Callable[[], list[tuple[str, bytes]]], similarity: str) -> Dataset:
    """The dataset of the files ``read()`` returns, loaded and validated for ``similarity`` before
    it is stored. Raises :class:`InputError` (and keeps nothing) when it is refused."""
    key = "data/" + digest
    e = STORE.entry(key)
    if e is not None:
        if similarity not in e.similarities:
            try:
                validate(e.value, similarity)
            except InputError:
                STORE.drop_group(digest)  # refused data is not kept, nor anything derived from it
                raise
            e.similarities.add(similarity)
        return e.value

    # The refusal outlives this call (the future keeps it, so may a session), and its traceback the
    # frames of the load and of the job that ran it: ``read`` (whose closure may hold the uploaded
    # files' bytes) is taken out of the load's closure as it is called.
    source = [read]

    def load(progress: Progress) -> Dataset:
        budget = uploads.ServerAllowance(uploads.LEDGER)  # every session's data together (uploads.py)
        ds: Dataset | None = None
        try:
            ds = load_bytes(source.pop()(), max_bytes=budget)
            validate(ds, similarity)
            budget.keep(ds)  # counted until freed, with room for its evaluation
        except InputError as exc:
            # raised anew after this block, without the traceback whose frames hold the refused arrays
            refused = type(exc)(exc.source, exc.problem, exc.fix)
        else:
            return ds
        finally:
            budget.release()
        ds = None
        raise refused

    return STORE.result(key, load, group=digest, label="Loading", similarities={similarity})


# --------------------------------------------------------------------------- evaluations


@st.cache_resource(show_spinner="Starting the Dask cluster…", max_entries=2)
def compute(mode: str, workers: int, address: str):
    """A started :class:`DaskCompute`, shared by the sessions that chose the same cluster."""
    from analysis_core.engine.distributed import DaskCompute

    if mode == "local":
        return DaskCompute(workers=workers).start()
    return DaskCompute(scheduler=address).start()


#: the level every stored evaluation is run at: α never enters a pass, and another level is a view
#: (``Evaluation.summary(alpha)``, :meth:`~analysis_core.Evaluation.at_alpha`: :func:`_at_alpha`)
BASE_ALPHA = 0.05


def _evaluation_key(token: Token) -> str:
    """The key of the token's evaluation: α never enters the pass (the summary's intervals take it
    at the accessor: ``Evaluation.summary(alpha)``), and without a query sample neither does the
    seed, so one evaluation serves them all."""
    sampled = token.query_sample is not None
    return dataclasses.replace(token, seed=token.seed if sampled else 0, alpha=BASE_ALPHA).key


def _without_ks(token: Token) -> Token:
    """The token of results the cutoffs K do not change: passes (an evaluation answers new cutoffs
    from the tie blocks its passes kept, :meth:`Evaluation.with_ks`; :func:`_at_ks`) and what is
    derived from their K-free parts (PR bands, the class-count passes and sweep)."""
    return dataclasses.replace(token, ks=())


def _passes_of(token: Token) -> Token:
    """The token of passes run at :data:`BASE_ALPHA`, with Grouped Recall's intervals and the
    summaries at the token's α a view of them (:func:`_at_alpha`), at its cutoffs a view too."""
    return dataclasses.replace(_without_ks(token), alpha=BASE_ALPHA)


def _at_alpha(token: Token, key: str, ev: Evaluation) -> Evaluation:
    """``ev`` (run at :data:`BASE_ALPHA`, stored under ``key``) at the token's α, its summaries
    computed (Grouped Recall's intervals from its groups: no pass), kept under ``key`` and α."""
    if ev.alpha == token.alpha:
        return ev

    def view(progress: Progress) -> Evaluation:
        out = ev.at_alpha(token.alpha)
        for m in out.methods:
            out.method_summary(m)  # kept by the evaluation: here, not in the page's script
        return out

    return STORE.result(f"{key}/alpha/{token.alpha!r}", view, group=token.data, label="Recomputing the intervals")


def _at_ks(token: Token, key: str, ev: Evaluation) -> Evaluation:
    """``ev`` (stored under ``key``, run at the cutoffs of whichever request came first) at the
    token's cutoffs, kept under ``key`` and them."""
    ks = tuple(sorted({1, *token.ks}))
    if ev.ks == ks:
        return ev
    return STORE.result(f"{key}/ks/{ks!r}", lambda p: ev.with_ks(ks), group=token.data,
                        label="Recomputing the cutoffs")


def evaluation(token: Token, ds: Dataset, compute=None) -> Evaluation:
    """The sidebar's evaluation. Where it runs (``compute``) is not part of the key: same results.
    Without a query sample the seed and α do not enter the pass, so one evaluation serves them all
    (results derived from it still key by the full token); new cutoffs K reuse the passes too. Nor
    does the design: the evaluation of the names' design is stored, and another design shares its
    passes and summaries (:meth:`~analysis_core.Evaluation.with_design`; a design table that does
    not fit the methods raises :class:`InputError`)."""
    key = _evaluation_key(_without_ks(dataclasses.replace(token, design=())))

    def run(progress: Progress) -> Evaluation:
        with uploads.evaluating(ds, token.precision):  # float64's larger copies, in the server's budget
            return evaluate(ds, similarity=token.similarity, ks=token.ks, n_recall=token.n_recall,
                            query_sample=token.query_sample, seed=token.seed, alpha=BASE_ALPHA, compute=compute,
                            split=token.split, progress=progress, precision=token.precision)

    return _designed(token, _at_ks(token, key, STORE.result(key, run, group=token.data, label="Evaluating")))


def class_jackknife(token: Token, ev: Evaluation):
    """The evaluation's jackknife over classes (:meth:`~analysis_core.Evaluation.class_jackknife`,
    the intervals and comparisons at the class unit), with its progress: its replicates
    (:meth:`~analysis_core.Evaluation.class_replicates`: counted by the evaluation's own passes)
    stored once whatever K and α (a request at a new K while they run waits for them), the
    jackknife at the token's cutoffs a view of them. Stored in ``ev`` too, where every core
    function that takes the evaluation finds it."""
    key = _evaluation_key(_without_ks(dataclasses.replace(token, design=())))
    reps = STORE.result(f"{key}/class-replicates", lambda p: ev.class_replicates(progress=p), group=token.data,
                        label="Intervals over classes (a jackknife over groups of classes)")
    return STORE.result(_evaluation_key(dataclasses.replace(token, design=())) + "/class-jackknife",
                        lambda p: ev.class_jackknife(replicates=reps), group=token.data,
                        label="Intervals over classes")


def _designed(token: Token, ev: Evaluation) -> Evaluation:
    return ev.with_design(token.design_table) if token.design else ev


def split_evaluation(token: Token, ds: Dataset, split: str, group_size: int, seed: int) -> Evaluation:
    # as evaluation(): neither the design nor the cutoffs nor α enter the pass
    key = _passes_of(dataclasses.replace(token, design=())).derived("split", split, group_size, seed)
    ev = _at_ks(token, key, STORE.result(key, lambda p: evaluate(
        ds, similarity=token.similarity, ks=token.ks, split=split, group_size=group_size, seed=seed,
        alpha=BASE_ALPHA, precision=token.precision), group=token.data, label=f"Evaluating split {split}"))
    return _designed(token, _at_alpha(token, f"{key}/ks/{ev.ks!r}", ev))


def runs(token: Token, evaluations: dict[str, Evaluation], select_on: str | None = None,
         report_on: str | None = None) -> RunAnalysis:
    """The run-level analysis (:func:`~analysis_core.stats.runs.run_analysis`, as the report runs
    it) of ``evaluations`` (split name, or "all", to the evaluation of that split: the sidebar's
    and those its page adds), at the token's α; with ``select_on``/``report_on``, each run's
    checkpoint chosen on one split and reported on the other. The evaluations are the token's
    (its data, settings and design), so their split names and the selection are the key."""
    first = next(iter(evaluations.values()))
    return STORE.result(token.derived("runs", tuple(evaluations), select_on, report_on), lambda p: run_analysis(
        evaluations, first.design, token.alpha, select_on=select_on, report_on=report_on), group=token.data,
        label="Comparing the families over runs")


#: The Class count page's passes over C classes holding more items than this rank a stratified
#: sample of SAMPLE_QUERIES of their queries against all of their items (unless the page is asked
#: for every query): a pass then costs SAMPLE_QUERIES x items, not items squared.
EXACT_ITEMS = 5_000
SAMPLE_QUERIES = 1_000


def subset_sample(ds: Dataset, n_classes: int, seed: int, exact: bool) -> int | None:
    """The query sample of the pass over ``n_classes`` classes drawn with ``seed``: None (every
    query) when ``exact`` or when those classes hold at most :data:`EXACT_ITEMS` items."""
    from analysis_core.stats.class_sweep import sample_classes

    if exact or ds.n_items <= EXACT_ITEMS:
        return None
    from analysis_core.stats.sampling import query_frame

    rows = sample_classes(ds.label_codes, n_classes, seed)
    if rows.size <= EXACT_ITEMS:
        return None
    isq = isg = None
    if ds.role is not None:
        isq, isg = np.isin(ds.role[rows], ("query", "both")), np.isin(ds.role[rows], ("gallery", "both"))
    return SAMPLE_QUERIES if query_frame(ds.label_codes[rows], isq, isg).size > SAMPLE_QUERIES else None


def _whole(main: Evaluation, ds: Dataset, method: str) -> Evaluation:
    """``main``'s pass of ``method`` as ``evaluate(ds, ks=(1,), methods=[method])`` over its items
    ``ds`` (every class drawn): its cutoff 1 from the kept tie blocks, no pass; exact, every query.
    Its rows index ``ds`` (as a pass over the sampled classes of ``ds`` does), not ``main``'s data."""
    ev = dataclasses.replace(main, dataset=ds, rows=np.arange(ds.n_items), split=None,
                             results={method: main.results[method]}, grouped=None, alpha=BASE_ALPHA, design=None,
                             settings={**main.settings, "methods": [method], "split": None}).with_ks((1,))
    ev.method_summary(method)
    return ev


def _subset(token: Token, ds: Dataset, method: str, n_classes: int, seed: int, exact: bool = False,
            main: Evaluation | None = None):
    if n_classes >= ds.n_classes:
        if main is not None and main.loo_pass(method) is not None and answers(main.results[method], (1,)):
            # every class of the page's evaluation, which ranked every query: its pass, exact
            return _passes_of(token).derived("subset-whole", method), lambda p: _whole(main, ds, method)
        seed = 0  # every class drawn: the same items, the same pass, whatever the seed (tested)
    sample = subset_sample(ds, n_classes, seed, exact)

    def run(p: Progress) -> Evaluation:
        ev = evaluate(ds, similarity=token.similarity, ks=(1,), methods=[method], max_classes=n_classes, seed=seed,
                      alpha=BASE_ALPHA, precision=token.precision, query_sample=sample, progress=p)
        ev.method_summary(method)  # kept by the evaluation (with_grouped shares it): here, in a guess too
        return ev

    return _passes_of(token).derived("subset", method, n_classes, seed, sample), run


def sure_hits(token: Token, main: Evaluation | None, method: str) -> np.ndarray | None:
    """The items of ``main`` (the page's evaluation, over ``main.items``) that are a hit in every
    group of Grouped Recall over any class subset (:func:`~analysis_core.stats.grouped_recall.
    sure_hits`), kept; None when its pass is not the plain leave-one-out one."""
    from analysis_core.stats.grouped_recall import sure_hits as of_pass

    p = None if main is None else main.loo_pass(method)
    if p is None:
        return None
    n = main.rows.size
    return STORE.kept(_passes_of(token).derived("sure-hits", method), lambda: of_pass(p, n), group=token.data)


def _grouped(token: Token, ds: Dataset, method: str, n_classes: int, group_size: int, seed: int,
             ev: Evaluation | None = None, sure: np.ndarray | None = None, exact: bool = False):
    """Grouped Recall@1 over :func:`_subset`'s sampled classes by the very call :func:`evaluate`
    makes with ``group_size`` (same numbers). It needs the pass ``ev`` only when one group holds
    every sampled class (that group's Recall@1 is read from the pass): otherwise it can run while
    the pass does. ``sure``: :func:`sure_hits` over ``ds`` (the same values; the groups' passes
    rank only the other queries). Unless ``exact``, above :data:`EXACT_ITEMS` items
    (:func:`subset_sample`, also with every class drawn, where the page's Recall@1 is read from
    its pass) each group ranks a stratified sample of :data:`SAMPLE_QUERIES` of its queries, as
    :func:`evaluate` with ``query_sample`` does; the page says so."""
    from analysis_core.stats.class_sweep import sample_classes
    from analysis_core.stats.grouped_recall import grouped_recall

    # the rows evaluate(max_classes=n_classes) draws (all of them, whatever the seed, when it is every class)
    rows = ev.rows if ev is not None else np.sort(sample_classes(ds.label_codes, n_classes, seed))
    sample = subset_sample(ds, n_classes, seed, exact)
    key = _passes_of(token).derived("subset-grouped", method, n_classes, group_size, seed, sample)
    return key, lambda p: grouped_recall(
        ds.embeddings[method], ds.label_codes, group_size=group_size, ks=(1,), similarity=token.similarity,
        seed=seed, repeats=1, alpha=BASE_ALPHA, loo_pass=None if ev is None else ev.loo_pass(method),
        sure_hits=sure, items=None if rows.size == ds.n_items else rows,
        query_sample=sample)


def _needs_pass(ds: Dataset, n_classes: int, group_size: int) -> bool:
    """Whether Grouped Recall's one group holds every sampled class (see :func:`_grouped`)."""
    return group_size >= min(n_classes, ds.n_classes)


def subset_evaluation(token: Token, ds: Dataset, method: str, n_classes: int, group_size: int,
                      seed: int, exact: bool = False, main: Evaluation | None = None) -> Evaluation:
    """``evaluate(ds, ks=(1,), methods=[method], max_classes=n_classes, group_size=group_size,
    seed=seed, query_sample=subset_sample(...))``, in two stored parts: the pass over the sampled
    classes (which the group size does not change) and Grouped Recall@1 for the group size — so
    that moving the group size slider does not repeat the pass. The two run at the same time
    (each has serial stretches the other fills) unless Grouped Recall reads the pass. Both run at
    :data:`BASE_ALPHA`; another α is a view of them (:func:`_at_alpha`: no pass). ``main``: the
    page's evaluation over ``ds``, whose pass tells Grouped Recall its sure hits (:func:`sure_hits`)."""
    key, fn = _subset(token, ds, method, n_classes, seed, exact, main)
    sure = sure_hits(token, main, method)
    if _needs_pass(ds, n_classes, group_size):
        ev = STORE.result(key, fn, group=token.data, label="Evaluating the sampled classes")
        gkey, gfn = _grouped(token, ds, method, n_classes, group_size, seed, ev, sure, exact)
        gr = STORE.result(gkey, gfn, group=token.data, label="Grouped Recall@1")
    else:
        gkey, gfn = _grouped(token, ds, method, n_classes, group_size, seed, sure=sure, exact=exact)
        ev, gr = STORE.results([(key, fn, "Evaluating the sampled classes"), (gkey, gfn, "Grouped Recall@1")],
                               group=token.data)
    # the view at another α: keyed by both parts (the grouped key holds the seed and the sample)
    return _at_alpha(token, f"{key}/{gkey}", ev.with_grouped({method: gr}))


SWEEP_MAX_REPEATS = 5  # the page's slider maximum


def _sweep(token: Token, ds: Dataset, method: str, group_size: int, repeats: int, exact: bool = False,
           main: Evaluation | None = None):
    """The sweep's key and computation; ``main`` (the page's evaluation over ``ds``) gives Grouped
    Recall its sure hits and the point with every class its exact values (no pass)."""
    sample = None if exact else SAMPLE_QUERIES
    sure = sure_hits(token, main, method)
    whole = None if main is None else main.loo_pass(method)
    return _passes_of(token).derived("sweep", method, group_size, repeats, sample), lambda p: class_count_sweep(
        ds.embeddings[method], ds.label_codes, repeats=repeats, group_size=group_size,
        similarity=token.similarity, query_sample=sample, exact_up_to=EXACT_ITEMS, progress=p, sure_hits=sure,
        loo_pass=whole)


def _stored_sweep(token: Token, method: str, group_size: int, repeats: int, exact: bool) -> pd.DataFrame | None:
    """A stored sweep with at least ``repeats`` repeats, cut to them: repeat r draws the same
    classes whatever the number of repeats, so fewer repeats than a stored sweep's are its first
    rows (no new run)."""
    sample = None if exact else SAMPLE_QUERIES
    for more in range(SWEEP_MAX_REPEATS, repeats - 1, -1):
        e = STORE.entry(_passes_of(token).derived("sweep", method, group_size, more, sample))
        if e is not None:
            return e.value if more == repeats else e.value[e.value["repeat"] < repeats].reset_index(drop=True)
    return None


def sweep(token: Token, ds: Dataset, method: str, group_size: int, repeats: int, exact: bool = False,
          main: Evaluation | None = None) -> pd.DataFrame:
    """The class-count sweep, with its progress; runs over more than :data:`EXACT_ITEMS` items
    rank :data:`SAMPLE_QUERIES` sampled queries unless ``exact``. A stored sweep with more
    repeats gives its first rows (:func:`_stored_sweep`)."""
    stored = _stored_sweep(token, method, group_size, repeats, exact)
    if stored is not None:
        return stored
    key, fn = _sweep(token, ds, method, group_size, repeats, exact, main)
    return STORE.result(key, fn, group=token.data, label="Sweeping class counts")


def sweep_started(token: Token, ds: Dataset, method: str, group_size: int, repeats: int, exact: bool = False,
                  main: Evaluation | None = None) -> pd.DataFrame | Progress:
    """:func:`sweep` when it is stored; else its :class:`~analysis_core_dashboard.jobs.Progress`, the sweep
    started and not waited for (the page stays usable while it runs; see
    :meth:`~analysis_core_dashboard.jobs.Store.start`)."""
    stored = _stored_sweep(token, method, group_size, repeats, exact)
    if stored is not None:
        return stored
    key, fn = _sweep(token, ds, method, group_size, repeats, exact, main)
    return STORE.start(key, fn, group=token.data)[1]  # type: ignore[return-value]


def prefetch_class_count(token: Token, ds: Dataset, methods: Sequence[str], n_classes: int, group_size: int,
                         seed: int, sweep_size: int, repeats: int, exact: bool = False,
                         main: Evaluation | None = None) -> None:
    """The Class count page's results for the other methods, one at a time in the background while
    the machine is otherwise idle, so that switching the method finds them stored: one method
    complete before the next (``methods`` in the order given: the next in the list first) — its
    sweep (the sliders above do not change it), then the pass over the sampled classes at the
    page's current settings and its Grouped Recall@1 — each started when the previous one is stored
    (:meth:`~analysis_core_dashboard.jobs.Store.prefetch_each`)."""
    def next_guess():
        for m in methods:
            sure = sure_hits(token, main, m)
            todo = [_sweep(token, ds, m, sweep_size, repeats, exact, main),
                    _subset(token, ds, m, n_classes, seed, exact, main)]
            if not _needs_pass(ds, n_classes, group_size):
                todo.append(_grouped(token, ds, m, n_classes, group_size, seed, sure=sure, exact=exact))
            elif (e := STORE.entry(todo[1][0])) is not None:
                todo.append(_grouped(token, ds, m, n_classes, group_size, seed, e.value, sure, exact))
            for key, fn in todo:
                if key not in STORE:
                    return key, fn
        return None

    STORE.prefetch_each(next_guess, group=token.data)


def vectors(token: Token, ds: Dataset, method: str) -> tuple[np.ndarray, np.ndarray]:
    """A method's vectors of the evaluated items ``ds`` prepared for the similarity and precision
    (as the engine scores them) and their squared norms in float64: kept, so a query's
    drill-down is one matrix-vector product."""
    from analysis_core.engine.layout import prepare_vectors

    def prepare(progress: Progress) -> tuple[np.ndarray, np.ndarray]:
        xf = prepare_vectors(ds.embeddings[method], token.similarity, token.precision)
        x64 = xf.astype(np.float64, copy=False)
        return xf, np.einsum("ij,ij->i", x64, x64)

    # ``ds``: the evaluated items (the split's), prepared as the engine prepares them for it
    return STORE.result(f"vectors/{token.data}/{token.similarity}/{token.precision}/{token.split}/{method}",
                        prepare, group=token.data, label="Preparing the vectors")


def _band(token: Token, ev: Evaluation, kind: str, n_recall: int | None, cls: str, unit: str | None = None):
    return _without_ks(token).derived("bands", kind, n_recall, cls, unit), lambda p: pr_bands(
        ev, alpha=token.alpha, kind=kind, n_recall=n_recall, classes=[cls], progress=p, unit=unit)


def bands(token: Token, ev: Evaluation, kind: str, n_recall: int | None = None,
          classes: tuple[str, ...] = (), unit: str | None = None) -> pd.DataFrame:
    """The bands of every query together and of ``classes`` (each class's band is computed once
    per kind, grid and unit, whichever selection asked for it first), on the ``n_recall``
    sub-grid; ``unit`` as :func:`~analysis_core.stats.bands.pr_bands` takes it."""
    def one(cls: str) -> pd.DataFrame:
        return STORE.result(*_band(token, ev, kind, n_recall, cls, unit), group=token.data,
                            label="Computing the bands")

    return pd.concat([one(ALL)] + [one(c) for c in classes], ignore_index=True)


def prefetch_bands(token: Token, ev: Evaluation, kind: str, n_recall: int | None, unit: str | None = None) -> None:
    """The band of every query together of the other kind (t or bootstrap), in the background while
    the machine is otherwise idle: switching the band finds it stored."""
    other = "bootstrap" if kind == "t" else "t"
    key, fn = _band(token, ev, other, n_recall, ALL, unit)
    if key not in STORE:
        STORE.prefetch(key, fn, group=token.data)


def selection_frame(ap: pd.DataFrame, selection: tuple) -> pd.DataFrame:
    """The Statistics page's table for ``selection`` (methods, classes, subsample): ``ap`` (the
    methods' :func:`~analysis_core.stats.variability.ap_frame`) restricted to the classes, then
    the balanced subsample ``(n per class, seed)`` if one is chosen."""
    from analysis_core.stats.variability import balanced_subsample

    ap = ap[ap["label"].isin(selection[1])]
    if selection[2] is not None:
        ap = balanced_subsample(ap, selection[2][0], seed=selection[2][1])
    return ap.reset_index(drop=True)


def _statistics_selection(selection: tuple) -> tuple:
    """The order in which methods and classes were picked does not change the analysis.
    ``selection``: (methods, classes, subsample, unit of inference)."""
    methods, classes, subsample, unit = selection
    return tuple(sorted(set(methods))), tuple(sorted(set(classes))), subsample, unit


def _prepared(token: Token, ev: Evaluation, selection: tuple, ap: pd.DataFrame):
    """(key, computation) of the α-free part of the statistics of ``selection`` (normalised)."""
    unit = selection[3]
    return _prepared_key(token, selection), lambda p: prepare(
        ap, metrics=_metrics(token, ev, selection, ap), unit=unit,
        jackknife=ev.class_jackknife(progress=p) if unit == "class" and len(selection[0]) > 1 else None)


def _metrics(token: Token, ev: Evaluation, selection: tuple, ap: pd.DataFrame) -> pd.DataFrame:
    """The every-metric table of the paired tests: the selected methods, the queries of ``ap``.
    The methods' whole table is kept (0.2 s at 30 000 queries): a new class selection, subsample
    or seed only filters it."""
    from analysis_core.stats.variability import metric_frame

    metrics = STORE.kept(f"{_evaluation_key(token)}/metric-frame/{selection[0]!r}",
                         lambda: metric_frame(ev, list(selection[0])), group=token.data)
    return metrics[metrics["query"].isin(ap["query"])].reset_index(drop=True)


def _jackknife_first(token: Token, ev: Evaluation, selection: tuple) -> None:
    """The class unit's jackknife (which the analysis of several methods reads), run as a request
    with its progress before the analyses that read it, requested or guessed: otherwise each would
    run its passes (the first time, one per method and group of classes) while another does."""
    if selection[3] == "class" and len(selection[0]) > 1:
        class_jackknife(token, ev)


def _prepared_key(token: Token, selection: tuple) -> str:
    return f"{_evaluation_key(token)}/statistics-prepared/{selection!r}"


def statistics(token: Token, ev: Evaluation, selection: tuple, ap: pd.DataFrame) -> VariabilityAnalysis:
    """The Statistics page's :func:`~analysis_core.stats.analyse` for one selection of methods,
    classes and subsample (``selection``; ``ap`` its :func:`selection_frame`). The part that
    does not depend on α (:func:`~analysis_core.stats.analysis.prepare`: the one-way tests,
    two-way ANOVA, the mixed model's fit, the paired tests' input) is kept per selection, so a
    change of α only recomputes intervals, post-hoc tables and decisions (the paired tests'
    permutation p-values are kept by the core for the same differences). The every-metric table
    for the paired tests is built inside, only when the prepared part is not stored."""
    selection = _statistics_selection(selection)
    _jackknife_first(token, ev, selection)
    key = token.derived("statistics", *selection)
    prepared = STORE.result(*_prepared(token, ev, selection, ap), group=token.data, label="Running the statistics")
    return STORE.result(key, lambda p: prepared.at(token.alpha), group=token.data, label="Running the statistics")


def prefetch_statistics(token: Token, ev: Evaluation, selection: tuple) -> None:
    """The statistics of every method for the selected classes and subsample, in the background
    while the machine is otherwise idle: the page opens on two methods and every class, and adding
    the other methods is the likely next step (with many queries, their paired permutation tests
    take seconds). Its α step is run once too, so that the core keeps the permutation p-values the
    request needs."""
    from analysis_core.stats.variability import ap_frame

    every = _statistics_selection((ev.methods, selection[1], selection[2], selection[3]))
    if every[0] == _statistics_selection(selection)[0]:
        return
    _jackknife_first(token, ev, every)

    def run(progress: Progress) -> PreparedAnalysis:
        ap = selection_frame(ap_frame(ev, list(every[0])), every)
        prepared = _prepared(token, ev, every, ap)[1](progress)
        prepared.at(token.alpha)
        return prepared

    key = _prepared_key(token, every)
    if key not in STORE:
        STORE.prefetch(key, run, group=token.data)


def checkpoints(token: Token, ev: Evaluation, unit: str = "class") -> CheckpointAnalysis:
    if unit == "class":
        class_jackknife(token, ev)  # its passes with their progress, then read by checkpoint_analysis
    return STORE.result(token.derived("checkpoints", unit), lambda p: checkpoint_analysis(
        {token.split or "all": ev}, token.alpha, unit=unit), group=token.data, label="Comparing checkpoints")


def projection(token: Token, ds: Dataset, method: str, kind: str, rows: np.ndarray | None = None, seed: int = 0):
    """The Embedding map's :func:`~analysis_core.stats.projection.project` of one method's items
    ``rows`` of ``ds`` (the sidebar split's; None: every item), kept by data, similarity, split,
    method, projection kind and seed — not by the cutoffs, α or precision, which do not move it."""
    from analysis_core.stats.projection import project

    def run(progress: Progress):
        X, codes = ds.embeddings[method], ds.label_codes
        return project(X if rows is None else X[rows], codes if rows is None else codes[rows], kind,
                       similarity=token.similarity, seed=seed)

    return STORE.result(f"projection/{token.data}/{token.similarity}/{token.split}/{method}/{kind}/{seed}", run,
                        group=token.data, label="Computing the map" + (" (UMAP: a minute or more)" if kind == "umap"
                                                                       else ""))
