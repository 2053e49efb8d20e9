"""Calibration of the class mixed model's method test under the null, through the public API.

Each replicate: 8 classes x 8 items, leave-one-out; one shared base embedding set (class centres
N(0, 1) + item noise N(0, 1), dimension 16) and two methods that are the base plus independent
noise of the same scale (N(0, 1) each), so they are equally good; ``ac.evaluate`` ranks, its
``per_query()`` AP goes into :func:`class_mixed_model`, and the method term is rejected when
p < alpha. Prints the rejection rate with a 95 % Clopper-Pearson interval, and how many fits had
a variance component at 0 (a singular fit) or were undefined.

    nice python benchmarks/calibration_class_mixed_model.py [--reps 400] [--seed 0] [--alpha 0.05]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

import analysis_core as ac
from analysis_core.stats.class_mixed_model import class_mixed_model


def replicate(rng: np.random.Generator, n_classes: int, n_items: int, dim: int) -> tuple[float, bool]:
    """(p-value of method[b], whether a variance component sat at 0) on one null data set."""
    y = np.repeat(np.arange(n_classes), n_items)
    base = rng.normal(0, 1, (n_classes, dim))[y] + rng.normal(0, 1, (y.size, dim))
    methods = {m: base + rng.normal(0, 1, base.shape) for m in ("a", "b")}
    ap = ac.evaluate(methods, y).per_query()[["method", "query", "label", "ap"]]
    res = class_mixed_model(ap)
    p = float(res.table.set_index("term").loc["method[b]", "p_value"])
    return p, any("estimated at 0" in w for w in res.warnings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--classes", type=int, default=8)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument("--dim", type=int, default=16)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    out = [replicate(rng, args.classes, args.items, args.dim) for _ in range(args.reps)]
    p = np.array([o[0] for o in out])
    singular = sum(o[1] for o in out)
    defined = np.isfinite(p)
    hits = int((p[defined] < args.alpha).sum())
    ci = stats.binomtest(hits, int(defined.sum())).proportion_ci(0.95, method="exact")
    print(f"class mixed model, null (two equally good methods), {args.classes} classes x {args.items} items, "
          f"leave-one-out, dim {args.dim}, seed {args.seed}: {int(defined.sum())} defined fits of {args.reps} "
          f"({singular} with a variance component at 0)")
    print(f"rejection rate of method[b] at alpha = {args.alpha}: {hits}/{int(defined.sum())} = "
          f"{hits / max(int(defined.sum()), 1):.4f}, 95 % Clopper-Pearson [{ci.low:.4f}, {ci.high:.4f}]  "
          f"({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
