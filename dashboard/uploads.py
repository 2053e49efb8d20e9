"""The server's upload budget: what every session's data together may hold in memory.

* **One budget per server.** :data:`BUDGET` bytes (``DASHBOARD_UPLOAD_MB``, default half the
  memory available when the server starts) bound the datasets the server holds — every dataset
  still referenced by a session, a stored result or a load in flight — not one upload: two
  sessions each under the budget are refused together when their sum is over it.
* **Checked before anything is inflated.** A load takes its arrays' sizes from the budget as it
  reads their headers (:class:`~analysis_core.io.numpy_files.Allowance`; an .npz member's
  declared shape, an .npy's header), before any array is allocated; every file of an upload is
  checked before the first is read. When the budget is short, the least recently used stored
  datasets are dropped first (a session still showing one keeps it, and it stays counted).
* **Counted until freed.** A dataset is counted from its load until the last reference to it goes
  (a weak reference's callback), so what a deleted or refused upload held stops counting exactly
  when its memory is given back.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable

import numpy as np

from analysis_core import Dataset
from analysis_core.io.numpy_files import Allowance, OverBudget, default_max_bytes

ENV = "DASHBOARD_UPLOAD_MB"
MiB = 2**20


def _default_budget() -> int:
    if os.environ.get(ENV):
        return int(os.environ[ENV]) * MiB
    return default_max_bytes()


def _mib(n: int) -> str:
    return f"{n / MiB:,.0f} MiB"


def dataset_bytes(ds: Dataset) -> int:
    """Bytes of a dataset's arrays, each memory block once (a view of an uploaded file's bytes
    counts those bytes; two arrays viewing one block count it once)."""
    blocks: dict[int, int] = {}
    arrays = [*ds.embeddings.values(), ds.labels, ds.label_codes, ds.class_names, ds.split, ds.confidence, ds.role,
              ds.ids, *(ds.method_confidence or {}).values()]
    for a in arrays:
        if not isinstance(a, np.ndarray):
            continue
        owner = a
        while isinstance(owner, np.ndarray) and owner.base is not None:
            owner = owner.base
        size = owner.nbytes if isinstance(owner, np.ndarray) else memoryview(owner).nbytes
        blocks[id(owner)] = max(blocks.get(id(owner), 0), size)
    return sum(blocks.values())


class Ledger:
    """Bytes the server holds for data: every live dataset it loaded and the loads in flight.
    ``evict`` drops the least recently used stored dataset (returns False when none is left)."""

    def __init__(self, budget: int, evict: Callable[[], bool] = lambda: False) -> None:
        self.budget, self.evict = budget, evict
        self._lock = threading.Lock()
        self._live: dict[int, int] = {}  # a tracked dataset's number -> its bytes, until it is freed
        self._reserved = 0
        self._count = 0

    @property
    def held(self) -> int:
        with self._lock:
            return sum(self._live.values()) + self._reserved

    def track(self, ds: Dataset) -> None:
        """Count ``ds`` until it is freed."""
        size = dataset_bytes(ds)
        with self._lock:
            self._count += 1
            key = self._count
            self._live[key] = size
        weakref.finalize(ds, self._forget, key)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._live.pop(key, None)

    def reserve(self, n: int) -> bool:
        """Reserve ``n`` bytes for a load in flight, if they fit in the budget."""
        with self._lock:
            if sum(self._live.values()) + self._reserved + n > self.budget:
                return False
            self._reserved += n
            return True

    def unreserve(self, n: int) -> None:
        with self._lock:
            self._reserved -= n


class ServerAllowance(Allowance):
    """A load's share of the server's budget: each array's bytes are reserved in the ledger as its
    header is read (dropping stored datasets nobody asked for recently when short), refused with
    the budget and how to raise it when they do not fit; :meth:`release` when the load is over."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger.budget)
        self.ledger = ledger
        self.reserved = 0

    def _grant(self, name: str, what: str, nbytes: int, desc: str) -> None:
        while not self.ledger.reserve(nbytes):
            if not self.ledger.evict():
                held = self.ledger.held
                raise OverBudget(
                    name, f"array '{what}' declares {desc}: with the {_mib(held)} of data this server holds now "
                    f"(every session's uploads together) that is over the server's upload budget of "
                    f"{_mib(self.ledger.budget)}.",
                    f"upload fewer or smaller files, or remove uploads in other tabs; to raise the budget, start "
                    f"the server with {ENV}=<MiB> (e.g. {ENV}={2 * self.ledger.budget // MiB} streamlit run "
                    "dashboard/app.py).")
        self.reserved += nbytes

    def release(self) -> None:
        self.ledger.unreserve(self.reserved)
        self.reserved = 0


LEDGER = Ledger(_default_budget())
