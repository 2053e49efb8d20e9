"""Calibration of the run mixed model's family test, through its public API.

Each replicate simulates the model's own structure: two families (3 and 5 runs), every run
answering the same queries (``--classes`` classes x ``--per-class`` queries), value = family mean +
run (sd ``--sd-run``) + class (``--sd-class``) + class x family (``--sd-class-family``) + query
(``--sd-query``) + residual (``--sd-residual``), all normal. Under the null the families' means are
equal; :func:`run_mixed_model` is fitted and the family difference (``pairs()``) rejected when p <
alpha. Prints the rejection rate with a 95 % Clopper-Pearson interval, how many fits had a
variance component at 0 (a singular fit) or were undefined, and the power at ``--effect``.

    nice python benchmarks/calibration_run_mixed_model.py [--reps 400] [--power-reps 200] [--effect 0.1]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

from analysis_core.stats.run_mixed_model import run_mixed_model

RUNS = (3, 5)
SD = {"run": 0.03, "class": 0.1, "class-family": 0.03, "query": 0.15, "residual": 0.08}  # the defaults


def simulate(rng: np.random.Generator, effect: float, args: argparse.Namespace) -> pd.DataFrame:
    """One data set: family f1's mean exceeds f0's by ``effect``."""
    q_class = np.repeat(np.arange(args.classes), args.per_class)
    u_class, u_query = rng.normal(0, args.sd_class, args.classes), rng.normal(0, args.sd_query, q_class.size)
    frames = []
    for f, n_runs in enumerate(RUNS):
        u_cf = rng.normal(0, args.sd_class_family, args.classes)
        for r in range(n_runs):
            v = (0.5 + effect * f + rng.normal(0, args.sd_run) + u_class[q_class] + u_cf[q_class] + u_query
                 + rng.normal(0, args.sd_residual, q_class.size))
            frames.append(pd.DataFrame({"family": f"f{f}", "run": r, "class": q_class, "query": np.arange(q_class.size),
                                        "value": v}))
    return pd.concat(frames, ignore_index=True)


def rate(rng: np.random.Generator, effect: float, reps: int, args: argparse.Namespace) -> str:
    """The rejection rate of the family difference at ``effect`` over ``reps`` replicates."""
    start = time.perf_counter()
    p, singular = [], 0
    for _ in range(reps):
        res = run_mixed_model(simulate(rng, effect, args), args.alpha)
        p.append(float(res.pairs()["p_value"].iloc[0]))
        singular += any("estimated at 0" in w for w in res.warnings)
    pv = np.array(p)
    defined = int(np.isfinite(pv).sum())
    hits = int((pv[np.isfinite(pv)] < args.alpha).sum())
    ci = stats.binomtest(hits, max(defined, 1)).proportion_ci(0.95, method="exact")
    return (f"effect {effect}: rejected {hits}/{defined} defined fits of {reps} = {hits / max(defined, 1):.4f}, "
            f"95 % Clopper-Pearson [{ci.low:.4f}, {ci.high:.4f}]; {singular} with a variance component at 0  "
            f"({time.perf_counter() - start:.0f} s, {(time.perf_counter() - start) / reps:.2f} s a fit)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--power-reps", type=int, default=200)
    parser.add_argument("--effect", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--per-class", type=int, default=20)
    for name, sd in SD.items():
        parser.add_argument(f"--sd-{name}", type=float, default=sd, help=f"the {name} effects' standard deviation")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"run mixed model, two families with {RUNS[0]} and {RUNS[1]} runs, {args.classes} classes x "
          f"{args.per_class} queries answered by every run; sd run {args.sd_run}, class {args.sd_class}, class x "
          f"family {args.sd_class_family}, query {args.sd_query}, residual {args.sd_residual}; alpha {args.alpha}, "
          f"seed {args.seed}")
    print("null  ", rate(rng, 0.0, args.reps, args), flush=True)
    if args.power_reps:
        print("power ", rate(rng, args.effect, args.power_reps, args))


if __name__ == "__main__":
    main()
