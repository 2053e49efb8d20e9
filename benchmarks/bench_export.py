"""Figure export time: the first figure of a process (Chromium starts) and every figure after it
(the same Chromium, kept open), for each format, on the paths that export figures:

* dashboard: a download button calls ``figure_bytes(fig, fmt, style)`` on click (here: PR bands
  and AP by class of the digits demo, the heaviest kinds of the per-query pages);
* report: ``write_figures`` over every figure ``report`` makes for the digits demo (15 figures,
  PDF, SVG and PNG each), timed per format (it renders several figures at once, so a file has no
  time of its own: the time per file is the format's time over its files).

Prints the machine's load average before and after (the machine may be shared).

Usage: ``python benchmarks/bench_export.py [--style single|double] [--repeats N] [--no-report]``."""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from analysis_core import evaluate, load_files
from analysis_core.export import figures as export
from analysis_core.export.figures import FORMATS, FigureStyle, figure_bytes
from analysis_core.figures.variability import ap_by_class_figure, pr_bands_figure
from analysis_core.stats.bands import pr_bands
from analysis_core.stats.variability import ap_frame

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--style", choices=("single", "double"), default="single")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--no-report", action="store_true", help="skip the report path (it computes a report first)")
    args = p.parse_args()
    style = FigureStyle.preset(args.style)
    print(f"style {args.style} ({style.width_in} in, {style.font_size:g} pt, {style.dpi} dpi); {load()}")
    ev = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]))
    figs = [pr_bands_figure(pr_bands(ev)), ap_by_class_figure(ap_frame(ev))]

    t = time.perf_counter()
    figure_bytes(figs[0], "pdf", style)
    print(f"first figure (pdf, Chromium starting): {time.perf_counter() - t:.2f} s")
    print("dashboard path (figure_bytes, as a download button):")
    for fmt in FORMATS:
        times = []
        for _ in range(args.repeats):
            for fig in figs:
                t = time.perf_counter()
                figure_bytes(fig, fmt, style)
                times.append(time.perf_counter() - t)
        print(f"  subsequent figures ({fmt}, {len(times)}): median {statistics.median(times):.3f} s, "
              f"max {max(times):.3f} s")

    if not args.no_report:
        from analysis_core.report import build_report

        rep = build_report(ev, sweep_repeats=1)
        times = {}
        with tempfile.TemporaryDirectory() as tmp:
            for fmt in FORMATS:
                t = time.perf_counter()
                export.write_figures(rep.figures, Path(tmp), (fmt,), style)
                times[fmt] = time.perf_counter() - t
        total, n = sum(times.values()), len(rep.figures)
        print(f"report path (write_figures, {n} figures x {len(FORMATS)} formats = {n * len(FORMATS)} files in "
              f"{total:.1f} s, {total / (n * len(FORMATS)):.3f} s a file):")
        for fmt, t in times.items():
            print(f"  {fmt} ({n}): {t:.2f} s, {t / n:.3f} s a file")
    print(load())


if __name__ == "__main__":
    main()
