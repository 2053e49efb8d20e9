"""Everything for a paper in one folder: the ``report`` command's work (docs/user-guide.md,
"The report command"; the statistics: docs/statistics-reference.md).

``DIR/summary.json``, ``DIR/per_query.csv``, ``DIR/tables/<name>.csv`` + ``.tex`` twins, and
``DIR/figures/<name>.<fmt>``. Statistics compare classes (one method) or method x class groups
(several methods), as in
F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the impact of
inter-query variability on the performance of retrieval systems".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from .errors import InputError
from .evaluation import NO_POSITIVE, Evaluation
from .export.figures import FigureStyle, Prerender, write_figures
from .export.paper_tables import paper_latex
from .export.tables import file_stem, json_text, write_per_query, write_table
from .figures.checkpoints import checkpoint_figure, checkpoint_heatmap, histogram_small_multiples
from .figures.class_sweep import sweep_figure
from .figures.error_reject import erc_figure
from .figures.generalization import generalization_figure
from .figures.grouped_recall import grouped_recall_by_size_figure
from .figures.histograms import histogram_figure
from .figures.runs import run_curves_figure, run_dots_figure, variance_components_figure
from .figures.style import plot_text
from .figures.variability import ap_by_class_figure, paired_differences_figure, pr_bands_figure, tukey_figure
from .stats.analysis import QUERY_UNIT_ONLY, VariabilityAnalysis, analyse
from .stats.bands import ALL, band_notes, describe, pr_bands
from .stats.checkpoints import checkpoint_analysis
from .stats.class_sweep import class_count_sweep
from .stats.error_reject import error_reject_table
from .stats.generalization import split_generalization
from .stats.grouped_recall import grouped_recall
from .stats.histograms import histogram_table
from .stats.permutation import default_permutations
from .stats.run_models import run_models
from .stats.runs import GENERALISES as RUN_GENERALISES
from .stats.runs import families_blocks, run_analysis
from .stats.variability import ap_frame, class_summary, metric_frame


@dataclass
class Report:
    """Tables (DataFrames), figures (plotly) and warnings, before anything is written.
    ``split_evaluations``: with ``by_split``, each split's own evaluation (``summary.json``'s
    ``splits`` blocks)."""

    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    captions: dict[str, str] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    split_evaluations: dict = field(default_factory=dict)
    latex: dict[str, str] = field(default_factory=dict)  # LaTeX-only tables: <name>.tex
    inference: dict = field(default_factory=dict)  # split (or "all") -> summary.json's "inference" block
    families: dict = field(default_factory=dict)  # split (or "all") -> summary.json's "families" block
    alpha: float = 0.05  # the level of every interval and test in it


@dataclass(frozen=True)
class RunOptions:
    """How the report treats replicate runs (the design's families with two or more runs):
    ``select_on``/``report_on``: choose each run's checkpoint by ``select_metric`` on one split and
    report it on another (both or neither); ``delta``: the difference the runs-needed table is
    for; ``n_permutations``: Monte Carlo reassignments when the exact family test would enumerate
    too many."""

    select_on: str | None = None
    report_on: str | None = None
    select_metric: str = "map"
    delta: float = 0.01


MIN_SWEEP_CLASSES = 20  # below, sampled class counts span too short a range to show a trend

# tables that already hold one block per split when the whole set is evaluated (split column inside)
_SPLIT_AWARE = ("histograms", "generalization", "checkpoints", "checkpoint_tests", "checkpoint_classes", "summary")


def build_report(ev: Evaluation, alpha: float = 0.05, band_kind: str = "t", per_class_n: int | None = None,
                 seed: int = 0, group_size: int = 10, sweep_repeats: int = 3, by_split: bool = False,
                 on_figure: Callable[[str, go.Figure], None] | None = None, unit: str = "class",
                 runs: RunOptions | None = None, n_permutations: int | None = None) -> Report:
    """Compute every table and figure of the report from an evaluation.

    With ``by_split`` (and a ``split`` column), every analysis is also computed for every split as
    its own retrieval problem: each table gets the split's rows (column ``split``), each figure a
    per-split twin (``<name>__<split>``). A split where retrieval is impossible is skipped with a
    warning naming it. ``on_figure(name, figure)`` is called with each figure as soon as it is
    final, while the rest is computed (:class:`~analysis_core.export.figures.Prerender` renders
    it in the background). ``unit``: what the method comparisons and the main table's intervals
    generalise over, ``"class"`` (default: a jackknife over classes) or ``"query"`` (these models,
    this gallery; see :data:`analysis_core.stats.analysis.UNITS`). With replicate runs in the
    design (``ev.design``), the run-level tables (``runs``, ``run_summary``, ``family_tests``,
    ``runs_needed``, ``checkpoint_runs``) and ``summary.json``'s ``families`` blocks, as ``runs``
    says. ``n_permutations``: random permutations of every Monte Carlo permutation test (default:
    enough for Holm over the pairs compared to reach ``alpha``,
    :func:`~analysis_core.stats.permutation.default_permutations`)."""
    from .stats.analysis import UNITS

    if n_permutations is not None and n_permutations < 1:
        raise InputError("report", f"n_permutations = {n_permutations}.", "give a positive number of permutations.")
    runs = runs or RunOptions()
    _check_runs(ev, runs)
    if unit not in UNITS:
        raise InputError("report", f"unknown unit {unit!r}.", f"use one of {sorted(UNITS)}.")
    if ev.n_queries() == ev.n_lone_queries():  # every table and figure would be empty or NaN
        where = f"split '{ev.split}'" if ev.split is not None else "the data"
        raise InputError("report", f"{where}: {NO_POSITIVE}",
                         "report a split (--split) or data with a class of at least two items.")
    return _build(ev, alpha, band_kind, per_class_n, seed, group_size, sweep_repeats, by_split, on_figure=on_figure,
                  unit=unit, runs=runs, n_permutations=n_permutations)


def _check_runs(ev: Evaluation, runs: RunOptions) -> None:
    if (runs.select_on is None) != (runs.report_on is None):
        raise InputError("report", "--select-on and --report-on go together.",
                         "give both: the split each run's checkpoint is chosen on and the split it is reported on.")
    if runs.select_on is None:
        return
    known = sorted(set(ev.dataset.split[ev.rows].tolist())) if ev.dataset.split is not None else []
    for opt, sp in (("--select-on", runs.select_on), ("--report-on", runs.report_on)):
        if sp not in known:
            raise InputError("report", f"{opt} {sp}: " + (f"no such split (the data has {known})." if known else
                                                          "the data has no split column."),
                             "name a split of the data." if known else "add a split column to choose checkpoints.")
    if not (ev.design.has_runs and ev.design.has_steps):
        raise InputError("report", "--select-on needs runs with checkpoints, and the design has "
                         + ("no checkpoint steps." if ev.design.has_runs else "no family with two runs."),
                         "declare the design (method names such as loss_seed0_e10, or --design FILE.csv).")
    if not (runs.delta > 0):
        raise InputError("report", f"--delta {runs.delta}.", "give a positive difference, e.g. --delta 0.01.")


def _build(ev: Evaluation, alpha: float, band_kind: str, per_class_n: int | None, seed: int, group_size: int,
           sweep_repeats: int, by_split: bool, split_part: bool = False,
           on_figure: Callable[[str, go.Figure], None] | None = None, unit: str = "class",
           runs: RunOptions | None = None, n_permutations: int | None = None) -> Report:
    """:func:`build_report`; ``split_part``: one split's part of a ``by_split`` report, without
    what the whole report already holds for every split and would drop from the part (the
    split-aware tables and their figures: histograms, checkpoints, the main table)."""
    rep = Report(alpha=alpha)
    done: set[str] = set()

    def final() -> None:  # the figures made since the last call are final: hand them on
        if on_figure is None:
            return
        for name in [n for n in rep.figures if n not in done]:
            done.add(name)
            on_figure(name, rep.figures[name])

    split_evals = _split_evaluations(rep, ev, alpha, seed, group_size)
    _variability(rep, ev, alpha, band_kind, per_class_n, seed, final, unit, n_permutations)
    final()
    _class_count(rep, ev, alpha, seed, group_size, sweep_repeats, split_evals, unit)
    final()
    if not split_part:
        _histograms(rep, ev, split_evals)
        final()
        _checkpoints(rep, ev, split_evals, alpha, seed, unit, n_permutations)
        final()
        _runs(rep, ev, split_evals, alpha, seed, runs or RunOptions(), n_permutations)
        final()
        _paper_tables(rep, ev, split_evals, alpha, seed, unit)
    if ev.dataset.split is not None:
        _label_split(rep, ev.split or "all")
    if by_split and split_evals:
        rep.split_evaluations = split_evals
        for sp, e in split_evals.items():
            sub = _build(e, alpha, band_kind, per_class_n, seed, group_size, sweep_repeats, False, split_part=True,
                         unit=unit, n_permutations=n_permutations)
            for name, t in sub.tables.items():
                if name in _SPLIT_AWARE:
                    continue
                rep.tables[name] = pd.concat([rep.tables[name], t], ignore_index=True) if name in rep.tables else t
                rep.captions.setdefault(name, sub.captions.get(name, ""))
            for name, fig in sub.figures.items():
                if not name.startswith(_SPLIT_AWARE):
                    title = f"{fig.layout.title.text} [{plot_text(sp)}]"
                    rep.figures[f"{name}__{sp}"] = fig.update_layout(title_text=title)
            final()
            rep.warnings += [f"[split '{sp}'] {w}" for w in sub.warnings]
    elif by_split:
        rep.warnings.append("--by-split asked for, but the data has no usable split: one report over all items.")
    return rep


def _histograms(rep: Report, ev: Evaluation, split_evals: dict) -> None:
    hist = histogram_table(ev, split_evals)
    rep.tables["histograms"] = hist
    rep.captions["histograms"] = "Exact positive- and negative-pair similarity histograms (count and density)."
    for m in ev.methods:
        part = hist[(hist["method"] == m) & (hist["split"] == "all")]
        jsd = ev.method_summary(m)["jsd"]
        title = f"{plot_text(m)}: pair similarities (JSD = {jsd:.3f})"
        rep.figures[f"histograms_{m}"] = histogram_figure(part, title=title)


def _label_split(rep: Report, label: str) -> None:
    """A ``split`` column (after ``method`` when there is one) in every table that has none."""
    for name, t in rep.tables.items():
        if "split" not in t.columns:
            rep.tables[name] = t = t.copy()
            t.insert(1 if "method" in t.columns and t.columns[0] == "method" else 0, "split", label)


def summary_group_size(ds, split: str | None, requested: int) -> int | None:
    """The group size S of the report's own Grouped Recall@K in ``summary.json``: ``requested``, at
    most half the class count of the rows evaluated (all, or ``split``'s), so that there are two
    groups and an interval, and at least 2; None when they have fewer than two classes (or
    ``split`` is not one of the data's: the evaluation says so)."""
    codes = ds.label_codes
    if split is not None:
        if ds.split is None:
            return None
        codes = codes[ds.split == split]
    n_classes = int(np.unique(codes).size)
    return min(requested, max(2, n_classes // 2)) if n_classes >= 2 else None


def _split_evaluations(rep: Report, ev: Evaluation, alpha: float, seed: int, group_size: int) -> dict:
    """Each split of an all-items evaluation evaluated as its own retrieval problem
    (:func:`analysis_core.splits.evaluate_splits`, as the dashboard does); skipped splits warned."""
    from .splits import evaluate_splits

    splits = evaluate_splits(ev, group_size, seed)
    rep.warnings += splits.messages()
    return splits.evaluations


def _checkpoints(rep: Report, ev: Evaluation, split_evals: dict, alpha: float, seed: int,
                 unit: str = "class", n_permutations: int | None = None) -> None:
    """Every summary metric against checkpoint (per split when the data has splits); nothing when
    no method has a step in the design (methods in their order are no training curve)."""
    if len(ev.methods) < 2:
        return
    if not ev.design.has_steps:
        rep.warnings.append("no method has a checkpoint step (names ending in e3, epoch_10, step_500, … or a design "
                            "table's step column): no checkpoint tables or figures (methods or runs in their order "
                            "are no training curve).")
        return
    evals = split_evals or {ev.split or "all": ev}
    ca = checkpoint_analysis(evals, alpha, seed=seed, unit=unit,
                             n_permutations=n_permutations or default_permutations(1, alpha))
    over = "classes (jackknife)" if unit == "class" else "queries"
    rep.tables["checkpoints"] = ca.table
    rep.captions["checkpoints"] = (f"Every summary metric per checkpoint with {100 * (1 - alpha):g}% t intervals over "
                                   f"{over} (unit, n_units); is_best marks the best checkpoint of each family and "
                                   "metric.")
    rep.tables["checkpoint_tests"] = ca.tests
    rep.captions["checkpoint_tests"] = ("Best against last checkpoint, per metric: mean difference (best - last) "
                                        f"with its t interval and test at the {unit} unit (unit, n_units).")
    rep.tables["checkpoint_classes"] = ca.class_ap
    rep.captions["checkpoint_classes"] = "Mean AP per class and checkpoint."
    for sp in evals:
        rep.figures[f"checkpoints__{sp}"] = checkpoint_figure(ca.table, sp)
        for fam in dict.fromkeys(ca.class_ap.loc[ca.class_ap["split"] == sp, "family"]):
            rep.figures[f"checkpoint_classes__{sp}{'__' + fam if fam else ''}"] = checkpoint_heatmap(
                ca.class_ap, sp, fam)
    hist = histogram_table(ev)
    jsd = {m: ev.method_summary(m)["jsd"] for m in ev.methods}
    rep.figures["histograms_over_checkpoints"] = histogram_small_multiples(hist, ev.methods, jsd)


def _runs(rep: Report, ev: Evaluation, split_evals: dict, alpha: float, seed: int, opts: RunOptions,
          n_permutations: int | None) -> None:
    """The run-level tables and figures when the design has replicate runs (SPEC §4, "Runs")."""
    if not ev.design.has_runs:
        return
    evals = {ev.split or "all": ev, **split_evals}
    ra = run_analysis(evals, ev.design, alpha, select_on=opts.select_on, report_on=opts.report_on,
                      select_metric=opts.select_metric, seed=seed,
                      n_permutations=n_permutations or default_permutations(1, alpha))
    rep.warnings += ra.warnings
    chosen = (f"the checkpoint with the best {opts.select_metric} on split '{opts.select_on}' (per run), reported on "
              f"'{opts.report_on}'" if opts.select_on else "its last checkpoint")
    rep.tables["runs"] = ra.values
    rep.captions["runs"] = f"Every run's summary metrics at {chosen}."
    rep.tables["run_summary"] = ra.summary
    rep.captions["run_summary"] = (f"Per family: mean, sd and {100 * (1 - alpha):g}% t interval over runs (unit run, "
                                   f"n_units runs) at {chosen}; it generalises to {RUN_GENERALISES}.")
    if len(ra.tests):
        rep.tables["family_tests"] = ra.tests
        rep.captions["family_tests"] = (
            "Family comparisons with the run as unit: mean difference of run means with its Welch "
            f"{100 * (1 - alpha):g}% interval, the exact permutation test of the run means (p_value; Monte Carlo "
            "beyond 200,000 reassignments), Welch's t beside it (p_welch), Holm across family pairs (p_holm), "
            "and the probability that a run of family_a beats a run of family_b with a stratified bootstrap "
            "interval.")
    if len(ra.selection):
        rep.tables["run_selection"] = ra.selection
        rep.captions["run_selection"] = "The checkpoint chosen per run."
    need = ra.runs_needed(opts.delta)
    rep.tables["runs_needed"] = need
    rep.captions["runs_needed"] = (f"Runs per family a two-sided two-sample t test at alpha = {alpha:g} needs to "
                                   f"detect a difference of {opts.delta:g} with power 0.8, from the pooled sd of a "
                                   "run's value within families (run_sd).")
    models = run_models({sp: e for sp, e in evals.items() if sp in set(ra.values["split"])}
                        | ({opts.report_on: ev.within_split(opts.report_on)} if opts.report_on and
                           opts.report_on not in evals else {}), ra)
    rep.warnings += models.warnings
    if len(models.pairs):
        rep.tables["run_model"] = models.pairs
        rep.captions["run_model"] = (
            "Family differences by the hierarchical model value ~ family + (1 | family:run) + (1 | class) + "
            "(1 | class:family) + (1 | query) on the per-query values of every run (REML; Satterthwaite t, as "
            "lmerTest), Holm across family pairs; unit run.")
        rep.tables["variance_components"] = models.components
        rep.captions["variance_components"] = ("Where the variance of a per-query value comes from: run within family, "
                                               "class, class x family, query and residual (share of the total), "
                                               "from the hierarchical model.")
        for sp in dict.fromkeys(models.components["split"]):
            rep.figures[f"variance_components__{sp}"] = variance_components_figure(models.components, sp)
    if len(ra.curves):
        rep.tables["checkpoint_runs"] = ra.curves
        rep.captions["checkpoint_runs"] = (f"Every summary metric per family and checkpoint: mean over runs with a "
                                           f"{100 * (1 - alpha):g}% t band over runs (unit: run; it generalises to new "
                                           "trainings of the family evaluated on these test items).")
        for sp in dict.fromkeys(ra.curves["split"]):
            rep.figures[f"checkpoint_runs__{sp}"] = run_curves_figure(ra.curves, sp)
    for sp in dict.fromkeys(ra.summary["split"]):
        rep.figures[f"runs__{sp}"] = run_dots_figure(ra.values, ra.summary, sp)
    rep.families = families_blocks(ra)


def _paper_tables(rep: Report, ev: Evaluation, split_evals: dict, alpha: float, seed: int,
                  unit: str = "class") -> None:
    """The main results table (methods x headline metrics, per split when the data have splits)
    in a double-column and a single-column variant; a dagger where the best differs from the
    runner-up by the paired test of that metric."""
    from .export.main_table import runs_latex, significance_questions, summary_frame, summary_latex

    evals = {ev.split or "all": ev, **split_evals}
    frame = summary_frame(evals, alpha, unit=unit, seed=seed)
    rep.tables["summary"] = frame
    rep.inference = _inference_blocks(frame, evals, alpha, seed)
    rep.captions["summary"] = ("Main results: headline metrics per method (and split) with their intervals "
                               "(<metric>_ci_low, <metric>_ci_high; asymmetric for hit rates and means near 0 or 1); "
                               "unit and n_units say what each interval is over.")
    questions = significance_questions(frame) + significance_questions(frame, single_column=True)
    answers = _best_vs_runner_up(evals, list(dict.fromkeys(questions)), alpha, seed, unit)
    methods_tex = summary_latex(frame, alpha, lambda *q: answers.get(q))
    if "run_summary" in rep.tables:  # replicate runs: the main table is over runs, per method beside it
        rep.latex["summary"] = runs_latex(rep.tables["run_summary"], alpha, rep.tables.get("family_tests"))
        rep.latex["summary_methods"] = methods_tex.replace(r"\label{tab:summary}", r"\label{tab:summary-methods}")
    else:
        rep.latex["summary"] = methods_tex
    rep.latex["summary_column"] = summary_latex(frame, alpha, lambda *q: answers.get(q), single_column=True)


def _inference_blocks(frame: pd.DataFrame, evals: dict, alpha: float, seed: int = 0) -> dict:
    """summary.json's ``inference`` block of each evaluation of the main table: the unit, how many
    units, what it generalises over, and every headline interval."""
    from .stats.analysis import UNITS

    out = {}
    for split, part in frame.groupby("split", sort=False):
        unit = str(part["unit"].iloc[0])
        ev = evals[split]
        block: dict = {"unit": unit, "n_units": int(part["n_units"].max()), "level": 1 - alpha,
                       "generalises_to": UNITS[unit], "intervals": {}}
        if unit == "class":
            jk = ev.class_jackknife(seed=seed)
            block["test"] = "jackknife t over classes (G - 1 df)"
            if jk.why:
                block["note"] = jk.why
        else:
            block["test"] = "Student t over queries"
        for r in part.itertuples(index=False):
            row = r._asdict()
            block["intervals"][row["method"]] = {
                c[:-len("_ci_low")]: {"low": row[c], "high": row[c[:-len("_ci_low")] + "_ci_high"]}
                for c in part.columns if c.endswith("_ci_low") and np.isfinite(row[c])}
        out[split] = block
    return out


def _best_vs_runner_up(evals: dict, questions: list[tuple[str, str, str, str]], alpha: float,
                       seed: int, unit: str = "query") -> dict[tuple, bool | None]:
    """Significance marks for the main table: for each (split, metric, best, runner-up), whether
    the best differs from the runner-up on the same queries by the metric's paired test (McNemar
    for hit rates, sign-flip permutation otherwise); None where there is no test. One call per
    split: each metric's rows hold only its two methods, so each is tested alone, and the
    permutation tests share one product."""
    from .stats.paired_tests import metric_paired_tests

    out: dict[tuple, bool | None] = {}
    for split in dict.fromkeys(q[0] for q in questions):
        asked = [q for q in questions if q[0] == split]
        ev = evals.get(split)
        testable = [q for q in asked if ev is not None and q[1] != "jsd"]
        out.update({q: None for q in asked if q not in testable})
        if not testable or ev is None:  # no evaluation: nothing testable
            continue
        if unit == "class":
            jk = ev.class_jackknife(seed=seed)
            for q in testable:
                d = jk.differences(alpha, pairs=[(q[2], q[3])], metrics=[q[1]]) if q[1] in jk.metrics else None
                p = None if d is None or not len(d) else d["p_value"].iloc[0]
                out[q] = None if p is None or not np.isfinite(p) else bool(p < alpha)
            continue
        long = metric_frame(ev, sorted({m for q in testable for m in q[2:]}), sorted({q[1] for q in testable}))
        pairs = {q: long[(long["metric"] == q[1]) & long["method"].isin(q[2:])] for q in testable}
        out.update({q: None for q, part in pairs.items() if part.empty})
        pairs = {q: part for q, part in pairs.items() if not part.empty}
        if pairs:
            p = metric_paired_tests(pd.concat(pairs.values(), ignore_index=True), alpha, seed=seed)
            p = p.set_index("metric")["p_value"]
            out.update({q: bool(p[q[1]] < alpha) for q in pairs})
    return out


def _variability(rep: Report, ev: Evaluation, alpha: float, band_kind: str, per_class_n: int | None,
                 seed: int, final: Callable[[], None] = lambda: None, unit: str = "class",
                 n_permutations: int | None = None) -> None:
    """PR bands, per-class AP, the one-way tests and post hoc comparisons, and the method
    comparisons; ``final()`` once the PR band figure is made (it renders during the statistics)."""
    bands = pr_bands(ev, alpha=alpha, kind=band_kind, seed=seed)
    rep.tables["pr_band"] = bands
    notes = band_notes(bands[bands["class"] == ALL])
    rep.captions["pr_band"] = (f"Precision at each recall level: mean over queries and "
                               f"{describe(bands, alpha, band_kind)}." + "".join(f" {n}." for n in notes))
    rep.figures["pr_bands"] = pr_bands_figure(bands, kind=band_kind, alpha=alpha)
    final()
    ap = ap_frame(ev)
    several = len(ev.methods) > 1
    jk = ev.class_jackknife(seed=seed) if unit == "class" and several else None
    n_pairs = len(ev.methods) * (len(ev.methods) - 1) // 2
    res = analyse(ap, alpha, per_class_n=per_class_n, seed=seed, metrics=metric_frame(ev) if several else None,
                  unit=unit, jackknife=jk, n_permutations=n_permutations or default_permutations(n_pairs, alpha))
    ap = res.data
    rep.warnings += res.warnings
    if ev.dataset.role is None:  # leave-one-out: the queries are the gallery
        rep.warnings.append(QUERY_UNIT_ONLY)
    rep.tables["classes"] = class_summary(ap, ev.class_query_counts() if ev.query_sample is not None else None)
    rep.captions["classes"] = "Per-class AP: queries that contributed, mean, sd and minimum, lowest mean first." + (
        " Query sample: of_queries = the class's queries sampled from." if ev.query_sample is not None else "")
    if ev.query_sample is not None:
        qs = ev.query_sample
        rep.warnings.append(f"query sample: {qs.n} of {qs.N} queries (seed {qs.seed}); statistics are over the "
                            "sampled queries and summary.json gives every mean with an interval.")
    rep.tables["anova"] = res.one_way.tests
    rep.captions["anova"] = "One-way tests of per-query AP over " + (
        "method x class groups." if len(ev.methods) > 1 else "classes.")
    rep.figures["ap_by_class"] = ap_by_class_figure(ap)
    if "tukey" in res.posthoc:
        rep.tables["tukey_hsd"] = res.posthoc["tukey"].table
        rep.captions["tukey_hsd"] = f"Tukey HSD pairwise comparisons of mean AP (alpha = {alpha:g})."
        rep.figures["tukey_hsd"] = tukey_figure(res.posthoc["tukey"])
    if "games-howell" in res.posthoc:
        rep.tables["games_howell"] = res.posthoc["games-howell"].table
        rep.captions["games_howell"] = f"Games-Howell pairwise comparisons of mean AP (alpha = {alpha:g})."
    if res.two_way is not None:
        rep.tables["two_way_anova"] = res.two_way
        rep.captions["two_way_anova"] = ("Split-plot ANOVA of per-query AP at the query unit (these models, this "
                                         "gallery): class tested between queries, method and method x class within "
                                         "queries (error column). Under leave-one-out the queries of a class share "
                                         "its gallery and these p-values are too small for a claim about the "
                                         "methods; see the method comparisons.")
    if res.mixed is not None:
        rep.tables["mixed_model"] = res.mixed.table
        rep.captions["mixed_model"] = mixed_caption(res.mixed)
    if res.paired is not None:
        rep.tables["paired_tests"] = res.paired
        rep.captions["paired_tests"] = _comparison_caption(res) + (
            " With replicate runs these compare trained models (for these trained models): the family comparisons "
            "with the run as unit are in family_tests." if ev.design.has_runs else "")
        rep.figures["paired_differences"] = paired_differences_figure(res.paired[res.paired["metric"] == "map"])


def mixed_caption(mm) -> str:
    """The mixed model's caption: its formula, unit and variance components."""
    if getattr(mm, "unit", "query") == "class":
        return ("Mixed model AP ~ method + (1 | class) + (1 | class:method) + (1 | class:query), REML, Satterthwaite "
                f"df, unit class ({mm.n_units}); variances: class {mm.class_variance:.4g}, class x method "
                f"{mm.class_method_variance:.4g}, query {mm.query_variance:.4g}, residual "
                f"{mm.residual_variance:.4g}.")
    return ("Mixed model AP ~ method with a random query intercept, unit query (these models, this gallery; query "
            f"variance {mm.query_variance:.4g}, residual {mm.residual_variance:.4g}).")


def _comparison_caption(res: VariabilityAnalysis) -> str:
    """The caption of the method comparisons: the test, the unit and how many units."""
    if res.unit == "class":
        return (f"Method comparisons for every metric at the class unit ({res.n_units} units): mean difference with "
                f"its {100 * (1 - res.alpha):g}% jackknife t interval over classes (each class deleted from the "
                "queries and the gallery), its p-value, Holm within each metric. Generalises to new items of new "
                "classes.")
    return ("Paired per-query comparisons of methods for every metric at the query unit (these trained models, "
            "this gallery): sign-flip permutation test (means) or exact McNemar test (hit rates), Holm within each "
            "metric, mean difference with its t interval.")


def _class_count(rep: Report, ev: Evaluation, alpha: float, seed: int, group_size: int, sweep_repeats: int,
                 split_evals: dict, unit: str = "class") -> None:
    """Grouped Recall@K by group size, the class-count sweep, the generalization gap across splits
    and the error-vs-reject curves: the analyses of how the numbers depend on the class count, the
    split and the confidence."""
    _grouped_recall_by_size(rep, ev, alpha, seed, group_size)
    _class_sweep(rep, ev, seed, group_size, sweep_repeats)
    if split_evals:
        _generalization(rep, split_evals, ev.methods, alpha, seed, unit)
    if ev.dataset.has_confidence:
        _error_reject(rep, ev)


def _grouped_recall_by_size(rep: Report, ev: Evaluation, alpha: float, seed: int, group_size: int) -> None:
    """Grouped Recall@K at every group size S up to half the classes (and summary.json's S)."""
    sub = ev.items
    codes = sub.label_codes
    n_classes = int(np.unique(codes).size)
    candidates = (2, 5, 10, 20, 50, 100, group_size)
    sizes = sorted({s for s in candidates if s <= n_classes // 2} | {min(group_size, n_classes)}
                   | {g.group_size for g in (ev.grouped or {}).values()})  # summary.json's S too
    rows, by_size = [], []
    for m in ev.methods:
        for S in sizes:
            done = (ev.grouped or {}).get(m)  # summary.json's, when its settings are these
            if done is not None and (done.group_size, done.alpha, done.repeats, done.seed, done.query_sample) == \
                    (S, alpha, 1, seed, None):  # the table's other sizes rank every query
                gr = done
            else:
                gr = grouped_recall(sub.embeddings[m], codes, group_size=S, ks=ev.ks, similarity=ev.similarity,
                                    seed=seed, alpha=alpha, loo_pass=ev.loo_pass(m))
            t = gr.table.assign(method=m, group_size=S, n_dropped_classes=gr.n_dropped_classes)
            rows.append(t)
            by_size.append(t[t["k"] == 1])
    grouped = pd.concat(rows, ignore_index=True)
    cols = ["method", "group_size", "k", "mean", "sd", "ci_low", "ci_high", "chance", "n_groups", "n_dropped_classes"]
    # each group is its own retrieval problem over disjoint classes: the group of classes is the unit
    rep.tables["grouped_recall"] = grouped[cols].assign(unit="group of classes", n_units=grouped["n_groups"])
    rep.captions["grouped_recall"] = (f"Grouped Recall@K: classes split at random (seed {seed}) into groups of S; "
                                      f"mean over groups with {100 * (1 - alpha):g}% Student t interval (G - 1 df; "
                                      "Korn-Graubard where the queries hold fewer than 10 misses) and the chance "
                                      "level of a random ranking.")
    rep.figures["grouped_recall_by_size"] = grouped_recall_by_size_figure(pd.concat(by_size, ignore_index=True))
    if grouped["n_groups"].min() < 2:
        rep.warnings.append("some group sizes leave fewer than two groups: their intervals are undefined.")


def _class_sweep(rep: Report, ev: Evaluation, seed: int, group_size: int, sweep_repeats: int) -> None:
    """Metrics on C classes sampled at random, for C over a range (at least MIN_SWEEP_CLASSES)."""
    sub = ev.items
    codes = sub.label_codes
    n_classes = int(np.unique(codes).size)
    if n_classes >= MIN_SWEEP_CLASSES:
        sweeps = [class_count_sweep(sub.embeddings[m], codes, repeats=sweep_repeats, seed=seed, group_size=min(
            group_size, max(2, n_classes // 2)), similarity=ev.similarity).assign(method=m) for m in ev.methods]
        sweep = pd.concat(sweeps, ignore_index=True)
        rep.tables["class_sweep"] = sweep[["method"] + [c for c in sweep.columns if c != "method"]]
        rep.captions["class_sweep"] = f"Metrics on C classes sampled at random ({sweep_repeats} repeats, seed {seed})."
        for m, sw in zip(ev.methods, sweeps, strict=True):
            title = f"Metrics against the number of classes ({plot_text(m)})"
            rep.figures[f"class_sweep_{m}"] = sweep_figure(sw, title=title)
    else:
        rep.warnings.append(f"class-count sweep skipped: {n_classes} classes; it needs at least {MIN_SWEEP_CLASSES} "
                            "to show how the metrics move with the number of classes.")


def _generalization(rep: Report, split_evals: dict, methods: list[str], alpha: float, seed: int, unit: str) -> None:
    """Each metric per split and the gap from the reference split (train, else the first)."""
    if split_evals:
        ref = "train" if "train" in split_evals else next(iter(split_evals))
        gens = [split_generalization(split_evals, m, ref, alpha, unit, seed).assign(method=m) for m in methods]
        gen = pd.concat(gens, ignore_index=True)
        rep.tables["generalization"] = gen[["method"] + [c for c in gen.columns if c != "method"]]
        rep.captions["generalization"] = (f"Metrics per split and the gap {ref} minus each other split, with "
                                          f"{100 * (1 - alpha):g}% intervals (unit and n_units: what each rests on, "
                                          "both splits together).")
        for m, g in zip(methods, gens, strict=True):
            rep.figures[f"generalization_{m}"] = generalization_figure(g, list(split_evals),
                                                                       title=f"Metrics per split ({plot_text(m)})")


def _error_reject(rep: Report, ev: Evaluation) -> None:
    """Error-vs-reject curves of the methods with a confidence."""
    ds = ev.dataset
    if ds.has_confidence:
        shared = [m for m in ds.shared_confidence_methods() if m in ev.methods]
        if len(shared) > 1:
            rep.warnings.append(f"one 'confidence' column serves {len(shared)} methods ({', '.join(shared[:4])}"
                                f"{' …' if len(shared) > 4 else ''}): their error-vs-reject curves share one "
                                "ranking of the queries. Give each method its own confidence_<method> array.")
        erc = error_reject_table(ev)
        rep.warnings += erc.notes
        if not len(erc.table):
            return
        rep.tables["erc"] = erc.table
        rep.captions["erc"] = "Error (1 - P@1) of the kept queries after rejecting the least confident fraction."
        rep.figures["erc"] = erc_figure(erc.curves)


def write_report(ev: Evaluation, rep: Report, out: Path, formats: tuple[str, ...] = ("pdf",),
                 style: FigureStyle | None = None, prerendered: Prerender | None = None,
                 provenance: dict | None = None) -> list[Path]:
    """Write the report's files; returns their paths. ``prerendered``: the figures already
    rendered while the report was built (``build_report(..., on_figure=prerendered)``);
    ``provenance``: the block :func:`analysis_core.provenance.provenance` made for this run."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / "summary.json"]
    summary = ev.summary(rep.alpha)
    if (ev.split or "all") in rep.inference:
        summary["inference"] = rep.inference[ev.split or "all"]
    if (ev.split or "all") in rep.families:
        summary["families"] = rep.families[ev.split or "all"]
    if rep.split_evaluations:
        summary["splits"] = {sp: e.summary(rep.alpha) | ({"inference": rep.inference[sp]} if sp in rep.inference
                                                         else {})
                             | ({"families": rep.families[sp]} if sp in rep.families else {})
                             for sp, e in rep.split_evaluations.items()}
    summary["warnings"] = list(dict.fromkeys(ev.warnings() + rep.warnings))  # the evaluation's too (a collapse)
    if provenance is not None:
        summary["provenance"] = provenance
    (out / "summary.json").write_text(json_text(summary))
    write_per_query(ev.per_query_columns(), out)
    written += [out / "per_query.csv", out / "per_query.parquet"]
    for sp, e in rep.split_evaluations.items():
        folder = out / "splits" / file_stem(sp)
        folder.mkdir(parents=True, exist_ok=True)
        write_per_query(e.per_query_columns(), folder)
        written += [folder / "per_query.csv", folder / "per_query.parquet"]
    for name, df in rep.tables.items():
        written += write_table(df, out / "tables", name, rep.captions.get(name),
                               tex=rep.latex.get(name) or paper_latex(name, df, rep.captions.get(name)))
    for name, tex in rep.latex.items():
        if name not in rep.tables:
            (out / "tables" / f"{file_stem(name)}.tex").write_text(tex)
            written.append(out / "tables" / f"{file_stem(name)}.tex")
    if formats:
        written += write_figures(rep.figures, out / "figures", formats, style, prerendered)
    return written
