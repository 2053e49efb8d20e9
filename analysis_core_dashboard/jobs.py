"""The job store shared by every session of this server process: results by key, bounded in bytes
and entries (least recently used first; a dataset goes with everything derived from it), each
computed once on a small thread pool whatever number of sessions ask, kept when the session that
asked goes away, and prefetches (guesses) at the lowest CPU priority that yield to requests. What
is computed and under which key is :mod:`analysis_core_dashboard.cache`'s business.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

import numpy as np
import pandas as pd
import streamlit as st

from analysis_core import Dataset


def _default_budget() -> int:
    if "DASHBOARD_CACHE_MB" in os.environ:
        return int(os.environ["DASHBOARD_CACHE_MB"]) * 2**20
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (ValueError, OSError, AttributeError):  # no sysconf (e.g. Windows)
        return 4 * 2**30


BUDGET_BYTES = _default_budget()
MAX_ENTRIES = 64
WORKERS = 2  # computations at once; each uses every core through BLAS / faiss
LOWEST_PRIORITY = 19  # the nice value of the prefetch thread (and the threads it starts)


def lower_priority() -> bool:
    """Give the calling thread (and the threads it starts afterwards) the lowest CPU priority.
    Linux only, where the nice value is per thread; elsewhere it is per process and the whole
    server would slow down, so nothing is changed. Returns whether it was lowered."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)
    except (OSError, AttributeError):
        return False
    return True


def restore_priority() -> int:
    """Give the threads at the lowest priority (the guess's, see :func:`lower_priority`) the
    server's priority again: a request now waits for that guess, and on a machine shared with other
    work it would wait behind every other process. Raising a priority needs CAP_SYS_NICE (root, or
    granted); without it nothing changes. Returns how many threads were raised."""
    if not sys.platform.startswith("linux"):
        return 0
    raised = 0
    try:
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())  # the main thread's: the server's
        for tid in os.listdir("/proc/self/task"):
            if os.getpriority(os.PRIO_PROCESS, int(tid)) == LOWEST_PRIORITY > base:
                os.setpriority(os.PRIO_PROCESS, int(tid), base)
                raised += 1
    except (OSError, ValueError):  # not permitted, or a thread that just ended
        pass
    return raised


def nbytes(obj: object, _seen: set[int] | None = None) -> int:
    """Bytes held by a result: its arrays and frames (counted once each), walking dataclasses,
    dicts, lists and tuples. A :class:`Dataset` inside an evaluation is not counted: it is the
    stored dataset's entry."""
    seen = set() if _seen is None else _seen
    if id(obj) in seen or isinstance(obj, Dataset) and _seen is not None:
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if isinstance(obj, pd.DataFrame | pd.Series):
        return int(obj.memory_usage(deep=True).sum() if isinstance(obj, pd.DataFrame) else obj.memory_usage(deep=True))
    if isinstance(obj, dict):
        return sys.getsizeof(obj) + sum(nbytes(k, seen) + nbytes(v, seen) for k, v in obj.items())
    if isinstance(obj, list | tuple | set | frozenset):
        return sys.getsizeof(obj) + sum(nbytes(v, seen) for v in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sys.getsizeof(obj) + sum(nbytes(getattr(obj, f.name), seen) for f in dataclasses.fields(obj))
    return sys.getsizeof(obj)


class _Superseded(Exception):
    """Raised inside a guess nobody asked for when a newer guess replaces it."""


_GAVE_UP = object()  # what a superseded guess's future returns


class Progress:
    """What a running computation last reported, read by the sessions waiting for it. A guess
    (``guess``) that is ``superseded`` before anyone asks for it stops at its next report."""

    def __init__(self, guess: bool = False) -> None:
        self.fraction = 0.0
        self.stage = ""
        self.guess = guess
        self.superseded = False
        self.finished = False  # stored, failed or given up: a page polling it reruns (Store.start)
        self.background = False  # started by Store.start: nobody waits, lowest priority
        self.watchers: set[str | None] = set()  # the sessions whose pages asked for it (Store.start)

    def __call__(self, done: int, total: int, stage: str) -> None:
        if self.superseded:
            raise _Superseded
        self.fraction, self.stage = min(done / max(total, 1), 1.0), stage


@dataclasses.dataclass
class _Entry:
    value: object
    size: int
    group: str
    similarities: set[str] = dataclasses.field(default_factory=set)  # a dataset's validated similarities


class Store:
    """A byte- and entry-bounded LRU of results, with the computations in flight."""

    def __init__(self, budget: int, max_entries: int, workers: int = WORKERS) -> None:
        self.budget, self.max_entries = budget, max_entries
        self._lock = threading.Lock()
        self._items: OrderedDict[str, _Entry] = OrderedDict()
        self._running: dict[str, tuple[Future, Progress]] = {}
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dashboard-compute")
        self._guesses = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-prefetch",
                                           initializer=lower_priority)
        # what a page started and does not wait for (Store.start): its own worker, so that the
        # requests a page makes meanwhile never queue behind it, at the lowest priority
        self._background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dashboard-background",
                                              initializer=lower_priority)
        self.computed = 0  # computations finished (with a result or an error), for tests and logs
        self._failed: dict[str, Exception] = {}  # background computations that raised, and what (see start)

    @property
    def used(self) -> int:
        with self._lock:
            return sum(e.size for e in self._items.values())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def entry(self, key: str) -> _Entry | None:
        with self._lock:
            e = self._items.get(key)
            if e is not None:
                self._items.move_to_end(key)
            return e

    def drop_group(self, group: str) -> None:
        with self._lock:
            for k in [k for k, e in self._items.items() if e.group == group]:
                del self._items[k]

    def drop_oldest_data(self) -> bool:
        """Drop the least recently used dataset with everything derived from it (the upload budget
        is short); False when no dataset is stored."""
        with self._lock:
            group = next((e.group for k, e in self._items.items() if k == "data/" + e.group), None)
        if group is None:
            return False
        self.drop_group(group)
        return True

    def _put(self, key: str, value: object, group: str, similarities: set[str]) -> None:
        size = nbytes(value)
        with self._lock:
            if size > self.budget:
                return
            self._items[key] = _Entry(value, size, group, similarities)
            self._items.move_to_end(key)
            while len(self._items) > self.max_entries or sum(e.size for e in self._items.values()) > self.budget:
                old_key, old = next(iter(self._items.items()))
                doomed = [k for k, e in self._items.items() if e.group == old.group] \
                    if old_key == "data/" + old.group else [old_key]  # a dataset takes its derived results along
                for k in doomed:
                    del self._items[k]

    def _compute(self, key: str, fn: Callable[[Progress], object], group: str, similarities: set[str],
                 progress: Progress, then: Callable[[], object] | None = None) -> object:
        done = True
        if progress.guess or progress.background:
            lower_priority()  # again: a request that joined the previous guess raised this thread
        try:
            value = fn(progress)
            self._put(key, value, group, similarities)
            with self._lock:
                self._failed.pop(key, None)
            if then is not None and progress.guess and not progress.superseded:
                then()  # the next guess of a chain (see prefetch_each), unless a request is running
            return value
        except _Superseded:
            done = False
            return _GAVE_UP
        except Exception as exc:
            if not progress.background:
                raise  # a request waits for it and shows it (see _wait)
            # nobody waits: kept for Store.start, which raises it on the page; its traceback kept as
            # text, its frames let go (with the arrays they held: a failed load's upload, say)
            exc.add_note("raised in the background:\n" + "".join(traceback.format_exception(exc)).rstrip())
            exc.__traceback__ = exc.__context__ = exc.__cause__ = None
            with self._lock:
                self._failed[key] = exc
            return _GAVE_UP  # a request that joined just now runs it again (see result)
        finally:
            with self._lock:
                self._running.pop(key, None)
                self.computed += done
            progress.finished = True

    def result(self, key: str, fn: Callable[[Progress], object], *, group: str, label: str,
               similarities: set[str] | None = None) -> object:
        """The stored result for ``key``, or ``fn(progress)`` computed on the pool (once, however
        many sessions ask at the same time) while this session shows its progress."""
        e = self.entry(key)
        if e is not None:
            return e.value
        # no local holds the future: a failure's traceback includes this frame (see _wait)
        value = _wait(*self._start(key, fn, group, similarities or set()), label)
        while value is _GAVE_UP:  # a guess superseded just before this request reached it: run it
            value = _wait(*self._start(key, fn, group, similarities or set()), label)
        return value

    def results(self, specs: list[tuple[str, Callable[[Progress], object], str]], *, group: str) -> list[object]:
        """:meth:`result` of several (key, computation, label) at once: every missing one is started
        (on the request pool, side by side), then each is waited for with its progress shown."""
        todo = [None if self.entry(key) is not None else self._start(key, fn, group, set()) for key, fn, _ in specs]
        out = []
        for i, (key, fn, label) in enumerate(specs):
            started, todo[i] = todo[i], None  # no future stays referenced from this frame (see result)
            out.append(self.result(key, fn, group=group, label=label) if started is None else _wait(*started, label))
            del started
            while out[-1] is _GAVE_UP:  # a guess superseded just before this request reached it: run it
                out[-1] = _wait(*self._start(key, fn, group, set()), label)
        return out

    def start(self, key: str, fn: Callable[[Progress], object], *, group: str) -> tuple[bool, object]:
        """``(True, value)`` when ``key`` is stored; else ``(False, progress)``: ``fn`` started in
        the background (its own worker, at the lowest CPU priority; unless it is running already),
        not waited for — a page shows ``progress`` and polls until
        ``progress.finished``, and the requests it makes meanwhile (other controls) do not queue
        behind it. A request for it (:meth:`result`) raises its priority. When its last run
        raised, that error is raised here, once (the page shows it as any other; the next call
        starts it again), so that a failing computation is neither restarted by every poll nor
        run again in the foreground. What this session started before and no other session
        asked for is stopped (the page moved on: another method, more repeats), so that the one
        worker serves what the page shows now; another session's work is never stopped (two pages
        polling different computations cannot stop each other back and forth)."""
        e = self.entry(key)
        if e is not None:
            return True, e.value
        me = _session()
        with self._lock:
            failed = self._failed.pop(key, None)
            # this session's earlier background work that no other session asked for: its page
            # moved on (another method, more repeats), so it stops (at its next progress report, or
            # before it starts) instead of keeping the one worker from what the page shows now
            for k, (other, p) in list(self._running.items()):
                if k != key and p.background and p.watchers == {me}:
                    p.superseded = True
                    if other.cancel():
                        del self._running[k]
                        p.finished = True
            other = None  # no future referenced from this frame (see _wait)
        if failed is not None:
            raise failed
        fut, progress = self._start(key, fn, group, set(), pool=self._background)
        if fut is None:  # stored meanwhile
            return True, progress
        del fut  # no reference to the future from here (see _wait)
        with self._lock:
            progress.watchers.add(me)
        return False, progress

    def background_running(self) -> bool:
        """Whether something :meth:`start` began is still running (nobody waits for it)."""
        with self._lock:
            return any(p.background for _, p in self._running.values())

    def kept(self, key: str, fn: Callable[[], object], *, group: str) -> object:
        """The stored result for ``key``, or ``fn()`` computed in the calling thread and stored: a
        part that several computations share, asked for from inside them (no progress shown)."""
        e = self.entry(key)
        if e is not None:
            return e.value
        value = fn()
        self._put(key, value, group, set())
        return value

    def prefetch_each(self, next_guess: Callable[[], tuple[str, Callable[[Progress], object]] | None], *,
                      group: str) -> None:
        """:meth:`prefetch` of ``next_guess()`` (a (key, computation) not stored yet, or None when
        none is left), and when it is stored, of the next one, and so on: while the server stays
        idle, one guess after another, until nothing is left or a newer guess or a request comes."""
        spec = next_guess()
        if spec is not None:
            self.prefetch(*spec, group=group, then=lambda: self.prefetch_each(next_guess, group=group))

    def prefetch(self, key: str, fn: Callable[[Progress], object], *, group: str,
                 then: Callable[[], object] | None = None) -> None:
        """Start ``fn`` in the background when no request is running, and store its result like
        any other: a guess at the next request, which never queues ahead of a request made and
        runs at the lowest CPU priority (a request made meanwhile gets the cores). A newer guess
        replaces a running one that nobody has asked for yet (it stops at its next progress
        report): the guesses follow the page being looked at. ``then``: called in the guess's thread
        once its result is stored, unless superseded (the next guess of :meth:`prefetch_each`)."""
        with self._lock:
            if key in self._items or key in self._running:
                return
            if any(not p.guess for _, p in self._running.values()):
                return
            for _, p in self._running.values():
                p.superseded = True
        self._start(key, fn, group, set(), pool=self._guesses, then=then)

    def _start(self, key: str, fn: Callable[[Progress], object], group: str, similarities: set[str],
               pool: ThreadPoolExecutor | None = None,
               then: Callable[[], object] | None = None) -> tuple[Future, Progress] | tuple[None, object]:
        """The computation of ``key`` in flight (started here, on ``pool`` or the request pool, if
        none is), or ``(None, value)`` when its result was stored since :meth:`result` looked."""
        with self._lock:
            if key in self._items:
                return None, self._items[key].value
            if key not in self._running:
                progress = Progress(guess=pool is self._guesses)
                progress.background = pool is self._background
                fut = (pool or self._pool).submit(self._compute, key, fn, group, similarities, progress, then)
                self._running[key] = fut, progress
            elif pool is None and (self._running[key][1].guess or self._running[key][1].background):
                # a request for a running guess (or background computation): it is now a
                # request, never superseded, at the server's priority
                p = self._running[key][1]
                p.guess = p.superseded = p.background = False
                restore_priority()
            elif pool is self._background and (self._running[key][1].guess or self._running[key][1].background):
                p = self._running[key][1]  # a page polls this one now: not superseded (if not stopped yet)
                p.guess = p.superseded = False
                p.background = True
            return self._running[key]


def _session() -> str | None:
    """The Streamlit session running this script (None outside one: tests, benchmarks)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return None if ctx is None else ctx.session_id


def _wait(fut: Future | None, progress: Progress, label: str) -> object:
    """Wait for ``fut`` in the session's script thread. Streamlit stops or reruns a script by
    raising inside its next ``st`` call (here the progress bar); that leaves the computation
    running on the pool, and its result is stored for the next request."""
    if fut is None:  # stored meanwhile: ``progress`` is the value (see Store._start)
        return progress
    if not wait([fut], timeout=0.3).done:
        bar = st.progress(0.0, text=label)
        while not wait([fut], timeout=0.25).done:
            bar.progress(progress.fraction, text=f"{label}: {progress.stage}" if progress.stage else label)
        bar.empty()
    try:
        return fut.result()
    finally:
        # A failure's traceback includes this frame: no local may lead back to the future (and so
        # to the exception), or the cycle keeps a refused upload's arrays, held by the failed
        # computation's frames, alive until the garbage collector happens to run.
        del fut
