"""Coverage of the simultaneous PR band (studentized max-t bootstrap) by simulation through the
public API, at the unit each design calls for (SPEC §4, Unit of inference; Calibration).

Designs (Gaussian-cluster embeddings: class centres N(0, I_8), items centre + N(0, I_8)):

* ``leave-one-out``: C classes of k items (10 x 4, 20 x 4, 60 x 3), each item a query against all the others; classes
  and items are new in every replicate, so the class is the unit (``unit="class"``). The truth
  is the expected mean PR curve for data of that size (it depends on the number of classes in
  the gallery), estimated by averaging the mean curve of ``--truth`` independent replicate data
  sets of the same size. The query-unit band on the same data is shown beside it: it treats the
  dependent queries of a class as independent.
* ``query/gallery``: one gallery drawn once (fixed classes and items), n new queries per
  replicate (class uniform, item from its class): the queries are independent given the gallery,
  so the query is the unit. The truth is the expected curve of one query given that gallery,
  estimated by the mean curve of 200 000 queries.

A replicate's band covers when it contains the true curve at every recall grid point (an
undefined band does not cover). Coverage comes with its 95 % Clopper-Pearson interval.

Usage: ``nice python benchmarks/calibration_bands.py [--replicates 400] [--truth 2000]``
(about two minutes on one core at the defaults). Prints the table."""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy import stats

import analysis_core as ac
from analysis_core.stats.bands import pr_bands

DIM = 8
NOISE = 1.0  # mean AP about 0.5 at 20 classes of 4


def loo_data(rng: np.random.Generator, n_classes: int, per_class: int) -> ac.Dataset:
    y = np.repeat(np.arange(n_classes), per_class)
    X = rng.standard_normal((n_classes, DIM))[y] + NOISE * rng.standard_normal((y.size, DIM))
    return ac.Dataset(labels=y, embeddings={"m": X.astype(np.float32)})


def mean_curve(ev: ac.Evaluation) -> np.ndarray:
    return ev.pr_curves("m")[2].mean(axis=0)


def loo_truth(n_classes: int, per_class: int, reps: int, seed: int) -> np.ndarray:
    """The expected mean curve of leave-one-out data of this size: the average of ``reps``
    replicates' mean curves (independent of the replicates whose bands are checked)."""
    rng = np.random.default_rng([seed, n_classes, per_class, 1])
    return np.mean([mean_curve(ac.evaluate(loo_data(rng, n_classes, per_class))) for _ in range(reps)], axis=0)


class Gallery:
    """A fixed gallery (classes and items drawn once) and new queries from its classes."""

    def __init__(self, n_classes: int, per_class: int, seed: int):
        rng = np.random.default_rng([seed, n_classes, per_class, 2])
        self.centres = rng.standard_normal((n_classes, DIM))
        self.y = np.repeat(np.arange(n_classes), per_class)
        self.X = self.centres[self.y] + NOISE * rng.standard_normal((self.y.size, DIM))

    def with_queries(self, rng: np.random.Generator, n: int) -> ac.Dataset:
        yq = rng.integers(0, self.centres.shape[0], n)
        Xq = self.centres[yq] + NOISE * rng.standard_normal((n, DIM))
        role = np.r_[np.full(self.y.size, "gallery"), np.full(n, "query")]
        return ac.Dataset(labels=np.r_[self.y, yq], embeddings={"m": np.vstack([self.X, Xq]).astype(np.float32)},
                          role=role)

    def truth(self, n: int = 200_000, seed: int = 0) -> np.ndarray:
        """The expected curve of one new query given the gallery: the mean over ``n`` queries."""
        return mean_curve(ac.evaluate(self.with_queries(np.random.default_rng([seed, 3]), n)))


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = 1 - level
    low = 0.0 if k == 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    high = 1.0 if k == n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return low, high


def covers(ev: ac.Evaluation, truth: np.ndarray, unit: str, alpha: float, seed: int, n_boot: int | None) -> bool:
    b = pr_bands(ev, alpha=alpha, kind="bootstrap", by_class=False, unit=unit, seed=seed, n_boot=n_boot)
    b = b.sort_values("recall")
    # an undefined band (NaN) does not cover: the comparisons are False
    return bool(np.all((b["low"].to_numpy() <= truth) & (truth <= b["high"].to_numpy())))


def loo_coverage(n_classes: int, per_class: int, unit: str, truth: np.ndarray, reps: int, alpha: float, seed: int,
                 n_boot: int | None = None) -> int:
    rng = np.random.default_rng([seed, n_classes, per_class, 4])
    return sum(covers(ac.evaluate(loo_data(rng, n_classes, per_class)), truth, unit, alpha, r, n_boot)
               for r in range(reps))


def query_coverage(gallery: Gallery, n_queries: int, truth: np.ndarray, reps: int, alpha: float, seed: int,
                   n_boot: int | None = None) -> int:
    rng = np.random.default_rng([seed, n_queries, 5])
    return sum(covers(ac.evaluate(gallery.with_queries(rng, n_queries)), truth, "query", alpha, r, n_boot)
               for r in range(reps))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicates", type=int, default=400)
    p.add_argument("--truth", type=int, default=2000, help="replicate data sets averaged for the true curve")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    reps, alpha = args.replicates, args.alpha
    rows = []
    t0 = time.perf_counter()
    for n_classes, per_class in ((10, 4), (20, 4), (60, 3)):
        truth = loo_truth(n_classes, per_class, args.truth, args.seed)
        for unit in ("class", "query"):
            k = loo_coverage(n_classes, per_class, unit, truth, reps, alpha, args.seed)
            units = n_classes if unit == "class" else n_classes * per_class
            rows.append((f"leave-one-out {n_classes} x {per_class}", unit, units, k))
    gallery = Gallery(20, 4, args.seed)
    truth = gallery.truth(seed=args.seed)
    for n_queries in (20, 60):
        rows.append(("query/gallery (20 x 4 fixed)", "query", n_queries,
                     query_coverage(gallery, n_queries, truth, reps, alpha, args.seed)))
    print(f"Simultaneous coverage of the studentized bootstrap PR band, nominal {1 - alpha:g}, "
          f"{reps} replicates, truth from {args.truth} replicates ({time.perf_counter() - t0:.0f} s)")
    print(f"{'design':<32} {'unit':<6} {'units':>5} {'covered':>8} {'coverage':>9}  95 % Clopper-Pearson")
    for design, unit, units, k in rows:
        lo, hi = clopper_pearson(k, reps)
        print(f"{design:<32} {unit:<6} {units:>5} {k:>8} {k / reps:>9.3f}  [{lo:.3f}, {hi:.3f}]")


if __name__ == "__main__":
    main()
