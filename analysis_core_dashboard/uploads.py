"""The server's upload budget: what every session's data together may hold in memory.

* **One budget per server.** ``LEDGER.budget`` bytes (``DASHBOARD_UPLOAD_MB``, default half the
  memory available when the server starts) bound what the server holds for data, every session
  together: the bytes of every file in Streamlit's upload store (each session's listed uploads),
  every dataset still referenced by a session, a stored result or a load in flight, and the copies
  an evaluation makes of the vectors. A block of memory counts once: a dataset read as a view of
  its uploaded file's bytes counts those bytes, not twice.
* **Refused on receipt.** An uploaded file that does not fit is not kept: the upload store gets an
  empty file under its id (the uploader still lists it, so nothing the user chose disappears) and
  the page says which file, the budget, and how to raise it (:func:`guard_upload_store`).
* **Checked before anything is inflated.** A load takes its arrays' sizes from the budget as it
  reads their headers (:class:`~analysis_core.io.numpy_files.Allowance`; an .npz member's
  declared shape, an .npy's header), before any array is allocated; every file of an upload is
  checked before the first is read; an array that will be a view of the file's bytes takes
  nothing (they are counted in the upload store). When the budget is short, the least recently
  used stored datasets are dropped first (a session still showing one keeps it, and it stays
  counted). A load refused by the budget gives its files' bytes back (:func:`release`).
* **Room for the evaluation.** A dataset is kept only with room for the working copies its
  evaluation makes (:func:`working_bytes`), counted for as long as it lives: an accepted upload can
  always be evaluated, and two sessions never both start evaluations the budget cannot hold.
* **Counted until freed.** A dataset is counted from its load until the last reference to it goes
  (a weak reference's callback), an uploaded file until the uploader lets it go: what a deleted or
  refused upload held stops counting exactly when its memory is given back.
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import NamedTuple

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


def dataset_blocks(ds: Dataset) -> dict[int, int]:
    """The memory blocks of a dataset's arrays: the id of each block's owner (the array that owns
    its memory, or the bytes object a view reads) -> its bytes. Ids are valid while ``ds`` lives."""
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
    return blocks


def dataset_bytes(ds: Dataset) -> int:
    """Bytes of a dataset's arrays, each memory block once (a view of an uploaded file's bytes
    counts those bytes; two arrays viewing one block count it once)."""
    return sum(dataset_blocks(ds).values())


def working_bytes(ds: Dataset, precision: str = "float32") -> int:
    """Bytes of the copies an evaluation of ``ds`` in ``precision`` holds at once: two arrays the
    size of one method's vectors in that dtype (the vectors as scored, normalised for cosine, and
    their deduplicated copy in canonical order: :func:`analysis_core.engine.layout.prepare_vectors`,
    :func:`~analysis_core.engine.layout.canonical_order`), for the largest method (methods are
    evaluated one after another)."""
    return 2 * np.dtype(precision).itemsize * max((np.asarray(X).size for X in ds.embeddings.values()), default=0)


def _no_files() -> dict[int, int]:
    return {}


class Ledger:
    """Bytes the server holds for data: the files ``stored`` returns (block id -> bytes: the upload
    store's), every live dataset it tracked with the working bytes kept for it, and the loads and
    evaluations in flight. ``evict`` drops the least recently used stored dataset (returns False
    when none is left)."""

    def __init__(self, budget: int, evict: Callable[[], bool] = lambda: False,
                 stored: Callable[[], dict[int, int]] = _no_files) -> None:
        self.budget, self.evict, self.stored = budget, evict, stored
        self._lock = threading.Lock()
        self._live: dict[int, tuple[dict[int, int], int]] = {}  # a tracked dataset's number -> (blocks, working)
        self._freed: list[int] = []  # numbers of datasets freed since the last count
        self._reserved = 0
        self._count = 0

    def _held(self) -> int:
        while self._freed:
            self._live.pop(self._freed.pop(), None)
        blocks = dict(self.stored())
        live = list(self._live.values())
        for b, _ in live:
            blocks.update(b)  # one block viewed by a dataset and held by the upload store counts once
        return sum(blocks.values()) + sum(w for _, w in live) + self._reserved

    @property
    def held(self) -> int:
        with self._lock:
            return self._held()

    def track(self, ds: Dataset, working: int = 0, reserved: int = 0) -> None:
        """Count ``ds`` (and ``working`` bytes kept for it) until it is freed; ``reserved`` bytes of
        the reservations become its, in the same step."""
        blocks = dataset_blocks(ds)
        with self._lock:
            self._count += 1
            key = self._count
            self._live[key] = (blocks, working)
            self._reserved -= reserved
        weakref.finalize(ds, self._freed.append, key)  # no lock: a collection may run it inside a locked block

    def reserve(self, n: int) -> bool:
        """Reserve ``n`` bytes for a load in flight, if they fit in the budget."""
        return self.admit(n, evict=False)

    def unreserve(self, n: int) -> None:
        with self._lock:
            self._reserved -= n

    def admit(self, n: int, add: Callable[[], None] | None = None, evict: bool = True) -> bool:
        """If ``n`` more bytes fit in the budget: reserve them (until :meth:`unreserve`), or with
        ``add``, run it in the same step (it stores what ``stored`` counts from then on). When
        short, stored datasets nobody asked for recently are dropped first (``evict``). False when
        they do not fit."""
        while True:
            with self._lock:
                if self._held() + n <= self.budget:
                    if add is None:
                        self._reserved += n
                    else:
                        add()
                    return True
            if not (evict and self.evict()):
                return False


def _fix(budget: int) -> str:
    return ("remove the refused files from the uploader, then upload fewer or smaller files or remove uploads in "
            f"other tabs; to raise the budget, start the server with {ENV}=<MiB> (e.g. {ENV}={2 * budget // MiB} "
            "analysis-core dashboard).")


def _over(ledger: Ledger, name: str, what: str) -> OverBudget:
    return OverBudget(name, f"{what}: with the {_mib(ledger.held)} of data this server holds now (every session's "
                      f"uploads together) that is over the server's upload budget of {_mib(ledger.budget)}.",
                      _fix(ledger.budget))


class ServerAllowance(Allowance):
    """A load's share of the server's budget: the bytes each array allocates are reserved in the
    ledger as its header is read (dropping stored datasets nobody asked for recently when short),
    refused with the budget and how to raise it when they do not fit; :meth:`keep` the dataset it
    gave (counted until freed, with room for its evaluation), :meth:`release` when the load is over."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__(ledger.budget)
        self.ledger = ledger
        self.reserved = 0

    def _grant(self, name: str, what: str, nbytes: int, desc: str, new: int) -> None:
        if not self.ledger.admit(new):
            raise _over(self.ledger, name, f"array '{what}' declares {desc}")
        self.reserved += new

    def keep(self, ds: Dataset) -> None:
        """Count ``ds`` until it is freed, with the working bytes of its evaluation in float32
        (:func:`working_bytes`) kept for it; refused (:class:`OverBudget`) when they do not fit."""
        work = working_bytes(ds)
        if not self.ledger.admit(work):
            raise _over(self.ledger, ds.source, f"evaluating these data takes {_mib(work)} of working copies of "
                        "the vectors")
        self.ledger.track(ds, work, reserved=self.reserved + work)
        self.reserved = 0

    def release(self) -> None:
        self.ledger.unreserve(self.reserved)
        self.reserved = 0


@contextlib.contextmanager
def evaluating(ds: Dataset, precision: str, ledger: Ledger | None = None) -> Iterator[None]:
    """Reserve what an evaluation in ``precision`` copies beyond what :meth:`ServerAllowance.keep`
    kept for ``ds`` (float64: twice as much) while it runs; refused with the budget's message when
    it does not fit."""
    ledger = LEDGER if ledger is None else ledger
    extra = working_bytes(ds, precision) - working_bytes(ds)
    if extra > 0 and not ledger.admit(extra):
        raise _over(ledger, ds.source, f"evaluating in {precision} takes {_mib(extra)} more working copies")
    try:
        yield
    finally:
        if extra > 0:
            ledger.unreserve(extra)


LEDGER = Ledger(_default_budget())

# --------------------------------------------------------------------------- Streamlit's upload store

#: (session id, file id) -> why the server did not keep (or gave back) that listed upload's bytes
_REFUSED: dict[tuple[str, str], str] = {}


def store_blocks(mgr) -> dict[int, int]:
    """The upload store's files (Streamlit's ``MemoryUploadedFileManager``, every session): the id
    of each file's bytes -> its size. ``list`` copies each level in one step under the GIL: the
    upload handler may add a file meanwhile."""
    return {id(r.data): len(r.data) for files in list(mgr.file_storage.values()) for r in list(files.values())}


def guard_upload_store(mgr=None) -> None:
    """Make Streamlit's upload store (``mgr``; None: this script run's) count in :data:`LEDGER`
    and keep a received file only when it fits in the budget; a file that does not fit is stored
    empty under its id (so the uploader still lists it) and :func:`refusal` says why. Once per
    store. Streamlit reads a file's whole body before it stores it, so its receipt is not bounded
    here (``server.maxUploadSize`` bounds each file)."""
    from streamlit.runtime.memory_uploaded_file_manager import MemoryUploadedFileManager

    if mgr is None:
        where = _session()
        mgr = where[0] if where is not None else None
    if not isinstance(mgr, MemoryUploadedFileManager) or getattr(mgr, "_budget_guard", False):
        return
    add = mgr.add_file

    def add_file(session_id: str, file) -> None:
        ledger = LEDGER
        if file.data and not ledger.admit(len(file.data), lambda: add(session_id, file)):
            _REFUSED[(session_id, file.file_id)] = str(_over(
                ledger, file.name, f"this {_mib(len(file.data))} upload was not kept"))
            file = file._replace(data=b"")
        if not file.data:
            add(session_id, file)

    mgr.add_file = add_file
    mgr._budget_guard = True
    LEDGER.stored = lambda: store_blocks(mgr)


def share_upload_copies() -> None:
    """Make the copy Streamlit returns of a file uploader's value on every script run share the
    file's bytes instead of copying them. Streamlit deep-copies a widget's value each run (so
    user code cannot change the stored one); an ``UploadedFile`` is a ``BytesIO``, whose deep copy
    copies its bytes: 0.4 s and a fresh block of memory per run for an 882 MB upload, on every
    control of every page. The copy made here is a new ``UploadedFile`` (its own position, closed
    without touching the original) over the same immutable ``bytes``: ``BytesIO`` shares the bytes it
    is made from until written to, so writing to the copy still leaves the stored file unchanged.
    Once per server; idempotent."""
    from streamlit.runtime.uploaded_file_manager import UploadedFile, UploadedFileRec

    if getattr(UploadedFile, "_shares_bytes", False):
        return

    def __deepcopy__(self, memo):  # noqa: N807 - the copy protocol's name
        copy = UploadedFile(UploadedFileRec(self.file_id, self.name, self.type, self.getvalue()), self._file_urls)
        copy.seek(self.tell())
        memo[id(self)] = copy
        return copy

    UploadedFile.__deepcopy__ = __deepcopy__
    UploadedFile._shares_bytes = True


def _session():
    """(the upload store, this script run's session id), or None outside a script run."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return None if ctx is None else (ctx.uploaded_file_mgr, ctx.session_id)


class Upload(NamedTuple):
    """One listed upload: its uploader file id, name, MIME type and bytes (as the upload store
    holds them: one object shared by the store, the digest and the dataset's views)."""

    file_id: str
    name: str
    type: str
    data: bytes

    def getvalue(self) -> bytes:
        return self.data


def stored(files: Sequence) -> list[Upload]:
    """This session's listed uploads ``files`` (the uploader's value) with the bytes the upload
    store holds. Streamlit returns a widget's value as a deep copy on every script run, and a deep
    copy of an ``UploadedFile`` copies its bytes: a dataset read from it held the file twice
    (measured: 240 MB more for a 240 MB upload). The copies are closed here, their bytes given back."""
    where = _session()
    out = []
    for u in files:
        recs = where[0].get_files(where[1], [u.file_id]) if where is not None else []
        out.append(Upload(u.file_id, u.name, u.type, recs[0].data if recs else u.getvalue()))
        u.close()
    return out


def refusal(files: Sequence) -> str | None:
    """Why the server did not keep some of this session's listed uploads ``files`` (each message
    names its file), or None. Forgets the refusals of files no longer listed anywhere."""
    where = _session()
    if where is None:
        return None
    mgr, sid = where
    listed = {(s, f) for s, fs in list(getattr(mgr, "file_storage", {}).items()) for f in list(fs)}
    for key in [k for k in list(_REFUSED) if k not in listed]:
        _REFUSED.pop(key, None)
    whys = [_REFUSED[(sid, u.file_id)] for u in files if (sid, u.file_id) in _REFUSED]
    return "\n".join(dict.fromkeys(whys)) or None


def release(files: Sequence, why: str) -> None:
    """Give back the bytes of this session's listed uploads ``files``, refused with ``why``: each is
    stored empty under its id (still listed, so the user sees what was refused and removes it), and
    :func:`refusal` says ``why`` until it is removed."""
    where = _session()
    if where is None:
        return
    mgr, sid = where
    from streamlit.runtime.uploaded_file_manager import UploadedFileRec

    for u in files:
        mgr.add_file(sid, UploadedFileRec(u.file_id, u.name, u.type, b""))
        _REFUSED[(sid, u.file_id)] = why
    _close({u.file_id for u in files})


#: session id -> the file ids its uploader listed in its last script run
_LISTED: dict[str, set[str]] = {}


def let_go(files: Sequence) -> None:
    """Give back the bytes of the files this session's uploader listed in its previous script run
    and no longer lists (``files``: its value now), as soon as they are removed."""
    where = _session()
    if where is None:
        return
    sid = where[1]
    listed = {u.file_id for u in files}
    gone = _LISTED.pop(sid, set()) - listed
    if listed:
        _LISTED[sid] = listed
    if gone:
        _close(gone)


def _close(file_ids: set[str]) -> None:
    """Close every ``UploadedFile`` of ``file_ids``. Each shares its file's bytes, and Streamlit
    keeps a widget's previous values (deserialised anew, so not the objects the script saw) until
    the session's next rerun: a removed 240 MB file stayed resident (measured) until the user
    touched the page again. Found among the objects the garbage collector tracks (tens of ms)."""
    from streamlit.runtime.uploaded_file_manager import UploadedFile

    for o in gc.get_objects():
        if isinstance(o, UploadedFile) and o.file_id in file_ids:
            o.close()
