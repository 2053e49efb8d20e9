"""How long ``report`` and the dashboard's export-all archive take on the training demo
(10 methods, 3 splits, confidence per method), with the time per stage.

Usage: ``python benchmarks/bench_report.py [--repeats N] [--skip-figures] [--only report|archive]``.

``report`` is what ``python -m analysis_core report demo_data/training.npz --by-split --out DIR``
does (PDF figures); the archive is what the dashboard's "Prepare the archive" button does
(:func:`analysis_core_dashboard.components.archive_bytes`: the report of the whole-file evaluation with PDF, SVG
and PNG figures, zipped). Both run in this process after a warm-up evaluation (numba's cached
kernels loaded, Chromium started), as in a long-lived dashboard; each is measured ``--repeats``
times and the best is printed. As in both, figures are rendered in the background while the
report is computed (:class:`~analysis_core.export.figures.Prerender`): ``render figures`` is
what is left to wait for after the computing, ``submit figures`` the page layout of each figure
handed to Chromium.

Wall time depends on what else the machine runs; **CPU time** (``time.process_time``: every
thread of this process; Chromium's rendering runs in its own processes and is not in it) is the
number to compare on a shared machine. Stages are exclusive: a stage's time excludes the stages
nested inside it (e.g. ``statistics`` excludes ``mixed model`` and ``paired tests``)."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_core import load_files  # noqa: E402
from analysis_core.evaluation import evaluate  # noqa: E402

# (module, attribute, stage): the functions timed. A function is patched where it is looked up.
PROBES = [
    ("analysis_core.report", "evaluate", "split evaluations"),  # imported lazily there: patched below
    ("analysis_core.report", "pr_bands", "PR bands"),
    ("analysis_core.report", "analyse", "statistics (one-way, post hoc)"),
    ("analysis_core.stats.analysis", "two_way_anova", "two-way ANOVA"),
    ("analysis_core.stats.analysis", "mixed_model", "mixed model"),
    ("analysis_core.stats.analysis", "metric_paired_tests", "paired tests (every metric)"),
    ("analysis_core.report", "grouped_recall", "grouped recall"),
    ("analysis_core.report", "class_count_sweep", "class-count sweep"),
    ("analysis_core.report", "histogram_table", "histograms"),
    ("analysis_core.report", "split_generalization", "generalization"),
    ("analysis_core.report", "error_reject_curve", "error-vs-reject"),
    ("analysis_core.report", "checkpoint_analysis", "checkpoints"),
    ("analysis_core.report", "_paper_tables", "main table (with its paired tests)"),
    ("analysis_core.report", "write_per_query", "write per-query files"),
    ("analysis_core.report", "write_table", "write tables (CSV + LaTeX)"),
    ("analysis_core.report", "write_figures", "render figures (kaleido)"),
    ("analysis_core.export.figures.Prerender", "__call__", "submit figures (page layout)"),
]
FIGURE_BUILDERS = ["checkpoint_figure", "checkpoint_heatmap", "histogram_small_multiples", "erc_figure",
                   "generalization_figure", "grouped_recall_by_size_figure", "histogram_figure", "sweep_figure",
                   "ap_by_class_figure", "paired_differences_figure", "pr_bands_figure", "tukey_figure"]


class Stages:
    """Exclusive wall and CPU time per stage (a stack: entering a stage pauses its parent)."""

    def __init__(self) -> None:
        self.wall: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []

    @contextlib.contextmanager
    def stage(self, name: str):
        now = (time.perf_counter(), time.process_time())
        if self.stack:
            self._charge(self.stack[-1], now)
        self.stack.append([name, *now])
        try:
            yield
        finally:
            end = (time.perf_counter(), time.process_time())
            self._charge(self.stack.pop(), end)
            if self.stack:
                self.stack[-1][1:] = end

    def _charge(self, frame: list, now: tuple[float, float]) -> None:
        self.wall[frame[0]] += now[0] - frame[1]
        self.cpu[frame[0]] += now[1] - frame[2]
        frame[1:] = now

    def wrap(self, fn, name: str):
        def timed(*a, **kw):
            with self.stage(name):
                return fn(*a, **kw)
        timed.__wrapped__ = fn
        return timed

    def reset(self) -> None:
        self.wall.clear()
        self.cpu.clear()


STAGES = Stages()


def _install() -> None:
    import analysis_core.evaluation as evaluation

    for mod, attr, name in PROBES:
        path, _, cls = mod.rpartition(".")
        m = importlib.import_module(mod) if not cls[:1].isupper() else getattr(importlib.import_module(path), cls)
        if hasattr(m, attr):
            setattr(m, attr, STAGES.wrap(getattr(m, attr), name))
    evaluation.evaluate = STAGES.wrap(evaluation.evaluate, "split evaluations")  # report imports it per call
    rep = importlib.import_module("analysis_core.report")
    for attr in FIGURE_BUILDERS:
        setattr(rep, attr, STAGES.wrap(getattr(rep, attr), "build figures (plotly)"))


def _run(label: str, fn) -> tuple[float, float, dict, dict]:
    STAGES.reset()
    t, c = time.perf_counter(), time.process_time()
    with STAGES.stage("other"):
        fn()
    return time.perf_counter() - t, time.process_time() - c, dict(STAGES.wall), dict(STAGES.cpu)


def _print(label: str, runs: list) -> None:
    wall, cpu, stage_wall, stage_cpu = min(runs, key=lambda r: r[1])  # the least disturbed run
    walls = ", ".join(f"{r[0]:.1f}" for r in runs)
    cpus = ", ".join(f"{r[1]:.1f}" for r in runs)
    print(f"\n{label}: wall {wall:.1f} s, CPU {cpu:.1f} s (runs: wall {walls}; CPU {cpus})")
    print(f"  {'stage':34s} {'CPU s':>7s} {'wall s':>7s}")
    for name in sorted(stage_cpu, key=lambda n: -stage_cpu[n]):
        print(f"  {name:34s} {stage_cpu[name]:7.2f} {stage_wall[name]:7.2f}")


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--skip-figures", action="store_true", help="no figure files (no Chromium)")
    p.add_argument("--only", choices=("report", "archive"), default=None)
    args = p.parse_args()
    _install()
    from analysis_core.export.figures import FigureStyle, Prerender, figure_bytes
    from analysis_core.report import build_report, write_report

    ds = load_files([ROOT / "demo_data" / "training.npz"])
    t = time.perf_counter()
    ev = evaluate(ds, alpha=0.05)
    print(f"warm-up evaluate (numba cache loaded): {time.perf_counter() - t:.1f} s")
    fmts = () if args.skip_figures else ("pdf",)
    if not args.skip_figures:
        import plotly.graph_objects as go

        t = time.perf_counter()
        figure_bytes(go.Figure(go.Scatter(x=[0, 1], y=[0, 1]), layout_title_text="warm-up"), "pdf")
        print(f"warm-up figure (Chromium started): {time.perf_counter() - t:.1f} s")

    if args.only in (None, "report"):
        def report() -> None:
            with tempfile.TemporaryDirectory() as tmp:
                e = STAGES.wrap(evaluate, "evaluate (whole file)")(ds, alpha=0.05)
                style = FigureStyle.preset("double")
                prerender = Prerender(fmts, style) if fmts else None  # as the CLI
                rep = build_report(e, by_split=True, on_figure=prerender)
                write_report(e, rep, Path(tmp), fmts, style, prerender)

        _print("report --by-split (PDF figures)" if fmts else "report --by-split (no figures)",
               [_run("report", report) for _ in range(args.repeats)])

    if args.only in (None, "archive"):
        from analysis_core_dashboard.components import archive_bytes

        formats = () if args.skip_figures else ("pdf", "svg", "png")

        def archive() -> None:
            archive_bytes(ev, 0.05, formats, FigureStyle.preset("double"))

        _print(f"dashboard archive ({', '.join(formats) or 'no figures'})",
               [_run("archive", archive) for _ in range(args.repeats)])


if __name__ == "__main__":
    main()
