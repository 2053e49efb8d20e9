"""Command line: ``analysis-core check|evaluate|report|demo|dashboard`` (also ``python -m analysis_core``; see
docs/user-guide.md, "Command line").

Exit codes: 0 success, 2 bad input or usage or a missing optional extra (one-paragraph message
with the fix, no traceback), 3 the Dask cluster could not finish (nothing written), 1 an internal
error (short message; set ANALYSIS_CORE_DEBUG=1 for the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import NoReturn

import numpy as np

from . import __version__
from .demo import DEMOS
from .engine.layout import PRECISIONS
from .errors import ComputeError, InputError
from .export.tables import json_text, write_per_query
from .extras import DISTRIBUTION, EXTRAS, install_command
from .io import SIMILARITIES, Dataset, load_files, validate
from .serve import LOCAL, PORT, UPLOAD_MB

EXIT_CODES = """exit codes:
  0  success
  2  bad input or usage, or a missing optional extra (the message says what to do)
  3  the Dask cluster could not finish (nothing written)
  1  an internal error, a bug (ANALYSIS_CORE_DEBUG=1 shows the traceback)"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Examples and exit codes laid out as written; each option's default appended to its help
    (unless there is none to show, or the help already says it)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default == argparse.SUPPRESS \
                or not action.option_strings:
            return text
        shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
        return f"{text} (default: {shown})"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors: exit 2 with one clear line
        self.print_usage(sys.stderr)
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def _ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"--k takes comma-separated positive integers, got '{text}'") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"--k takes comma-separated positive integers, got '{text}'")
    return ks


def _number(convert, ok, what: str):
    """An argparse type: ``convert(text)`` that must satisfy ``ok``, else a one-line usage error."""

    def parse(text: str):
        try:
            v = convert(text)
        except ValueError:
            v = None
        if v is None or not ok(v):
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'")
        return v

    return parse


_positive = _number(int, lambda v: v >= 1, "a positive integer")
_alpha = _number(float, lambda v: 0 < v < 1, "a number in (0, 1)")


def _progress_printer():
    tty = sys.stderr.isatty()
    state = {"last": -1, "t0": time.perf_counter()}

    def show(done: int, total: int, stage: str) -> None:
        pct = int(100 * done / max(total, 1))
        if not tty and pct // 10 == state["last"] // 10 and done != total:
            return
        if tty and pct == state["last"] and done != total:
            return
        state["last"] = pct
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        line = f"[{bar}] {pct:3d}% {stage} ({time.perf_counter() - state['t0']:.1f}s)"
        sys.stderr.write(("\r" + line) if tty else (line + "\n"))
        if tty and done == total:
            sys.stderr.write("\n")
        sys.stderr.flush()

    return show


def _add_input_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", help="input files (.npz, .npy, .csv, .parquet); several = several methods")
    p.add_argument("--labels", help="labels file for .npy embeddings (.npy, .csv or .txt, one per line)")
    p.add_argument("--names", help="comma-separated method names, one per file (default: file stems)")
    p.add_argument("--feature-prefix", help="CSV/Parquet: use only the columns starting with this prefix")
    p.add_argument("--similarity", choices=SIMILARITIES, default="cosine",
                   help="how items are compared: cosine, dot product, or euclidean (ranked by ascending distance)")
    p.add_argument("--order", help="method order, a comma list naming every method (default: natural order, "
                                   "e3 before e10)")
    p.add_argument("--design", metavar="FILE.csv",
                   help="the methods' design: a CSV with columns method,family,run,step (run and step may be "
                        "empty); default: read from the method names (loss_seed0_e10 = family loss, run seed0, "
                        "step 10)")


def _load(args: argparse.Namespace) -> Dataset:
    names = [s.strip() for s in args.names.split(",")] if args.names else None
    if names is not None and len(names) != len(args.files):
        raise InputError("--names", f"{len(names)} names for {len(args.files)} files.", "give one name per file.")
    ds = load_files(args.files, labels=args.labels, names=names, feature_prefix=args.feature_prefix)
    if getattr(args, "order", None):
        ds = ds.ordered([s.strip() for s in args.order.split(",") if s.strip()])
    for note in ds.notes:  # what the loaders assumed (a dropped index column, a header line)
        sys.stderr.write(f"note: {note}\n")
    return ds


def _describe(ds: Dataset) -> str:
    sizes = np.bincount(ds.label_codes)
    lines = [f"{ds.source}: usable",
             f"  items {ds.n_items}, classes {ds.n_classes} (class sizes {sizes.min()}..{sizes.max()}, "
             f"{int(np.sum(sizes == 1))} singleton)",
             "  methods: " + ", ".join(f"{m} (dim {e.shape[1]})" for m, e in ds.embeddings.items())]
    for col in ("split", "role"):
        v = getattr(ds, col)
        if v is not None:
            u, c = np.unique(v, return_counts=True)
            lines.append(f"  {col}: " + ", ".join(f"{a}={b}" for a, b in zip(u, c, strict=False)))
    if ds.confidence is not None:
        lines.append("  confidence: present")
    return "\n".join(lines)


def _design(args: argparse.Namespace, ds: Dataset):
    """The design of the loaded methods: ``--design`` or their names (a bad table fails here)."""
    from .design import Design

    return Design.of(getattr(args, "design", None), ds.methods)


def cmd_check(args: argparse.Namespace) -> int:
    ds = _load(args)
    validate(ds, args.similarity)
    print(_describe(ds))
    print(_design(args, ds).describe())
    if np.bincount(ds.label_codes).max() < 2:
        sys.stderr.write("warning: every class has one item: no query has a positive, so every retrieval metric "
                         "would be undefined. Retrieval needs classes of at least two items.\n")
    return 0


def _compute(args: argparse.Namespace):
    """The compute backend as a context manager: this process, or a Dask cluster."""
    import contextlib

    if args.workers is None and args.scheduler is None:
        return contextlib.nullcontext(None)
    from .engine.distributed import DaskCompute

    return DaskCompute(workers=args.workers, scheduler=args.scheduler)


def _evaluate(args: argparse.Namespace, ds: Dataset, **kw):
    from .evaluation import evaluate

    with _compute(args) as compute:
        ev = evaluate(ds, similarity=args.similarity, ks=args.k, n_recall=args.n_recall, split=args.split,
                      seed=args.seed, query_sample=args.query_sample, compute=compute, precision=args.precision,
                      progress=None if args.quiet else _progress_printer(), **kw)
    for note in ev.compute_notes:
        sys.stderr.write(f"note: {note}\n")
    for w in ev.warnings():
        sys.stderr.write(f"warning: {w}\n")
    return ev


def _start_numba() -> None:
    """Load numba's compiled code while the input is read (this process runs no other numba code:
    no BLAS probe, see :func:`.engine.compiled.load`)."""
    from .engine import compiled

    compiled.start(probe_blas=False)


def cmd_evaluate(args: argparse.Namespace) -> int:
    _start_numba()
    ds = _load(args)
    ev = _evaluate(args, ds, block_size=args.block_size, n_threads=args.threads, group_size=args.group_size,
                   max_classes=args.max_classes, design=_design(args, ds))
    summary = {**ev.summary(), "provenance": _provenance(args, "evaluate")}
    if args.out:
        out = Path(args.out)
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise InputError(str(out), f"cannot create the output folder ({exc.strerror}).",
                             "choose a writable --out folder.") from exc
        (out / "summary.json").write_text(json_text(summary))
        write_per_query(ev.per_query_columns(), out)
        print(f"wrote {out / 'summary.json'}, {out / 'per_query.csv'}, {out / 'per_query.parquet'}")
    else:
        print(json_text(summary), end="")
    return 0


def _provenance(args: argparse.Namespace, command: str) -> dict:
    """The ``provenance`` block of this run: options as given (paths left out: the input files
    are recorded by name and digest, the output folder not at all)."""
    from .provenance import input_record, provenance

    paths = {"files", "labels", "out", "func", "command", "quiet", "design"}
    inputs = [input_record(f, "embeddings") for f in args.files]
    if args.labels:
        inputs.append(input_record(args.labels, "labels"))
    if getattr(args, "design", None):
        inputs.append(input_record(args.design, "design"))
    return provenance(command=command, options={k: v for k, v in vars(args).items() if k not in paths},
                      inputs=inputs, seed=args.seed, precision=args.precision)


def _formats(text: str) -> tuple[str, ...]:
    from .export.figures import FORMATS

    fmts = tuple(f.strip().lower() for f in text.split(",") if f.strip())
    bad = [f for f in fmts if f not in FORMATS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown format(s) {bad}; use some of {','.join(FORMATS)} (or none)")
    return fmts


def cmd_report(args: argparse.Namespace) -> int:
    from .export.figures import FigureStyle, Prerender, require_chromium, start_renderer
    from .report import RunOptions, build_report, summary_group_size, write_report

    if args.style == "custom" and args.width is None:
        raise InputError("--style custom", "needs the figure width.", "add --width INCHES, e.g. --width 5.")
    style = FigureStyle.preset(args.style, width_in=args.width, dpi=args.dpi)
    if args.band == "bootstrap":
        from .stats.bands import bootstrap_resamples

        bootstrap_resamples(None, args.alpha)  # an alpha too small for any bootstrap: refused now, not after
    if args.format:
        require_chromium()  # before minutes of computing, not after
        start_renderer()  # Chromium starts while the report is computed
    ds = _load(args)
    design = _design(args, ds)
    runs = RunOptions(select_on=args.select_on, report_on=args.report_on, select_metric=args.select_metric,
                      delta=args.delta)
    ev = _evaluate(args, ds, alpha=args.alpha, group_size=summary_group_size(ds, args.split, args.group_size),
                   design=design)
    # figures rendered while the rest of the report is computed (Chromium on the other core)
    prerender = Prerender(args.format, style) if args.format else None
    rep = build_report(ev, alpha=args.alpha, band_kind=args.band, per_class_n=args.per_class, seed=args.seed,
                       group_size=args.group_size, sweep_repeats=args.sweep_repeats, by_split=args.by_split,
                       on_figure=prerender, unit=args.unit, runs=runs, n_permutations=args.permutations)
    out = Path(args.out)
    try:
        written = write_report(ev, rep, out, args.format, style, prerender, provenance=_provenance(args, "report"))
    except OSError as exc:
        raise InputError(str(out), f"cannot write the report ({exc.strerror or exc}).",
                         "choose a writable --out folder.") from exc
    for w in rep.warnings:
        sys.stderr.write(f"warning: {w}\n")
    print(f"wrote {len(written)} files to {out}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    if args.name is None:
        print(demo.listing())
        print(f"\nwrite one into a folder: {demo.COMMAND} NAME --out DIR (default: this folder)")
        return 0
    written = demo.write(args.name, args.out)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    from .serve import run

    return run(args.files, address=args.address, port=args.port, upload_mb=args.upload_mb)


def _add_precision_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="float32",
                   help="dtype of the similarities: float32 (default) or float64, for float64 embeddings whose "
                        "near-equal scores float32 would merge into ties (float32 input is upcast; slower)")


def _add_scale_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--query-sample", type=_number(int, lambda v: v >= 2, "an integer >= 2"), default=None,
                   metavar="N", help="evaluate N queries (stratified by class, seeded by --seed) against the whole "
                   "gallery; every mean gets a confidence interval (with --group-size, each group ranks at most N "
                   "of its queries)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--workers", type=_positive, default=None, metavar="N",
                   help="run the pass on a local Dask cluster of N worker processes (same results)")
    g.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the pass on an existing Dask cluster, e.g. tcp://10.0.0.5:8786 (same results)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m analysis_core", formatter_class=_Formatter,
                description="Tie-aware, deterministic evaluation of embedding retrieval and its variability "
                            "(installed as the analysis-core command too).",
                epilog="examples:\n"
                       "  python -m analysis_core demo   (lists the bundled demo sets)\n"
                       "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                       "  python -m analysis_core check digits.npz\n"
                       "  python -m analysis_core evaluate digits.npz --out results\n"
                       "  python -m analysis_core report digits.npz --out report --format ''\n"
                       "  python -m analysis_core dashboard digits.npz\n"
                       "  python -m analysis_core COMMAND --help\n\n" + EXIT_CODES)
    p.add_argument("--version", action="version", version=f"{DISTRIBUTION} {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def command(name: str, help: str, examples: str):
        return sub.add_parser(name, help=help, description=help[0].upper() + help[1:] + ".",
                              formatter_class=_Formatter, epilog=f"examples:\n{examples}\n\n{EXIT_CODES}")

    c = command("check", "validate input files; exit 0 if usable, 2 if not",
                "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                "  python -m analysis_core check digits.npz\n"
                "  python -m analysis_core check embeddings.npy --labels labels.txt")
    _add_input_args(c)
    c.set_defaults(func=cmd_check)
    e = command("evaluate", "per-query metrics and the summary (summary.json, per_query.csv/.parquet)",
                "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                "  python -m analysis_core evaluate digits.npz --out results\n"
                "  python -m analysis_core evaluate a.npz b.npz --k 1,5,10 --group-size 10 --seed 1 --quiet")
    _add_input_args(e)
    e.add_argument("--k", type=_ks, default=(1, 2, 4, 8), help="cutoffs for Recall@K and P@k, e.g. 1,2,4,8")
    e.add_argument("--out", help="output folder (default: print the summary)")
    e.add_argument("--block-size", type=_positive, default=512,
                   help="rows per work unit (scheduling only: results do not depend on it)")
    e.add_argument("--threads", type=_positive, default=None, help="worker threads (default: all cores)")
    e.add_argument("--n-recall", type=_positive, default=11, help="recall grid points N_P of the PR curves")
    e.add_argument("--split", help="evaluate within this split only")
    e.add_argument("--group-size", type=_positive, default=None,
                   help="add Grouped Recall@K over random groups of S classes (with a CI)")
    e.add_argument("--max-classes", type=_positive, default=None,
                   help="evaluate C classes sampled at random (seeded) instead of all")
    e.add_argument("--seed", type=int, default=0, help="seed for class groups, class and query sampling")
    _add_precision_arg(e)
    _add_scale_args(e)
    e.add_argument("--quiet", action="store_true", help="no progress bar")
    e.set_defaults(func=cmd_evaluate)
    r = command("report", "everything for a paper: summary, tables (CSV + LaTeX), figures",
                "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                "  python -m analysis_core report digits.npz --out report --format ''   (no figures: "
                "no export extra needed)\n"
                "  python -m analysis_core report digits.npz --out report --format pdf,png --style single\n"
                "  python -m analysis_core demo training\n"
                "  python -m analysis_core report training.npz --out report\n"
                "  python -m analysis_core demo digits_runs   (writes digits_runs.npz and digits_runs_design.csv)\n"
                "  python -m analysis_core report digits_runs.npz --design digits_runs_design.csv --out report "
                "--select-on test_seen --report-on test_unseen   (replicate runs: checkpoints chosen on one split, "
                "reported on another)")
    _add_input_args(r)
    r.add_argument("--out", required=True, help="output folder")
    r.add_argument("--k", type=_ks, default=(1, 2, 4, 8), help="cutoffs for Recall@K and P@k")
    r.add_argument("--format", type=_formats, default=("pdf",), help="figure formats: pdf,svg,png (comma-separated)")
    r.add_argument("--style", choices=("single", "double", "custom"), default="double",
                   help="figure width: single (3.5 in) or double (7.2 in) column, or custom (--width)")
    r.add_argument("--width", type=_number(float, lambda v: 1 <= v <= 20, "inches in 1-20"), default=None,
                   help="figure width in inches for --style custom")
    r.add_argument("--dpi", type=_number(int, lambda v: 50 <= v <= 1200, "an integer in 50-1200"), default=300,
                   help="PNG resolution (PDF and SVG are vector)")
    r.add_argument("--alpha", type=_alpha, default=0.05, help="significance level / 1 - confidence")
    r.add_argument("--n-recall", type=_positive, default=11, help="recall grid points N_P of the PR bands")
    r.add_argument("--band", choices=("t", "bootstrap"), default="t",
                   help="PR band: pointwise t interval, or bootstrap simultaneous band")
    r.add_argument("--unit", choices=("class", "query"), default="class",
                   help="what intervals and method comparisons generalise over: class (new items of new classes; "
                        "a jackknife over classes) or query (these trained models, this gallery)")
    r.add_argument("--per-class", type=_positive, default=None,
                   help="statistics on a balanced subsample of this many queries per class (seeded)")
    r.add_argument("--seed", type=int, default=0, help="seed for subsampling, bootstrap, permutations and groups")
    r.add_argument("--group-size", type=_positive, default=10, help="classes per group S for Grouped Recall@K")
    r.add_argument("--sweep-repeats", type=_positive, default=3, help="class samples per class count in the sweep")
    r.add_argument("--split", help="evaluate within this split only")
    r.add_argument("--by-split", action="store_true",
                   help="also compute every analysis for every split as its own retrieval problem")
    r.add_argument("--select-on", metavar="SPLIT", default=None,
                   help="with replicate runs: choose each run's checkpoint on this split (with --report-on)")
    r.add_argument("--report-on", metavar="SPLIT", default=None,
                   help="with replicate runs: report the chosen checkpoints on this split (with --select-on)")
    r.add_argument("--select-metric", default="map", help="the metric --select-on maximises")
    r.add_argument("--delta", type=_number(float, lambda v: v > 0, "a positive number"), default=0.01,
                   help="the difference the runs-needed table is for (power 0.8 at --alpha)")
    r.add_argument("--permutations", type=_positive, default=None, metavar="B",
                   help="random permutations of every Monte Carlo permutation test (default: 10000, or enough for "
                        "Holm over the pairs compared to reach --alpha)")
    _add_precision_arg(r)
    _add_scale_args(r)
    r.add_argument("--quiet", action="store_true", help="no progress bar")
    r.set_defaults(func=cmd_report)
    d = command("demo", "list the bundled demo sets, or write one (with its design table) into a folder",
                "  python -m analysis_core demo\n"
                "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                "  python -m analysis_core demo digits_runs --out data   (data/digits_runs.npz and "
                "data/digits_runs_design.csv)")
    d.add_argument("name", nargs="?", choices=tuple(DEMOS), metavar="NAME",
                   help=f"the demo set: {', '.join(DEMOS)} (none: list them)")
    d.add_argument("--out", default=".", help="folder to write into (made if missing)")
    d.set_defaults(func=cmd_demo)
    s = command("dashboard", "start the browser dashboard (this machine only unless --address says otherwise)",
                "  python -m analysis_core dashboard   (opens on the bundled demo data: http://127.0.0.1:8501)\n"
                "  python -m analysis_core demo digits   (writes digits.npz into this folder)\n"
                "  python -m analysis_core dashboard digits.npz --port 8600\n"
                "  python -m analysis_core dashboard --address 0.0.0.0 --upload-mb 500   (every interface: "
                "anyone who reaches the machine can use it)")
    s.add_argument("files", nargs="*", metavar="FILE",
                   help="files of one folder to open (several = several methods); their folder's other files are "
                        "offered in the sidebar (default: the demo sets and uploads only)")
    s.add_argument("--port", type=_number(int, lambda v: 1 <= v <= 65535, "a port in 1-65535"), default=PORT,
                   help="TCP port")
    s.add_argument("--address", default=LOCAL,
                   help="address to listen on: 127.0.0.1 is this machine only; another (0.0.0.0: every interface) "
                        "lets anyone who reaches it use the dashboard, with a warning")
    s.add_argument("--upload-mb", type=_positive, default=UPLOAD_MB, metavar="N",
                   help="largest file the browser may upload, in MB")
    s.set_defaults(func=cmd_dashboard)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    except ComputeError as exc:
        sys.stderr.write(f"error: {exc} Nothing was written.\n")
        return 3
    except ModuleNotFoundError as exc:  # an optional package the extras did not catch first
        extra = next((x for x, (_, modules, _) in EXTRAS.items() if exc.name in modules), None)
        if extra is None:
            return _internal_error(exc)
        sys.stderr.write(f"error: this needs the optional package '{exc.name}'. Fix: install the '{extra}' extra: "
                         f"{install_command(extra)}.\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except OSError as exc:  # the file system refused: a path the user gave, not a bug
        if exc.filename is None:
            return _internal_error(exc)
        sys.stderr.write(f"error: {exc.filename}: {exc.strerror or exc}. Fix: check that the path exists and that "
                         "you may read it (inputs) or write into it (--out).\n")
        return 2
    except MemoryError as exc:
        sys.stderr.write(f"error: not enough memory ({exc or 'MemoryError'}). Fix: use fewer queries "
                         "(--query-sample), fewer classes (--max-classes) or smaller settings, or a larger "
                         "machine.\n")
        return 2
    except Exception as exc:  # noqa: BLE001 - the user gets a message, never a traceback
        return _internal_error(exc)


def _internal_error(exc: BaseException) -> int:
    if os.environ.get("ANALYSIS_CORE_DEBUG"):
        traceback.print_exception(exc)
    sys.stderr.write(f"internal error: {exc.__class__.__name__}: {exc}. This is a bug; please report it "
                     "with the command you ran (ANALYSIS_CORE_DEBUG=1 shows the traceback).\n")
    return 1
