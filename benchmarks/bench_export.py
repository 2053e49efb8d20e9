"""Figure export time: the first figure of a process (Chromium starts) and every figure after it
(the same Chromium, kept open), for each format, on the report's figure kinds built from the
digits demo.

Usage: ``python benchmarks/bench_export.py [--style single|double]``."""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from analysis_core import evaluate, load_files
from analysis_core.export.figures import FORMATS, FigureStyle, figure_bytes
from analysis_core.figures.variability import ap_by_class_figure, pr_bands_figure
from analysis_core.stats.bands import pr_bands
from analysis_core.stats.variability import ap_frame

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=("single", "double"), default="single")
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    style = FigureStyle.preset(args.style)
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    figs = [pr_bands_figure(pr_bands(ev)), ap_by_class_figure(ap_frame(ev))]

    t = time.perf_counter()
    figure_bytes(figs[0], "pdf", style)
    print(f"first figure (pdf, Chromium starting): {time.perf_counter() - t:.2f} s")
    for fmt in FORMATS:
        times = []
        for _ in range(args.repeats):
            for fig in figs:
                t = time.perf_counter()
                figure_bytes(fig, fmt, style)
                times.append(time.perf_counter() - t)
        print(f"subsequent figures ({fmt}, {len(times)}): median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s")


if __name__ == "__main__":
    main()
