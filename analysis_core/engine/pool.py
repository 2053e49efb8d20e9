"""The thread pool of the in-process pass: lists of tile tasks on n threads, progress reported
from the caller's thread; and BLAS held to one thread while tiles are computed (each tile is one
single-threaded call: see :mod:`.core`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Progress = Callable[[int, int, str], None]

_BLAS = None


def single_threaded_blas():
    """A context in which BLAS calls use one thread. The library scan behind it (threadpoolctl
    walks every loaded shared object: ~8 ms) is done once per process, not once per pass: a
    class-count sweep runs hundreds of small passes."""
    global _BLAS
    if _BLAS is None:
        from threadpoolctl import ThreadpoolController

        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


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
