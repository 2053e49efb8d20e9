"""The server's upload budget (analysis_core_dashboard/uploads.py): every session's data together (Streamlit's
upload store, the datasets, the working copies kept for their evaluation), counted from the headers
before anything is inflated and until the data are freed; stored datasets nobody holds make room;
concurrent loads and receipts never exceed it together; what it refuses is given back."""

from __future__ import annotations

import copy
import gc
import io
import threading

import numpy as np
import pytest
from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager
from streamlit.runtime.uploaded_file_manager import UploadedFile, UploadedFileRec

from analysis_core import InputError
from analysis_core_dashboard import cache, uploads

MB = 2**20
N, D = 2000, 1000
WORK = 2 * N * D * 4  # an evaluation's two float32 copies of the vectors (normalised, canonical order)
BUDGET = 40 * MB  # one 8 MB dataset with its working copies (~23 MiB) and a second file, not two datasets


def _npz(value: float, n: int = N, d: int = D, compressed: bool = True) -> list[tuple[str, bytes]]:
    """An 8 MB dataset (float32; compressed: a few kB), one file named after ``value``."""
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(
        buf, embeddings=np.full((n, d), value, np.float32), labels=np.arange(n) % 2)
    return [(f"v{value}.npz", buf.getvalue())]


@pytest.fixture
def server(monkeypatch):
    """A fresh store and a 40 MiB upload budget wired together as in the server."""
    store = cache.Store(budget=10**9, max_entries=10)
    ledger = uploads.Ledger(BUDGET, store.drop_oldest_data)
    monkeypatch.setattr(cache, "STORE", store)
    monkeypatch.setattr(uploads, "LEDGER", ledger)
    return store, ledger


def _load(files):
    return cache.dataset(cache.files_digest(files), lambda: files, "cosine")


def test_a_dataset_counts_until_it_is_freed(server):
    store, ledger = server
    ds = _load(_npz(1.0))
    assert uploads.dataset_bytes(ds) >= N * D * 4
    assert ledger.held == uploads.dataset_bytes(ds) + WORK
    store.drop_group(cache.files_digest(_npz(1.0)))
    assert ledger.held > 0  # this test still holds it
    del ds
    gc.collect()
    assert ledger.held == 0


def test_a_stored_dataset_nobody_holds_makes_room(server):
    store, ledger = server
    _load(_npz(1.0))  # kept by the store only
    ds = _load(_npz(2.0))
    assert ds.n_items == N and len(store) == 1 and ledger.held == uploads.dataset_bytes(ds) + WORK


def test_over_the_budget_is_refused_with_how_to_raise_it_and_releases_its_reservation(server):
    store, ledger = server
    kept = _load(_npz(1.0))
    with pytest.raises(InputError) as e:
        _load(_npz(2.0))
    assert "40 MiB" in e.value.problem and "every session's uploads together" in e.value.problem
    assert "DASHBOARD_UPLOAD_MB=" in e.value.fix
    assert ledger.held == uploads.dataset_bytes(kept) + WORK  # the refused load reserved nothing lasting


def test_concurrent_loads_stay_under_the_budget_together(server):
    """Two sessions loading 8 MB each (with 16 MB of working copies) at the same moment against
    40 MiB: one gets its data, the other the budget's message; what the ledger counts never
    exceeds the budget."""
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
    assert highest[0] <= BUDGET


def test_the_budget_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(uploads.ENV, "300")
    assert uploads._default_budget() == 300 * MB
    monkeypatch.delenv(uploads.ENV)
    assert 0 < uploads._default_budget() < 1 << 50


# --------------------------------------------------------------------------- Streamlit's upload store


@pytest.fixture
def upload_store(server, monkeypatch):
    """Streamlit's own upload store, counted in the server's ledger and guarded by its budget, as
    the dashboard does on a server's first script run; this script run is session "s"."""
    mgr = MemoryUploadedFileManager("/upload")
    uploads.guard_upload_store(mgr)
    monkeypatch.setattr(uploads, "_session", lambda: (mgr, "s"))
    return mgr


def _upload(mgr, name: str, data: bytes, session: str = "s", file_id: str | None = None) -> UploadedFile:
    rec = UploadedFileRec(file_id or name, name, "application/octet-stream", data)
    mgr.add_file(session, rec)
    return UploadedFile(rec, None)


def _stored(mgr) -> int:
    return sum(len(r.data) for files in mgr.file_storage.values() for r in files.values())


def test_the_upload_store_counts_and_a_dataset_viewing_a_file_counts_it_once(server, upload_store):
    """An uncompressed npz in the upload store counts its bytes; its dataset is a view of them,
    so loading it adds only the working copies; the bytes count until both the uploader and the
    dataset let them go."""
    store, ledger = server
    (name, data), = _npz(1.0, compressed=False)
    up = _upload(upload_store, name, data)
    assert ledger.held == len(data)
    files = [(up.name, up.getvalue())]
    ds = cache.dataset("d", lambda: files, "cosine")
    labels = 2 * N * 8  # the labels and their codes (int64): the dataset's own arrays
    assert len(data) + labels <= ledger.held - WORK < len(data) + labels + 1000  # not 2 x the file: a view
    upload_store.remove_file("s", up.file_id)
    del up
    assert len(data) + labels <= ledger.held - WORK < len(data) + labels + 1000  # the dataset holds the bytes
    store.drop_group("d")
    del ds
    gc.collect()
    assert ledger.held == 0


def test_an_upload_over_the_budget_is_not_kept_and_the_page_is_told_which(server, upload_store):
    """A file the budget cannot hold is stored empty under its id (still listed), the refusal
    names it, the budget and how to raise it; a file that fits is kept as it came."""
    store, ledger = server
    small = _upload(upload_store, "small.bin", b"x" * (30 * MB))
    big = _upload(upload_store, "big.bin", b"y" * (11 * MB))
    assert _stored(upload_store) == ledger.held == 30 * MB
    assert upload_store.get_files("s", ["big.bin"])[0].data == b""
    why = uploads.refusal([small, big])
    assert why is not None and "big.bin" in why and "small.bin" not in why
    assert "40 MiB" in why and "DASHBOARD_UPLOAD_MB=" in why
    assert uploads.refusal([small]) is None
    upload_store.remove_file("s", "big.bin")  # the user removes it: its refusal goes with it
    assert uploads.refusal([big]) is None


def test_concurrent_receipts_never_hold_more_than_the_budget(server, upload_store):
    """Eight sessions' 7 MiB files received at once against 40 MiB: exactly five kept (what fits),
    the others stored empty, and the store never held more than the budget."""
    store, ledger = server
    start = threading.Barrier(8)
    highest = [0]

    def session(i: int) -> None:
        start.wait()
        _upload(upload_store, f"f{i}.bin", bytes(7 * MB), session=f"s{i}")
        highest[0] = max(highest[0], _stored(upload_store))

    threads = [threading.Thread(target=session, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    kept = [r for files in upload_store.file_storage.values() for r in files.values() if r.data]
    assert len(kept) == BUDGET // (7 * MB) == 5 and highest[0] <= BUDGET and ledger.held == 5 * 7 * MB


def test_a_load_refused_by_the_budget_gives_its_files_bytes_back(server, upload_store):
    """Two 8 MB uncompressed uploads that fit as files but not with two evaluations' copies: the
    second load is refused; :func:`uploads.release` leaves its file listed but empty, with the
    refusal, and the ledger back at the first dataset's count."""
    store, ledger = server
    files = [_upload(upload_store, n, d) for n, d in (*_npz(1.0, compressed=False), *_npz(2.0, compressed=False))]
    kept = cache.dataset("a", lambda: [(files[0].name, files[0].getvalue())], "cosine")
    with pytest.raises(uploads.OverBudget) as e:
        cache.dataset("b", lambda: [(files[1].name, files[1].getvalue())], "cosine")
    assert "working copies" in e.value.problem
    uploads.release([files[1]], str(e.value))
    assert upload_store.get_files("s", [files[1].file_id])[0].data == b""
    assert uploads.refusal(files) == str(e.value)
    assert ledger.held == uploads.dataset_bytes(kept) + WORK < len(files[0].getvalue()) + WORK + MB


def test_the_dataset_reads_the_stores_bytes_and_the_widgets_copy_shares_them(server, upload_store):
    """Streamlit hands the script a deep copy of the uploader's value on every run; with
    :func:`uploads.share_upload_copies` (the server's start) the copy shares the file's bytes (no
    copy of an 882 MB upload per run) with its own position, and writing to it leaves the stored
    file as it was. :func:`uploads.stored` gives the store's own bytes object and closes the copy."""
    uploads.share_upload_copies()
    uploads.share_upload_copies()  # idempotent
    up = _upload(upload_store, "a.bin", bytes(3 * MB))
    up.seek(7)
    copy_ = copy.deepcopy(up)  # what st.file_uploader returns (session_state.register_widget)
    assert copy_.getvalue() is up.getvalue() and isinstance(copy_, UploadedFile)  # shared, not copied
    assert copy_.tell() == 7 and (copy_.file_id, copy_.name, copy_.size) == (up.file_id, up.name, up.size)
    copy_.seek(0)
    copy_.write(b"changed")
    assert up.tell() == 7 and up.getvalue() == bytes(3 * MB) and copy_.getvalue()[:7] == b"changed"
    copy_ = copy.deepcopy([up])[0]  # inside the list Streamlit stores
    got, = uploads.stored([copy_])
    assert got.data is upload_store.get_files("s", ["a.bin"])[0].data and copy_.closed
    assert (got.file_id, got.name, got.getvalue()) == ("a.bin", "a.bin", bytes(3 * MB))


def test_a_removed_upload_is_closed_wherever_streamlit_kept_it(server, upload_store):
    """Objects of a file the uploader no longer lists (Streamlit keeps the previous value until the
    next rerun) are closed, so they stop holding its bytes; those of files still listed are not."""
    kept, gone = _upload(upload_store, "kept.bin", b"k" * 100), _upload(upload_store, "gone.bin", b"g" * 100)
    old_value = [UploadedFile(upload_store.get_files("s", [f])[0], None) for f in ("kept.bin", "gone.bin")]
    uploads.let_go(uploads.stored([kept, gone]))
    upload_store.remove_file("s", "gone.bin")
    uploads.let_go(uploads.stored([UploadedFile(upload_store.get_files("s", ["kept.bin"])[0], None)]))
    assert old_value[1].closed and not old_value[0].closed


def test_a_float64_evaluation_reserves_its_larger_copies_while_it_runs(server):
    """float64 working copies take twice the float32 ones kept with the dataset: the difference is
    reserved while the evaluation runs, refused with the budget's message when it does not fit."""
    store, ledger = server
    ds = _load(_npz(1.0))
    base = ledger.held
    with uploads.evaluating(ds, "float64"):
        assert ledger.held == base + 2 * N * D * (8 - 4)
    assert ledger.held == base
    with uploads.evaluating(ds, "float32"):
        assert ledger.held == base
    ledger.budget = base + 2 * N * D * (8 - 4) - 1
    with pytest.raises(uploads.OverBudget) as e, uploads.evaluating(ds, "float64"):
        pass
    assert "float64" in e.value.problem and ledger.held == base
