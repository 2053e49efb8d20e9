"""Where a query/gallery tile's time goes: the product, the binning, the ranking, per tile.

Leave-one-out computes each unordered pair once where the bare product computes it twice, which
pays for ranking and binning (``bench_engine.py``: 0.74-1.0x the product). A query/gallery split
has no such half to save: every (query, gallery) pair is one product entry, then binned into the
pair histograms and ranked against its query's positive scores. This prints, for one core and
the tiles phase 2 streams on the query/gallery data of ``bench_engine.py`` (spread 1 / 2 / 3),
the milliseconds a tile spends in each step, and the ratio (product + binning + ranking) /
product: the floor of ``evaluate`` against the bare product on such data before any fixed cost.
Then the fixed costs themselves: ``evaluate --out`` and the bare product, each a whole process
(``bench_engine.py``'s contenders), on 3 000 items where the product is negligible.

Usage: ``python benchmarks/bench_tile.py [--spreads 1,2,3] [--size 30000x256x3000] [--tiles 300]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from analysis_core.engine import compiled
from analysis_core.engine.binning import bin_tile
from analysis_core.engine.phases import phase1, phase2
from analysis_core.engine.plan import block_tiles
from analysis_core.engine.pool import Workers, single_threaded_blas
from analysis_core.engine.setup import prepare
from analysis_core.engine.tiles import TILE, tiles_for

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import MATMUL, best_of, gaussian_clusters, make_data  # noqa: E402 - the benchmark's data


def per_tile_ms(spread: float, n: int, dim: int, n_classes: int, n_tiles: int,
                repeat: int = 5) -> dict[str, float]:
    """ms a tile on one core: the product and the binning (timed apart, tile by tile), and phase 2
    itself (product, binning and ranking, as the pass runs it): ranking is what phase 2 adds."""
    d = gaussian_clusters(n, dim, n_classes, spread, split=True)
    s = prepare(d["embeddings"], d["labels"], is_query=d["role"] == "query", is_gallery=d["role"] == "gallery")
    pos, pairs = block_tiles(s, 0, s.n_tiles)
    tiles = tiles_for(s)
    todo = pairs[:n_tiles]
    hist = np.zeros((2, 4, s.n_bins), np.int64)
    lo, inv_width = s.score_lo, s.n_bins / (s.score_hi - s.score_lo)
    buf, kb, sums = np.empty(TILE * TILE, s.dtype), np.empty(TILE, np.int32), np.zeros(2)

    def product_and_binning() -> tuple[float, float]:
        """Seconds of the products and of the binning, timed apart within one sweep."""
        t_prod = t_bin = 0.0
        for i, j in todo:
            t0 = time.perf_counter()
            S = tiles(i, j, out=buf)
            t1 = time.perf_counter()
            bin_tile(S, i * TILE, j * TILE, i == j, s.vector_label, hist, lo, inv_width, sums, kb)
            t_prod, t_bin = t_prod + t1 - t0, t_bin + time.perf_counter() - t1
        return t_prod, t_bin

    def whole() -> float:
        t0 = time.perf_counter()
        phase2(s, tiles, [th], todo, lambda i, j: True, Workers(1, len(todo), None))
        return time.perf_counter() - t0

    with single_threaded_blas():
        th = phase1(s, tiles, 0, s.n_tiles, pos, Workers(1, len(pos), None))
        # both in turn, the best of ``repeat`` rounds after a warm-up round (the machine is shared)
        rounds = [(*product_and_binning(), whole()) for _ in range(repeat + 1)][1:]
        t_product, t_binning, t_phase2 = (min(r[k] for r in rounds) / len(todo) * 1e3 for k in range(3))
    return {"product": t_product, "binning": t_binning, "ranking": t_phase2 - t_product - t_binning,
            "mean R": float(s.n_positives.mean())}


def fixed_costs(repeat: int = 3) -> tuple[float, float]:
    """Whole-process seconds (best of ``repeat``) of ``evaluate --out`` and of the bare product on
    3 000 items (spread 2, query/gallery): the costs that do not grow with N."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "small.npz"
        make_data(data, 3000, 256, 300, 2.0, True)
        ev = best_of([sys.executable, "-m", "analysis_core", "evaluate", str(data), "--quiet", "--out",
                      str(Path(tmp) / "out")], env, repeat)
        product = best_of([sys.executable, "-c", MATMUL, str(data)], env, repeat)
    if ev is None or product is None:
        raise SystemExit("fixed costs: a contender failed (printed above)")
    return ev[0], product[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spreads", default="1,2,3")
    ap.add_argument("--size", default="30000x256x3000", help="N x d x classes (bench_engine's difficulty table)")
    ap.add_argument("--tiles", type=int, default=300, help="tiles timed per step")
    args = ap.parse_args()
    n, dim, c = (int(v) for v in args.size.split("x"))
    compiled.start().join()
    print(f"{args.size}, query/gallery, one core, {args.tiles} tiles of {TILE} x {TILE}, best of 5; load average "
          f"{os.getloadavg()[0]:.2f}")
    print("| spread | mean R | product ms | binning ms | ranking ms | (product + binning + ranking) / product |")
    print("|---:|---:|---:|---:|---:|---:|")
    for spread in (float(v) for v in args.spreads.split(",")):
        r = per_tile_ms(spread, n, dim, c, args.tiles)
        ratio = (r["product"] + r["binning"] + r["ranking"]) / r["product"]
        print(f"| {spread:g} | {r['mean R']:.1f} | {r['product']:.3f} | {r['binning']:.3f} | {r['ranking']:.3f} "
              f"| {ratio:.2f} |", flush=True)
    ev, product = fixed_costs()
    print(f"\nfixed costs, 3000 x 256 query/gallery, whole process (best of 3): evaluate --out {ev:.2f} s, "
          f"bare product {product:.2f} s: {ev - product:.2f} s more")


if __name__ == "__main__":
    main()
