"""The thread pool of the in-process pass: lists of tile tasks on n threads, progress reported
from the caller's thread."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable

Progress = Callable[[int, int, str], None]


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

        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in range(self.n)]
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
