"""Coverage of the Grouped Recall@1 interval (over groups, G - 1 df: Student t, or Korn-Graubard
where the groups carry few misses; see analysis_core.stats.grouped_recall) measured by simulation
through the public API on embeddings, leave-one-out.

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

``--query-sample m``: the same with ``evaluate(..., query_sample=m)``: each group of S classes (8 S
queries) ranks a stratified sample of m of its queries, and the groups' estimates carry that
sampling (the truth is still the exact expected Recall@1 of S classes).

    python benchmarks/calibration_grouped.py                  # 400 replicates, truth 2 000 groups
    python benchmarks/calibration_grouped.py --replicates 100 --truth 500
    python benchmarks/calibration_grouped.py --query-sample 12
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


def grouped(X: np.ndarray, y: np.ndarray, S: int, seed: int, alpha: float, sample: int | None = None) -> dict:
    """The reported Grouped Recall@1 (summary.json's block) and, beside, the interval each rule
    alone would give from the same groups: Student t over groups (clipped) and Korn-Graubard."""
    from analysis_core.stats.sampling import korn_graubard

    ev = ac.evaluate(X, y, ks=(1,), group_size=S, seed=seed, alpha=alpha, query_sample=sample)
    m = ev.methods[0]
    out = dict(ev.summary()["methods"][m]["grouped_recall_at_k"]["k"]["1"])
    row = ev.grouped[m].table.iloc[0]
    G, p, se = int(row["n_groups"]), float(row["mean"]), float(row["se"])
    if G > 1:
        half = stats.t.ppf(1 - alpha / 2, G - 1) * se
        kg = korn_graubard(p, se**2, G - 1, int(row["n_observed"]), alpha)
        out["t"], out["kg"] = (max(0.0, p - half), min(1.0, p + half)), (kg["low"], kg["high"])
    return out


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
    ap.add_argument("--query-sample", type=int, default=None, help="queries ranked per group (default: all)")
    args = ap.parse_args()
    print(f"# python benchmarks/calibration_grouped.py --replicates {args.replicates} --truth {args.truth} "
          f"--alpha {args.alpha} --seed {args.seed}"
          + (f" --query-sample {args.query_sample}" if args.query_sample else ""))
    print("| difficulty | C | S | G | truth (s.e.) | mean estimate | coverage [95 % CP] | mean width "
          "| Student t alone: coverage (width) | Korn-Graubard alone |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    t0 = time.perf_counter()
    for d_i, (name, noise) in enumerate(NOISES.items()):
        for C, S in DESIGNS:
            rng = np.random.default_rng([args.seed, d_i, C, S])
            truth_vals = [grouped(*draw(rng, S, noise), S, 0, args.alpha)["mean"] for _ in range(args.truth)]
            truth = float(np.mean(truth_vals))
            se = float(np.std(truth_vals, ddof=1) / np.sqrt(len(truth_vals)))
            hit, est, width = 0, [], []
            alone: dict[str, list[tuple[bool, float]]] = {"t": [], "kg": []}
            for r in range(args.replicates):
                g = grouped(*draw(rng, C, noise), S, r, args.alpha, args.query_sample)
                hit += g["ci_low"] <= truth <= g["ci_high"]
                est.append(g["mean"])
                width.append(g["ci_high"] - g["ci_low"])
                for rule in alone:
                    low, high = g[rule]
                    alone[rule].append((low <= truth <= high, high - low))
            lo, hi = clopper_pearson(hit, args.replicates)
            beside = " | ".join(f"{np.mean([c for c, _ in v]):.3f} ({np.mean([w for _, w in v]):.4f})"
                                for v in alone.values())
            print(f"| {name} | {C} | {S} | {C // S} | {truth:.4f} ({se:.4f}) | {np.mean(est):.4f} | "
                  f"{hit / args.replicates:.3f} [{lo:.3f}, {hi:.3f}] | {np.mean(width):.4f} | {beside} |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
