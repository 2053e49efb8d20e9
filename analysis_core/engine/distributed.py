"""The same pass on a Dask cluster, as a task graph merged exactly.

* The :class:`~analysis_core.engine.setup.Setup` (unique vectors in canonical order, the item
  layout) is scattered to every worker once (``broadcast=True``).
* The row tiles are partitioned into B blocks; the upper triangle of tiles into the block pairs
  (a <= b), so every tile is computed exactly once, as in-process. Tasks:
  ``block_thresholds`` (phase 1: each block's queries' positive scores) ->
  ``block_pair_counts`` (phase 2: the tiles between blocks a and b rank the negatives of both
  blocks' queries; integer counts, integer histograms, per-tile sums) -> ``block_metrics``
  (phase 3: a block's counts summed over its B pairs, then its per-query metrics).
* Every task is a pure function of the setup and its inputs, so a task Dask runs again after a
  worker died gives the same bits; integer counts add exactly; the client merges with
  :func:`~analysis_core.engine.results.assemble` (rows by position, tile sums by ``fsum`` in tile
  order), which refuses an incomplete set. Results equal the in-process pass bit for bit -- on
  workers that compute the same bits for a tile: the same NumPy/BLAS build on the same CPU kind.
  :meth:`DaskCompute.start` checks that with a canary tile on every worker and refuses a cluster
  whose workers disagree.
* What a worker does beyond a core in-process: the positive tiles (phase 1) are computed again in
  phase 2 (in-process they are kept), and the counts of each block travel once per block pair.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from threadpoolctl import threadpool_info

from ..errors import ComputeError
from ..extras import install_command, require
from .plan import partition
from .pool import Progress, single_threaded_blas
from .results import BlockResult, PassResult, assemble
from .setup import Setup
from .tasks import block_metrics, block_pair_counts, block_thresholds, pair_part, pair_summary
from .tiles import TILE, Tiles

if TYPE_CHECKING:  # the scale extra
    from distributed import Client, LocalCluster


def fingerprint() -> dict:
    """What decides the bits of a tile on this process: NumPy, the BLAS library, and canary
    tiles computed by the engine's own tile code in each precision (sgemm and dgemm)."""
    rng = np.random.default_rng(20261122)
    A = rng.standard_normal((2 * TILE - 3, 97)).astype(np.float32)
    h = hashlib.blake2b(digest_size=12)
    with single_threaded_blas():
        for dtype in (np.float32, np.float64):
            tiles = Tiles(A.astype(dtype), "dot")
            for ij in ((0, 0), (0, 1), (1, 1)):
                h.update(tiles(*ij).tobytes())
    blas = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                  for i in threadpool_info() if i.get("user_api") == "blas")
    return {"numpy": np.__version__, "blas": blas, "canary": h.hexdigest()}


def _explain(exc: BaseException) -> str:
    name = exc.__class__.__name__
    if name == "KilledWorker":
        return ("a block of queries was running on workers that died each time it was retried (Dask's "
                "allowed-failures): most often a worker ran out of memory. Give workers more memory, or use "
                f"fewer threads per worker. ({exc})")
    if name in ("CancelledError", "FutureCancelledError"):
        return f"a block of queries was cancelled on the cluster (its data was lost with its workers): {exc}"
    return f"a block of queries failed on a worker: {name}: {exc}"


def _connect(distributed, address: str, timeout: float):
    """A client of the scheduler at ``address``, or a ComputeError within about ``timeout`` s.
    The address is checked first; the connection runs in a thread with a deadline, because
    Dask's own timeout does not cover a peer that accepts the connection and never answers the
    handshake (an HTTP server, e.g. the Dask dashboard's port 8787)."""
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.comm.registry import backends

    form = "Give it as tcp://HOST:PORT, e.g. tcp://10.0.0.5:8786 (dask scheduler prints it when it starts)."
    try:
        scheme, loc = parse_address(address.strip())
        host, port = parse_host_port(loc) if scheme in ("tcp", "tls", "ws", "wss") else (loc, 1)
    except ValueError as exc:
        raise ComputeError(f"'{address}' is not a Dask scheduler address ({exc}). {form}") from None
    if scheme not in backends or not host or any(c.isspace() for c in host) or not 0 < int(port) < 65536:
        raise ComputeError(f"'{address}' is not a Dask scheduler address. {form}")
    box: dict = {}

    def run() -> None:
        try:
            box["client"] = distributed.Client(address.strip(), timeout=timeout, set_as_default=False)
        except Exception as exc:  # noqa: BLE001 - handed to the caller below
            box["error"] = exc
        if box.setdefault("late", False) and "client" in box:  # the caller gave up: do not leak it
            box["client"].close()

    t = threading.Thread(target=run, daemon=True, name="dask-connect")
    t.start()
    t.join(timeout + 2)
    if t.is_alive():
        box["late"] = True
        raise TimeoutError(f"something listens at {address} but gave no Dask answer within {timeout + 2:.0f} s "
                           "(is it a Dask scheduler's port, not e.g. the dashboard's 8787 or a web server?)")
    if "error" in box:
        raise box["error"]
    return box["client"]


@dataclass
class DaskCompute:
    """Where a pass runs: a local cluster of ``workers`` processes, or the scheduler at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``). Use as a context manager, or call
    :meth:`start` / :meth:`close`.

    ``tasks_per_worker``: block-pair tasks per worker (load balance vs. per-task overhead).
    ``no_worker_timeout``: seconds without any worker before the run fails (never a partial result).
    """

    workers: int | None = None
    scheduler: str | None = None
    tasks_per_worker: int = 4
    no_worker_timeout: float = 60.0
    connect_timeout: float = 10.0
    notes: list[str] = field(default_factory=list)
    _client: Client | None = None
    _cluster: LocalCluster | None = None

    def __post_init__(self) -> None:
        if (self.workers is None) == (self.scheduler is None):
            raise ValueError("give exactly one of workers (a local cluster) or scheduler (an address)")

    @property
    def label(self) -> str:
        return f"Dask scheduler {self.scheduler}" if self.scheduler else f"local Dask cluster, {self.workers} workers"

    def __enter__(self) -> DaskCompute:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def start(self) -> DaskCompute:
        if self._client is not None:
            return self
        (distributed,) = require("scale")  # missing: an InputError with the pip command (exit 2)
        try:
            if self.scheduler:
                self._client = _connect(distributed, self.scheduler, self.connect_timeout)
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=":0", silence_logs=40)  # a free port: never clashes with 8787
                self._client = distributed.Client(self._cluster, set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            self.close()
            where = f"the Dask scheduler at {self.scheduler}" if self.scheduler else "a local Dask cluster"
            raise ComputeError(f"cannot reach {where}: {exc}. Check the address and that the scheduler runs "
                               "(dask scheduler; dask worker ADDRESS).") from None
        self._check_workers()
        return self

    def close(self) -> None:
        for obj in (self._client, self._cluster):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # noqa: BLE001 - closing a cluster that is already gone
                    pass
        self._client = self._cluster = None

    def n_workers(self) -> int:
        assert self._client is not None, "start() first"
        return len(self._client.scheduler_info().get("workers", {}))

    def _wait_for_workers(self) -> int:
        t0 = time.monotonic()
        while (n := self.n_workers()) == 0:
            if time.monotonic() - t0 > self.no_worker_timeout:
                raise ComputeError(f"the {self.label} has no worker after {self.no_worker_timeout:.0f} s; start "
                                   f"workers with: dask worker {self.scheduler or 'ADDRESS'}")
            time.sleep(0.2)
        return n

    def _check_workers(self) -> None:
        self._wait_for_workers()
        assert self._client is not None
        try:
            prints = self._client.run(fingerprint)
        except Exception as exc:  # noqa: BLE001 - e.g. the workers' Python lacks this package
            raise ComputeError(f"the {self.label}'s workers cannot run this package's code ({exc.__class__.__name__}: "
                               f"{exc}). Install it where the workers run ({install_command('scale')}) and restart "
                               "them.") from None
        canaries = {p["canary"] for p in prints.values()}
        if len(canaries) > 1:
            detail = "; ".join(f"{w}: numpy {p['numpy']}, {', '.join(p['blas'])}" for w, p in sorted(prints.items()))
            raise ComputeError("the workers compute different bits for the same similarity tile, so results would "
                               f"depend on which worker ran which block. Use one NumPy/BLAS build and CPU kind on "
                               f"every worker. Workers: {detail}")
        if fingerprint()["canary"] not in canaries:
            self.notes.append(f"the {self.label}'s workers compute tiles with other last bits than this process "
                              "(another NumPy/BLAS build or CPU): results are reproducible on this cluster but "
                              "may differ in the last bits from an in-process run here.")

    def run_pass(self, setup: Setup, *, memory_mb: int = 1024, block_size: int = TILE,
                 progress: Progress | None = None) -> PassResult:
        """Run the pass as a task graph on the cluster and merge the results exactly."""
        self.start()
        client = self._client
        assert client is not None
        n_workers = self._wait_for_workers()
        # B blocks give B (B + 1) / 2 block pairs: about tasks_per_worker of them per worker
        n_blocks = max(1, math.ceil((math.sqrt(1 + 8 * self.tasks_per_worker * n_workers) - 1) / 2))
        ranges = partition(setup, n_blocks, memory_mb)
        hasq = [bool(setup.tile_has_query[a:b].any()) for a, b in ranges]
        run_id = uuid.uuid4().hex[:8]
        shared = client.scatter(setup, broadcast=True, hash=False)

        def submit(fn, *args, name: str):
            return client.submit(fn, *args, pure=False, key=f"{name}-{run_id}")

        th = {a: submit(block_thresholds, shared, *ranges[a], name=f"thresholds-{a}")
              for a in range(len(ranges)) if hasq[a]}
        parts: dict[int, list] = {a: [] for a in th}
        pair_futures, finals = [], []
        for a in range(len(ranges)):
            for b in range(a, len(ranges)):
                blocks = [x for x in dict.fromkeys((a, b)) if hasq[x]]
                if not blocks:
                    continue
                f = submit(block_pair_counts, shared, [th[x] for x in blocks], ranges[a], ranges[b],
                           name=f"pair-{a}-{b}")
                pair_futures.append(f)
                for k, x in enumerate(blocks):
                    parts[x].append(submit(pair_part, f, k, name=f"part-{a}-{b}-{x}"))
                finals.append(submit(pair_summary, f, name=f"summary-{a}-{b}"))
        finals += [submit(block_metrics, shared, th[a], *parts[a], name=f"metrics-{a}") for a in th]
        watched = pair_futures + finals
        results: dict[int, BlockResult | tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # block_metrics, pair_summary
        released: set[int] = set()
        no_worker_since = None
        stage = f"block pairs on the {self.label}"
        try:
            if progress is not None:
                progress(0, len(watched), stage)
            done_before = 0
            while len(results) < len(finals):
                for f in watched:
                    if id(f) in released:
                        continue
                    if f.status == "error":
                        raise ComputeError(f"{_explain(f.exception())} {len(results)} of {len(finals)} results "
                                           "finished. No partial result is returned.")
                    if f.status == "cancelled":  # the workers holding this run's data died
                        raise ComputeError(
                            f"the {self.label} lost the workers holding this run's data (a task was "
                            f"cancelled): {len(results)} of {len(finals)} results finished. No partial result is "
                            "returned; restart workers and run again.")
                for i, f in enumerate(finals):
                    if i not in results and f.status == "finished":
                        results[i] = f.result()
                        released.add(id(f))
                        f.release()
                done = sum(f.status == "finished" for f in pair_futures) + len(results)
                if progress is not None and done != done_before:
                    progress(done, len(watched), stage)
                    done_before = done
                if len(results) < len(finals):
                    time.sleep(0.05)
                    if self.n_workers() == 0:
                        no_worker_since = no_worker_since or time.monotonic()
                        if time.monotonic() - no_worker_since > self.no_worker_timeout:
                            raise ComputeError(
                                f"the {self.label} lost all its workers: {len(results)} of {len(finals)} results "
                                f"finished, none for {self.no_worker_timeout:.0f} s. No partial result is returned; "
                                "restart workers and run again.")
                    else:
                        no_worker_since = None
        finally:
            for f in watched + list(th.values()) + [p for ps in parts.values() for p in ps]:
                f.cancel()
            shared.release()
        block_results: list[BlockResult] = []
        for r in results.values():
            if isinstance(r, BlockResult):
                block_results.append(r)
            else:
                hist, keys, sums = r
                pq = setup.per_query_pairs
                block_results.append(BlockResult(
                    c0=0, c1=0, chunk_q=np.zeros(0, np.int64), values=np.zeros((0, len(setup.columns))),
                    curves=np.zeros((0, setup.n_recall)), hist=hist, tile_keys=keys, tile_sums=sums,
                    qhist=np.zeros((0, 2, setup.n_bins), np.int64) if pq else None,
                    qsum=np.zeros((0, 2), np.int64) if pq else None))
        return assemble(setup, block_results)
