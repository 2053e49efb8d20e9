"""The same pass on a Dask cluster: blocks of queries as tasks, merged exactly.

* The :class:`~analysis_core.engine.core.Setup` (unique vectors in canonical order, the item
  layout) is scattered to every worker once (``broadcast=True``); each task is
  :func:`~analysis_core.engine.core.run_block` for one block of query row tiles.
* A block's result depends on nothing but the setup and its row range, so a task that Dask runs
  again after a worker died gives the same bits; blocks are merged by
  :func:`~analysis_core.engine.core.assemble` (rows by position, integer histograms, per-tile sums
  by ``fsum`` in tile order), which refuses an incomplete set. Results equal the in-process pass
  exactly — on workers that compute the same bits for a tile. That holds for the same NumPy/BLAS
  build on the same CPU kind; :meth:`DaskCompute.start` checks it with a canary tile on every
  worker and refuses a cluster whose workers disagree.
* Cost: a block needs every tile in its rows. The in-process pass computes each tile once for the
  queries of both its row and its column; blocks compute a tile twice when its row and column
  tiles are in different blocks. Counting (the larger share) is not repeated, only the products.
"""

from __future__ import annotations

import hashlib
import time
import uuid
from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from ..errors import ComputeError
from .core import TILE, PassResult, Progress, Setup, _Tiles, assemble, memory_chunks, run_block, split_blocks

INSTALL_HINT = "install the 'scale' extra: pip install -e '.[scale]' (dask[distributed])"


def fingerprint() -> dict:
    """What decides the bits of a tile on this process: NumPy, the BLAS library, and a canary
    tile computed by the engine's own tile code."""
    rng = np.random.default_rng(20261122)
    A = rng.standard_normal((2 * TILE - 3, 97)).astype(np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        tiles = _Tiles(A, "dot")
        G = np.concatenate([tiles(0, 0).ravel(), tiles(0, 1).ravel(), tiles(1, 1).ravel()])
    blas = sorted(f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')}"
                  for i in threadpool_info() if i.get("user_api") == "blas")
    return {"numpy": np.__version__, "blas": blas, "canary": hashlib.blake2b(G.tobytes(), digest_size=12).hexdigest()}


def _explain(exc: BaseException) -> str:
    name = exc.__class__.__name__
    if name == "KilledWorker":
        return ("a block of queries was running on workers that died each time it was retried (Dask's "
                "allowed-failures): most often a worker ran out of memory. Give workers more memory, or use "
                f"fewer threads per worker. ({exc})")
    if name in ("CancelledError", "FutureCancelledError"):
        return f"a block of queries was cancelled on the cluster (its data was lost with its workers): {exc}"
    return f"a block of queries failed on a worker: {name}: {exc}"


@dataclass
class DaskCompute:
    """Where a pass runs: a local cluster of ``workers`` processes, or the scheduler at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``). Use as a context manager, or call
    :meth:`start` / :meth:`close`.

    ``blocks_per_worker``: query blocks per worker (load balance vs. repeated tile products).
    ``no_worker_timeout``: seconds without any worker before the run fails (never a partial result).
    """

    workers: int | None = None
    scheduler: str | None = None
    blocks_per_worker: int = 3
    no_worker_timeout: float = 60.0
    connect_timeout: float = 10.0
    notes: list[str] = field(default_factory=list)
    _client: object = None
    _cluster: object = None

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
        try:
            import distributed
        except ImportError as exc:
            raise ComputeError(f"Dask is not installed ({exc}); {INSTALL_HINT}.") from None
        try:
            if self.scheduler:
                self._client = distributed.Client(self.scheduler, timeout=self.connect_timeout,
                                                  set_as_default=False)
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=":0", silence_logs=40)  # a free port: never clashes with 8787
                self._client = distributed.Client(self._cluster, set_as_default=False)
        except (OSError, TimeoutError) as exc:
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
        prints = self._client.run(fingerprint)
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
        """Run every query block of ``setup`` as a task and merge the results exactly."""
        self.start()
        client = self._client
        n_workers = self._wait_for_workers()
        blocks = split_blocks(memory_chunks(setup, memory_mb, 1), setup, self.blocks_per_worker * n_workers)
        run_id = uuid.uuid4().hex[:8]
        shared = client.scatter(setup, broadcast=True, hash=False)
        futures = [client.submit(run_block, shared, c0, c1, block_size=block_size, pure=False,
                                 key=f"query-block-{c0}-{c1}-{run_id}") for c0, c1 in blocks]
        results = []
        pending = set(futures)
        no_worker_since = None
        stage = f"query blocks on the {self.label}"
        try:
            if progress is not None:
                progress(0, len(futures), stage)
            while pending:
                done = [f for f in pending if f.done()]
                if not done:
                    time.sleep(0.05)
                pending.difference_update(done)
                for f in done:
                    if f.status == "error":
                        raise ComputeError(f"{_explain(f.exception())} {len(results)} of {len(futures)} query "
                                           "blocks finished. No partial result is returned.")
                    if f.status != "finished":  # cancelled: the workers holding this run's data died
                        raise ComputeError(
                            f"the {self.label} lost the workers holding this run's data (a block ended as "
                            f"'{f.status}'): {len(results)} of {len(futures)} query blocks finished. No partial "
                            "result is returned; restart workers and run again.")
                    results.append(f.result())
                    f.release()
                if done and progress is not None:
                    progress(len(results), len(futures), stage)
                if pending:
                    if self.n_workers() == 0:
                        no_worker_since = no_worker_since or time.monotonic()
                        if time.monotonic() - no_worker_since > self.no_worker_timeout:
                            raise ComputeError(
                                f"the {self.label} lost all its workers: {len(results)} of {len(futures)} query "
                                f"blocks finished, none for {self.no_worker_timeout:.0f} s. No partial result is "
                                "returned; restart workers and run again.")
                    else:
                        no_worker_since = None
        finally:
            for f in pending:
                f.cancel()
            shared.release()
        return assemble(setup, results)
