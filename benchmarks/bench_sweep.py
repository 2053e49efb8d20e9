"""How long a class-count sweep takes on the bundled many-class demo set (600 classes, 3 609
items), and one slider move (metrics on C sampled classes + grouped recall).

Usage: ``python benchmarks/bench_sweep.py``. Prints seconds, measured in this process after one
warm-up (numba's cached kernels loaded)."""

from __future__ import annotations

import time
from pathlib import Path

from analysis_core import evaluate, load_files
from analysis_core.stats.class_sweep import class_count_sweep, default_class_counts

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ds = load_files([ROOT / "demo_data" / "many_classes.npz"])
    X, codes = ds.embeddings["epoch_10"], ds.label_codes
    evaluate(ds, max_classes=20, methods=["epoch_10"])  # warm-up
    counts = default_class_counts(ds.n_classes)
    for repeats in (1, 3):
        t = time.perf_counter()
        sweep = class_count_sweep(X, codes, counts=counts, repeats=repeats, group_size=10)
        dt = time.perf_counter() - t
        print(f"sweep over C = {counts}, {repeats} repeat(s): {len(sweep)} subsets in {dt:.2f} s")
    for c in (50, 300, 600):
        t = time.perf_counter()
        evaluate(ds, methods=["epoch_10"], max_classes=c, group_size=10, seed=1)
        print(f"one slider move, C = {c}: {time.perf_counter() - t:.3f} s")


if __name__ == "__main__":
    main()
