"""Calibration of the split-plot two-way ANOVA (``two_way_anova``) on embeddings, through the
public API: rejection rates under a null and detection of a real method x class interaction.

Design (each replicate): 8 classes x 8 items in 16-d, leave-one-out, cosine. Class centres are
the first 8 unit vectors (equidistant, so no class is harder than another in distribution); the
base embedding is centre + N(0, ITEM_SD^2) item noise. Two methods:

* null: a = base + N(0, METHOD_SD^2), b = base + N(0, METHOD_SD^2) (independent noise, equal
  scale: equally good on every class);
* interaction: as the null, but b adds N(0, EXTRA_SD^2) to the items of classes 0-3 only (b is
  worse on half of the classes).

For every replicate: the p-values of the three terms of ``two_way_anova`` (class against query
within class, method and method:class against method x query), the within-query reference (scipy's
one-way ANOVA of the per-query differences a - b over classes: the interaction for two methods),
and the method tested at the class unit (the table's ``method (class unit)`` row: the method x class
means, classes as the units). A third scenario is the null at the query unit: a gallery fixed and
shared by a and b (role gallery), 8 new queries per class embedded by a and b with independent
noise of equal scale, so that given the gallery every class's expected difference is zero. Rates
at alpha with 95 % Clopper-Pearson intervals, and the within-class correlation of the differences
(one-way random-effects estimate), which is what leave-one-out creates: the queries of a class
share its gallery.

    nice python benchmarks/calibration_two_way.py [--reps 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd
from scipy import stats

import analysis_core as ac
from analysis_core.stats.two_way_anova import two_way_anova

N_CLASSES, PER_CLASS, DIM = 8, 8, 16
ITEM_SD, METHOD_SD, EXTRA_SD = 0.25, 0.10, 0.12
ALPHA = 0.05


def replicate(rng: np.random.Generator, extra_sd: float, fixed_gallery: bool = False) -> dict[str, float]:
    y = np.repeat(np.arange(N_CLASSES), PER_CLASS)
    base = np.eye(N_CLASSES, DIM)[y] + ITEM_SD * rng.standard_normal((y.size, DIM))
    xa = base + METHOD_SD * rng.standard_normal(base.shape)
    xb = base + METHOD_SD * rng.standard_normal(base.shape)
    xb[y < N_CLASSES // 2] += extra_sd * rng.standard_normal(((y < N_CLASSES // 2).sum(), DIM))
    role = None
    if fixed_gallery:  # PER_CLASS more items per class as queries; the gallery is the same for a and b
        yq = np.repeat(np.arange(N_CLASSES), PER_CLASS)
        bq = np.eye(N_CLASSES, DIM)[yq] + ITEM_SD * rng.standard_normal((yq.size, DIM))
        xa = np.r_[base, bq + METHOD_SD * rng.standard_normal(bq.shape)]
        xb = np.r_[base, bq + METHOD_SD * rng.standard_normal(bq.shape)]
        y = np.r_[y, yq]
        role = np.repeat(["gallery", "query"], yq.size)
    ev = ac.evaluate({"a": xa.astype(np.float32), "b": xb.astype(np.float32)}, y, role=role)
    ap = ev.per_query()[["method", "query", "label", "ap"]]
    t = two_way_anova(ap).set_index("term")
    wide = ap.pivot(index="query", columns="method", values="ap").join(ap.groupby("query")["label"].first())
    d = wide["a"] - wide["b"]
    groups = [g.to_numpy() for _, g in d.groupby(wide["label"])]
    ref = stats.f_oneway(*groups).pvalue
    k = PER_CLASS
    ms_b = k * np.var([g.mean() for g in groups], ddof=1)
    ms_w = np.mean([g.var(ddof=1) for g in groups])
    icc = (ms_b - ms_w) / (ms_b + (k - 1) * ms_w)
    effect = float(d[wide["label"] < N_CLASSES // 2].mean() - d[wide["label"] >= N_CLASSES // 2].mean())
    return {"class": t.loc["class", "p_value"], "method": t.loc["method", "p_value"],
            "method:class": t.loc["method:class", "p_value"], "reference (one-way of a - b)": ref,
            "method (class unit)": t.loc["method (class unit)", "p_value"], "icc": icc, "effect": effect,
            "map_a": float(wide["a"].mean()), "map_b": float(wide["b"].mean())}


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return ci.low, ci.high


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    print(f"{N_CLASSES} classes x {PER_CLASS} items, {DIM}-d, leave-one-out; item sd {ITEM_SD}, method noise sd "
          f"{METHOD_SD}; interaction: b adds sd {EXTRA_SD} to classes 0-{N_CLASSES // 2 - 1}; alpha {ALPHA}; "
          f"{args.reps} replicates, seed {args.seed}")
    scenarios = (("null (leave-one-out)", 0.0, False), ("interaction (leave-one-out)", EXTRA_SD, False),
                 ("null at the query unit (a fixed gallery shared by a and b; new queries)", 0.0, True))
    for s, (scenario, extra, fixed) in enumerate(scenarios):
        rows = pd.DataFrame([replicate(np.random.default_rng([args.seed, i, s]), extra, fixed)
                             for i in range(args.reps)])
        print(f"\n{scenario}: mAP a {rows['map_a'].mean():.3f}, b {rows['map_b'].mean():.3f}; mean AP difference "
              f"a - b on classes 0-3 minus 4-7 {rows['effect'].mean():+.4f} (sd over replicates "
              f"{rows['effect'].std():.4f}); within-class correlation of a - b {rows['icc'].mean():+.3f}")
        for col in ("class", "method", "method:class", "reference (one-way of a - b)", "method (class unit)"):
            p = rows[col].to_numpy(np.float64)
            k, n = int((p < ALPHA).sum()), int(np.isfinite(p).sum())
            lo, hi = clopper_pearson(k, n)
            print(f"  {col:30s} rejects {k:3d}/{n}  {k / n:.3f}  [{lo:.3f}, {hi:.3f}]")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
