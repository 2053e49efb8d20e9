"""Coverage of the Grouped Recall@1 interval (the t interval over groups, G - 1 df, clipped to
[0, 1]) measured by simulation through the public API on embeddings, leave-one-out.

What the interval claims: the expected Recall@1 of a retrieval problem made of S classes drawn
from the population the data's classes come from (each group is one such problem; groups are
disjoint sets of classes, so independent). Truth: the mean of that Recall@1 over ``--truth``
further groups, each S fresh classes evaluated alone (a group of every class: the pass itself).

Generator (as ``benchmarks/calibration.py``): dimension 16, class centres N(0, I), items = centre +
N(0, noise^2 I), ``m`` items per class; three difficulties (noise 0.6 easy, 1.1 typical, 2.0 near
chance) and designs (C classes, group size S: G = C // S groups): 30/10 (G = 3), 60/10 (G = 6),
100/5 (G = 20), with 8 items per class. Each replicate draws C new classes and runs
``analysis_core.evaluate(X, labels, group_size=S, seed=r)``; the interval is read from its
``summary()`` (``grouped_recall_at_k``). Coverage with its 95 % Clopper-Pearson interval.

    python benchmarks/calibration_grouped.py                  # 400 replicates, truth 2 000 groups
    python benchmarks/calibration_grouped.py --replicates 100 --truth 500
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import analysis_core as ac  # noqa: E402

DIM, ITEMS = 16, 8
NOISES = {"easy": 0.6, "typical": 1.1, "near chance": 2.0}
DESIGNS = [(30, 10), (60, 10), (100, 5)]


def draw(rng: np.random.Generator, n_classes: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    y = np.repeat(np.arange(n_classes), ITEMS)
    X = rng.standard_normal((n_classes, DIM))[y] + noise * rng.standard_normal((y.size, DIM))
    return X.astype(np.float32), y


def grouped(X: np.ndarray, y: np.ndarray, S: int, seed: int, alpha: float) -> dict:
    ev = ac.evaluate(X, y, ks=(1,), group_size=S, seed=seed, alpha=alpha)
    m = ev.methods[0]
    return ev.summary()["methods"][m]["grouped_recall_at_k"]["k"]["1"]


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = 1 - level
    lo = stats.beta.ppf(a / 2, k, n - k + 1) if k > 0 else 0.0
    hi = stats.beta.ppf(1 - a / 2, k + 1, n - k) if k < n else 1.0
    return float(lo), float(hi)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=400)
    ap.add_argument("--truth", type=int, default=2000, help="fresh groups averaged for the true value")
    ap.add_argument("--alpha", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"# python benchmarks/calibration_grouped.py --replicates {args.replicates} --truth {args.truth} "
          f"--alpha {args.alpha} --seed {args.seed}")
    print("| difficulty | C | S | G | truth (s.e.) | mean estimate | coverage [95 % CP] | mean width |")
    print("|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for d_i, (name, noise) in enumerate(NOISES.items()):
        for C, S in DESIGNS:
            rng = np.random.default_rng([args.seed, d_i, C, S])
            truth_vals = [grouped(*draw(rng, S, noise), S, 0, args.alpha)["mean"] for _ in range(args.truth)]
            truth = float(np.mean(truth_vals))
            se = float(np.std(truth_vals, ddof=1) / np.sqrt(len(truth_vals)))
            hit, est, width = 0, [], []
            for r in range(args.replicates):
                g = grouped(*draw(rng, C, noise), S, r, args.alpha)
                hit += g["ci_low"] <= truth <= g["ci_high"]
                est.append(g["mean"])
                width.append(g["ci_high"] - g["ci_low"])
            lo, hi = clopper_pearson(hit, args.replicates)
            print(f"| {name} | {C} | {S} | {C // S} | {truth:.4f} ({se:.4f}) | {np.mean(est):.4f} | "
                  f"{hit / args.replicates:.3f} [{lo:.3f}, {hi:.3f}] | {np.mean(width):.4f} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
