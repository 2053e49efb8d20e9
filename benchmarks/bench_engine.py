"""Whole-process benchmark of `evaluate` against the physical limit and peers, across difficulty.

Every contender runs as its own process on the same saved data, so wall time includes interpreter
start, imports, loading and normalisation, and peak memory is that process's max RSS:

* ``blocked product``: load + normalise + the bare blocked float32 product, 512-row blocks (the
  engine's tile size) of queries against the whole gallery (numpy, all cores), results discarded:
  the floor of any exact evaluation;
* ``evaluate``: ``python -m analysis_core evaluate`` (all metrics, tie-aware with bounds, PR
  curves, pair histograms, CSV + Parquet files);
* ``float64``: the same with ``--precision float64`` (similarities in double precision: the cost
  of keeping near-equal scores of float64 embeddings apart; the float32 data upcast, which costs the
  same as float64 data), unless ``--no-float64``;
* ``faiss kNN``: exact IndexFlatIP search with k = largest class (top-k only, no metrics);
* ``PML``: pytorch-metric-learning's AccuracyCalculator (MAP@R, R-precision, P@1), if installed.

Data: Gaussian class clusters (class centres N(0, I), items centre + spread * N(0, I)); spread
1 / 2 / 3 goes from easy (mAP ~1) to near chance (an early checkpoint), the cost of ranking grows
with it. Two protocols: leave-one-out, and a query/gallery split (a third of the items are
queries, the rest the gallery). Ratios are against the blocked product of the same data and
protocol in the same run (the machine is shared and noisy: only compare within one run).

Usage: ``python benchmarks/bench_engine.py [--spreads 1,2,3] [--repeat 2] [--no-large] [--no-float64]``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

# queries / gallery from the optional role array (no role: every item is both)
LOAD = r"""
import sys, numpy as np
d = np.load(sys.argv[1]); X = d["embeddings"]; y = d["labels"]
role = d["role"] if "role" in d.files else None
qm = np.ones(len(y), bool) if role is None else role == "query"
gm = np.ones(len(y), bool) if role is None else role == "gallery"
"""

MATMUL = LOAD + r"""
X = X.astype(np.float64); X = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32)
Q, G = X[qm], np.ascontiguousarray(X[gm])
for i in range(0, Q.shape[0], 512):
    S = Q[i:i + 512] @ G.T
"""

FAISS = LOAD + r"""
import faiss
X = np.ascontiguousarray(X, dtype=np.float32); faiss.normalize_L2(X)
k = int(np.bincount(y[gm]).max())
index = faiss.IndexFlatIP(X.shape[1]); index.add(np.ascontiguousarray(X[gm]))
D, I = index.search(np.ascontiguousarray(X[qm]), k + int(role is None))
"""

PML = LOAD + r"""
import torch
from pytorch_metric_learning.utils.accuracy_calculator import AccuracyCalculator
X = torch.from_numpy(X.astype(np.float32)); y = torch.from_numpy(y)
calc = AccuracyCalculator(include=("mean_average_precision_at_r", "r_precision", "precision_at_1"),
                          k="max_bin_count", device=torch.device("cpu"))
qm, gm = torch.from_numpy(qm), torch.from_numpy(gm)
print(calc.get_accuracy(X[qm], y[qm], X[gm], y[gm], ref_includes_query=role is None))
"""


def gaussian_clusters(n: int, dim: int, n_classes: int, spread: float, split: bool, seed: int = 0) -> dict:
    """The benchmark data as arrays: ``embeddings`` (float32), ``labels`` and, with ``split``, a
    ``role`` array (a third of the items queries, the rest the gallery)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    centers = rng.standard_normal((n_classes, dim)).astype(np.float32)
    X = centers[labels] + np.float32(spread) * rng.standard_normal((n, dim)).astype(np.float32)
    extra = {"role": np.where(rng.random(n) < 1 / 3, "query", "gallery")} if split else {}
    return {"embeddings": X.astype(np.float32), "labels": labels, **extra}


def make_data(path: Path, n: int, dim: int, n_classes: int, spread: float, split: bool, seed: int = 0) -> None:
    np.savez(path, **gaussian_clusters(n, dim, n_classes, spread, split, seed))


def measure(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall time and peak RSS (MB) via os.wait4 on the child."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{proc.stderr.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024.0


def best_of(cmd: list[str], env: dict, repeat: int) -> tuple[float, float] | None:
    best = None
    for _ in range(repeat):
        try:
            w, m = measure(cmd, env)
        except RuntimeError as exc:
            print(f"  failed: {str(exc).splitlines()[-1]}", flush=True)
            return None
        best = (w, m) if best is None or w < best[0] else best
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="30000x256x3000", help="N x d x classes of the difficulty table")
    ap.add_argument("--spreads", default="1,2,3")
    ap.add_argument("--large", default="60000x512x3000", help="N x d x classes of the large case (spread 1.5)")
    ap.add_argument("--no-large", action="store_true")
    ap.add_argument("--repeat", type=int, default=2, help="runs per contender; the fastest is reported")
    ap.add_argument("--no-float64", action="store_true", help="skip evaluate --precision float64")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    have_faiss = importlib.util.find_spec("faiss") is not None
    have_pml = importlib.util.find_spec("pytorch_metric_learning") is not None and importlib.util.find_spec("torch")
    py = sys.executable
    cases = [(args.size, float(s)) for s in args.spreads.split(",")]
    if not args.no_large:
        cases.append((args.large, 1.5))
    rows = []
    print(f"{os.cpu_count()} cores; best of {args.repeat}; ratios against the blocked product of the same row",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        warm = tmp / "warm.npz"  # numba's on-disk cache: compilation is a one-time cost per install
        make_data(warm, 2000, 8, 50, 1.0, False)
        for precision in ("float32", "float64"):
            subprocess.run([py, "-m", "analysis_core", "evaluate", str(warm), "--quiet", "--precision", precision],
                           env=env, check=True, stdout=subprocess.DEVNULL)
        for size, spread in cases:
            n, dim, c = (int(v) for v in size.split("x"))
            for split in (False, True):
                data = tmp / f"data_{n}_{dim}_{spread}_{int(split)}.npz"
                make_data(data, n, dim, c, spread, split)
                out = tmp / "out"
                r = {"case": f"{n} x {dim}, {c} cl.", "spread": spread,
                     "protocol": "query/gallery" if split else "leave-one-out"}
                r["product"] = best_of([py, "-c", MATMUL, str(data)], env, args.repeat)
                r["evaluate"] = best_of([py, "-m", "analysis_core", "evaluate", str(data), "--quiet", "--out",
                                         str(out)], env, args.repeat)
                summary = json.loads((out / "summary.json").read_text())
                r["map"] = next(iter(summary["methods"].values()))["map"]["expected"]
                r["float64"] = None if args.no_float64 else best_of(
                    [py, "-m", "analysis_core", "evaluate", str(data), "--quiet", "--precision", "float64", "--out",
                     str(out)], env, args.repeat)
                r["faiss"] = best_of([py, "-c", FAISS, str(data)], env, args.repeat) if have_faiss else None
                r["pml"] = best_of([py, "-c", PML, str(data)], env, args.repeat) if have_pml else None
                rows.append(r)
                print(_row(r), flush=True)
    print()
    print("| data | spread | protocol | mAP | blocked product s | evaluate s | × product | float64 s | × float32 "
          "| faiss kNN s | × product | PML s | evaluate / PML | peak MB evaluate / PML |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(_row(r))


def _row(r: dict) -> str:
    base = r["product"][0] if r["product"] else float("nan")

    def t(x):
        return f"{x[0]:.2f}" if x else "–"

    def ratio(x):
        return f"{x[0] / base:.2f}" if x else "–"

    ev, pml, f64 = r["evaluate"], r["pml"], r["float64"]
    vs_f32 = f"{f64[0] / ev[0]:.2f}" if ev and f64 else "–"
    vs_pml = f"{ev[0] / pml[0]:.2f}" if ev and pml else "–"
    mem = f"{ev[1]:.0f} / {pml[1]:.0f}" if ev and pml else (f"{ev[1]:.0f} / –" if ev else "–")
    return (f"| {r['case']} | {r['spread']:.1f} | {r['protocol']} | {r['map']:.2f} | {t(r['product'])} | "
            f"**{t(ev)}** | **{ratio(ev)}** | {t(f64)} | {vs_f32} | {t(r['faiss'])} | {ratio(r['faiss'])} | {t(pml)} | "
            f"{vs_pml} | {mem} |")


if __name__ == "__main__":
    main()
