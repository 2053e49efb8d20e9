"""The server's upload budget (dashboard/uploads.py): every session's data together, counted from
the headers before anything is inflated and until the data are freed; stored datasets nobody holds
make room; concurrent loads never exceed it together."""

from __future__ import annotations

import gc
import io
import threading

import numpy as np
import pytest

from analysis_core import InputError
from dashboard import cache, uploads

MB = 2**20


def _npz(value: float, n: int = 2000, d: int = 1000) -> list[tuple[str, bytes]]:
    """An 8 MB dataset (float32, compressed to a few kB), one file named after ``value``."""
    buf = io.BytesIO()
    np.savez_compressed(buf, embeddings=np.full((n, d), value, np.float32), labels=np.arange(n) % 2)
    return [(f"v{value}.npz", buf.getvalue())]


@pytest.fixture
def server(monkeypatch):
    """A fresh store and a 12 MiB upload budget wired together as in the server."""
    store = cache.Store(budget=10**9, max_entries=10)
    ledger = uploads.Ledger(12 * MB, store.drop_oldest_data)
    monkeypatch.setattr(cache, "STORE", store)
    monkeypatch.setattr(uploads, "LEDGER", ledger)
    return store, ledger


def _load(files):
    return cache.dataset(cache.files_digest(files), lambda: files, "cosine")


def test_a_dataset_counts_until_it_is_freed(server):
    store, ledger = server
    ds = _load(_npz(1.0))
    assert ledger.held == uploads.dataset_bytes(ds) >= 2000 * 1000 * 4
    store.drop_group(cache.files_digest(_npz(1.0)))
    assert ledger.held > 0  # this test still holds it
    del ds
    gc.collect()
    assert ledger.held == 0


def test_a_stored_dataset_nobody_holds_makes_room(server):
    store, ledger = server
    _load(_npz(1.0))  # kept by the store only
    ds = _load(_npz(2.0))
    assert ds.n_items == 2000 and len(store) == 1 and ledger.held == uploads.dataset_bytes(ds)


def test_over_the_budget_is_refused_with_how_to_raise_it_and_releases_its_reservation(server):
    store, ledger = server
    kept = _load(_npz(1.0))
    with pytest.raises(InputError) as e:
        _load(_npz(2.0))
    assert "12 MiB" in e.value.problem and "every session's uploads together" in e.value.problem
    assert "DASHBOARD_UPLOAD_MB=" in e.value.fix
    assert ledger.held == uploads.dataset_bytes(kept)  # the refused load reserved nothing lasting


def test_concurrent_loads_stay_under_the_budget_together(server):
    """Two sessions loading 8 MB each at the same moment against 12 MiB: one gets its data, the
    other the budget's message; what the ledger counts never exceeds the budget."""
    store, ledger = server
    start = threading.Barrier(2)
    got: dict[int, object] = {}
    highest = [0]

    def session(i: int) -> None:
        start.wait()
        try:
            got[i] = _load(_npz(float(i + 1)))
        except InputError as exc:
            got[i] = exc
        highest[0] = max(highest[0], ledger.held)

    threads = [threading.Thread(target=session, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    kinds = sorted(type(v).__name__ for v in got.values())
    assert kinds == ["Dataset", "OverBudget"], got
    assert highest[0] <= 12 * MB


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(uploads.ENV, "300")
    assert uploads._default_budget() == 300 * MB
    monkeypatch.delenv(uploads.ENV)
    assert 0 < uploads._default_budget() < 1 << 50
