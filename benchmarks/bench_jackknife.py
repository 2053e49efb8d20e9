"""What the class unit costs: the class jackknife's replicates counted in the evaluation's own
passes (``analysis_core.engine.replicates``) against the pass alone and against the G passes per
method that they replaced, on easy, typical and near-chance embeddings, leave-one-out and
query/gallery. Ratios against the pass alone (``evaluate(..., jackknife_groups=None)``), measured
in the same run (wall clock and this process's CPU time, which a shared machine's load inflates
less).

    python benchmarks/bench_jackknife.py                          # 20 000 x 128, 200 classes, 2 methods
    python benchmarks/bench_jackknife.py --n 100000 --d 256 --classes 1000 --difficulty typical
    python benchmarks/bench_jackknife.py --g-pass                 # also the G passes per method (slow)

Columns: ``pass`` = evaluate without the replicates (what evaluate cost before), ``evaluate`` =
the default evaluate (its passes count the replicates), ``jackknife`` = ``class_jackknife()``
after it, ``class unit`` = both (what the default class unit costs), ``G passes`` = the replicates
by a pass per method and group (the previous way; ``--g-pass``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import analysis_core as ac  # noqa: E402
from analysis_core.engine.core import run_pass  # noqa: E402

#: item noise relative to the spread of the class centres: mAP about 0.9, 0.35 and near chance
#: (40 classes of 100 items, d = 128; the table prints each run's)
DIFFICULTY = {"easy": 1.4, "typical": 2.2, "near-chance": 8.0}


def data(n: int, d: int, n_classes: int, noise: float, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), -(-n // n_classes))[:n]
    centres = rng.standard_normal((n_classes, d)) / np.sqrt(d) * 4
    X = {m: (centres[y] + noise * s * rng.standard_normal((n, d)) / np.sqrt(d) * 4).astype(np.float32)
         for m, s in (("a", 1.0), ("b", 1.1))}
    return X, y


def timed(f, *args, **kwargs):
    w, c = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    return out, time.perf_counter() - w, time.process_time() - c


def g_passes(ev) -> None:
    """The replicates as before: one pass per method on the items of the other classes, per group."""
    jk = ev.class_jackknife()
    ds = ev.dataset
    codes = ds.label_codes
    role = ds.role
    for members in jk.groups:
        keep = ~np.isin(codes, members)
        isq = isg = None
        if role is not None:
            isq, isg = np.isin(role[keep], ("query", "both")), np.isin(role[keep], ("gallery", "both"))
        for m in ev.methods:
            run_pass(ds.embeddings[m][keep], codes[keep], is_query=isq, is_gallery=isg, ks=tuple(range(1, 33)),
                     n_recall=2, n_bins=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=20_000)
    p.add_argument("--d", type=int, default=128)
    p.add_argument("--classes", type=int, default=200)
    p.add_argument("--difficulty", default="easy,typical,near-chance")
    p.add_argument("--protocol", default="loo,query-gallery")
    p.add_argument("--g-pass", action="store_true", help="also time the G passes per method (the previous way)")
    a = p.parse_args()
    ac.evaluate({"w": np.random.default_rng(0).standard_normal((600, 8))}, np.arange(600) % 6)  # compile first
    print(f"# {a.n} x {a.d}, {a.classes} classes, 2 methods; times in s (wall / CPU); ratios to the pass alone (CPU)")
    print("| data | protocol | mAP | pass | evaluate | jackknife | class unit / pass | G passes / pass |")
    print("|---|---|---|---|---|---|---|---|")
    for diff in a.difficulty.split(","):
        X, y = data(a.n, a.d, a.classes, DIFFICULTY[diff])
        for proto in a.protocol.split(","):
            kw = {}
            if proto == "query-gallery":
                kw["role"] = np.where(np.arange(a.n) % 5 == 0, "query", "gallery")
            plain, w0, c0 = timed(ac.evaluate, X, y, jackknife_groups=None, **kw)
            ev, w1, c1 = timed(ac.evaluate, X, y, **kw)
            _, w2, c2 = timed(ev.class_jackknife)
            gp = "—"
            if a.g_pass:
                _, w3, c3 = timed(g_passes, ev)
                gp = f"{(c0 + c3) / c0:.1f}× ({w3:.0f} s wall)"
            m = plain.summary_frame()["map"].round(3).tolist()
            print(f"| {diff} | {proto} | {m} | {w0:.1f} / {c0:.1f} | {w1:.1f} / {c1:.1f} | {w2:.2f} / {c2:.2f} | "
                  f"{(c1 + c2) / c0:.2f}× | {gp} |", flush=True)


if __name__ == "__main__":
    main()
