"""The thread pool of the in-process pass: lists of tile tasks on n threads, progress reported
from the caller's thread; and BLAS held to one thread while tiles are computed (each tile is one
single-threaded call: see :mod:`.core`)."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable

Progress = Callable[[int, int, str], None]

_BLAS = None
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0  # passes inside single_threaded_blas() now (a server runs several at once)
_BLAS_LIMIT = None


@contextlib.contextmanager
def single_threaded_blas():
    """A context in which BLAS calls use one thread: a tile's bits depend on how many threads
    BLAS splits it over (measured: OpenBLAS's 512 x 512 sgemm on 1 and on 2 threads differ).

    OpenBLAS's thread count is process-wide. Passes running at the same time (a dashboard serving
    several sessions, Grouped Recall's groups) share one limit: the first to enter sets it, the
    last to leave restores BLAS's own setting, so no pass lifts it while another is computing
    tiles. threadpoolctl lets only one "controlling" thread change OpenBLAS and silently ignores
    the others; the thread that sets or restores the limit takes control for that moment.
    The library scan behind the controller (~8 ms) is done once per process: a class-count
    sweep runs hundreds of small passes."""
    global _BLAS, _BLAS_USERS, _BLAS_LIMIT
    with _BLAS_LOCK:
        if _BLAS is None:
            from threadpoolctl import ThreadpoolController

            _BLAS = ThreadpoolController()
        if _BLAS_USERS == 0:
            _take_blas_control()
            _BLAS_LIMIT = _BLAS.limit(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0:
                _take_blas_control()
                assert _BLAS_LIMIT is not None  # set by the first user
                _BLAS_LIMIT.restore_original_limits()
                _take_blas_control()
                _BLAS_LIMIT = None


def _take_blas_control() -> None:
    """Let the calling thread change OpenBLAS's thread count (threadpoolctl >= 3.6 ignores every
    thread but the one that changed it last, until that one hands control back)."""
    import threadpoolctl

    clear = getattr(getattr(threadpoolctl, "OpenBLASController", None), "clear_controlling_thread", None)
    if clear is not None:
        clear(force=True)


class Workers:
    """Runs lists of tile tasks on ``n`` threads; progress is reported from the caller's thread
    only (UI toolkits such as Streamlit refuse updates from other threads)."""

    def __init__(self, n: int, total: int, progress: Progress | None) -> None:
        self.n = n
        self.total = total
        self.progress = progress
        self.done = 0
        self.lock = threading.Lock()

    def tick(self) -> None:
        with self.lock:
            self.done += 1

    def run(self, tasks: list[list[tuple[int, int]]], work: Callable, stage: str) -> None:
        n = min(self.n, len(tasks))
        if n <= 1:  # one task list (a small pass): no thread to start
            for task in tasks:
                for ij in task:
                    work(0, ij)
                    self.tick()
            if self.progress is not None and tasks:
                self.progress(self.done, self.total, stage)
            return
        q: queue.Queue = queue.Queue()
        for t in tasks:
            q.put(t)
        errors: list[BaseException] = []

        def loop(w: int) -> None:
            try:
                while True:
                    try:
                        task = q.get_nowait()
                    except queue.Empty:
                        return
                    for ij in task:
                        work(w, ij)
                        self.tick()
            except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
                errors.append(exc)

        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(n)]
        for th in threads:
            th.start()
        reported = -1
        for th in threads:
            while th.is_alive():
                th.join(timeout=0.1)
                if self.progress is not None and self.done != reported:
                    reported = self.done
                    self.progress(reported, self.total, stage)
        if errors:
            raise errors[0]
