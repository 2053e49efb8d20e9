"""Throughput of the pass in-process and on a local Dask cluster of 1 and 2 workers, of query
sampling, and the cost model ``time = N^2 d / throughput`` projected to 1 M items.

Usage: ``python benchmarks/bench_scale.py [N] [d]`` (default 30000 x 256, the engine benchmark's
size; random clustered data, 300 classes). Every timing is the best of 2 runs in this process
after a warm-up; cluster start-up is timed separately. Results are checked identical to the
in-process pass. Output is also written to ``benchmarks/scale_last_run.txt``.

Throughput is counted in "pair-dimensions per second": N^2 d / seconds (N^2 = ordered pairs, the
work of a plain all-pairs product). A cluster of k such workers is projected at k times the
measured 1-worker throughput (optimistic: it assumes the network keeps up and ignores the
one-time scatter of the gallery to each worker, which is measured here on loopback).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

from analysis_core.engine.core import run_pass
from analysis_core.engine.distributed import DaskCompute

OUT = Path(__file__).resolve().parent / "scale_last_run.txt"


def best(f, repeats: int = 2):
    times, res = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        res = f()
        times.append(time.perf_counter() - t)
    return min(times), res


def main() -> None:
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 30000
    d = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    rng = np.random.default_rng(0)
    y = rng.integers(0, 300, N)
    X = (rng.standard_normal((300, d))[y] + 1.5 * rng.standard_normal((N, d))).astype(np.float32)
    lines = [f"N = {N}, d = {d}, {os.cpu_count()} cores; best of 2 after a warm-up"]

    def say(s: str) -> None:
        print(s, flush=True)
        lines.append(s)

    run_pass(X[:2000], y[:2000])  # warm-up: numba's cached kernels
    work = N * N * d
    n = N // 10
    qmask = np.zeros(N, bool)
    qmask[rng.choice(N, n, replace=False)] = True
    gmask = np.ones(N, bool)
    swork = n * N * d
    t_in, ref = best(lambda: run_pass(X, y))
    t_sin, sref = best(lambda: run_pass(X, y, is_query=qmask, is_gallery=gmask))
    say(f"in-process ({os.cpu_count()} threads): all queries {t_in:6.2f} s ({work / t_in:.3g} pair-dims/s); "
        f"{n} sampled queries {t_sin:5.2f} s ({swork / t_sin:.3g} query-gallery pair-dims/s)")
    t_1, _ = best(lambda: run_pass(X, y, n_threads=1))
    say(f"in-process (1 thread):  all queries {t_1:6.2f} s ({work / t_1:.3g} pair-dims/s)")
    tp = {}
    for k in (1, 2):
        t = time.perf_counter()
        with DaskCompute(workers=k) as dc:
            t_start = time.perf_counter() - t
            run_pass(X[:2000], y[:2000], compute=dc)  # warm-up on the workers
            t_k, res = best(lambda dc=dc: run_pass(X, y, compute=dc))
            t_sk, sres = best(lambda dc=dc: run_pass(X, y, is_query=qmask, is_gallery=gmask, compute=dc))
        same = (res.values.tobytes() == ref.values.tobytes() and res.sum_pos == ref.sum_pos
                and sres.values.tobytes() == sref.values.tobytes())
        tp[k] = (work / t_k / k, swork / t_sk / k)
        say(f"Dask LocalCluster, {k} worker(s): all queries {t_k:6.2f} s ({work / t_k:.3g}; {t_in / t_k:.2f}x "
            f"in-process); sampled {t_sk:5.2f} s ({swork / t_sk:.3g}; {t_sin / t_sk:.2f}x); cluster start "
            f"{t_start:.1f} s; identical to in-process: {same}")
    say("")
    tp_w, tps_w = tp[2]
    say(f"cost model: time = N^2 d / (k x {tp_w:.3g}) for all queries, n N d / (k x {tps_w:.3g}) for n sampled "
        "queries (per-worker throughputs measured at 2 workers)")
    say(f"in-process on one machine: N^2 d / ({work / t_in:.3g}) with {os.cpu_count()} cores, "
        f"{work / t_1:.3g} per core")
    NN, dd, nn = 1_000_000, 512, 10_000
    say(f"  N = {NN:,}, d = {dd}, in-process here: all queries {NN * NN * dd / (work / t_in) / 3600:.2f} h; "
        f"{nn:,} sampled queries {nn * NN * dd / (swork / t_sin) / 60:.2f} min")
    for k in (1, 8, 32, 128):
        say(f"  N = {NN:,}, d = {dd}, k = {k:3d} workers: all queries {NN * NN * dd / (k * tp_w) / 3600:8.2f} h; "
            f"{nn:,} sampled queries {nn * NN * dd / (k * tps_w) / 60:7.2f} min")
    OUT.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
