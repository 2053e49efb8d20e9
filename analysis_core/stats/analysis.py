"""The variability statistics in one call: what the report and the Statistics page both run.

:func:`analyse` takes the long per-query table (:func:`~.variability.ap_frame`) and returns one
:class:`VariabilityAnalysis`: one-way tests over groups (classes, or method x class pairs), the
post-hoc pairwise comparisons (capped at :data:`~.posthoc.MAX_POSTHOC_GROUPS` groups — the cap is
stated in ``warnings``, never silent), and, with several methods, the split-plot two-way ANOVA
(query as whole plot), the mixed model and the paired tests, which always use every query.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..errors import InputError
from ..options import check_alpha, check_int
from .class_mixed_model import ClassMixedFit, ClassMixedModelResult, class_mixed_fit
from .mixed_model import MixedFit, MixedModelResult, mixed_fit
from .paired_tests import metric_paired_tests
from .posthoc import PostHocResult, TooManyGroups, check_posthoc, games_howell, tukey_hsd
from .two_way_anova import two_way_anova
from .variability import OneWayResult, balanced_subsample, one_way

if TYPE_CHECKING:
    from .class_jackknife import ClassJackknife

POSTHOC = {"tukey": tukey_hsd, "games-howell": games_howell}


@dataclass(frozen=True)
class VariabilityAnalysis:
    """Every variability statistic of one per-query table. ``posthoc`` maps ``"tukey"`` /
    ``"games-howell"`` to its result (absent when skipped: see ``warnings``); the method
    comparisons are None with one method. ``paired`` has one row per (metric, pair of methods):
    AP only, or every metric of the ``metrics`` table given to :func:`analyse`."""

    alpha: float
    data: pd.DataFrame  # the table analysed (after the balanced subsample, if one was asked for)
    n_groups: int
    one_way: OneWayResult
    posthoc: dict[str, PostHocResult]
    two_way: pd.DataFrame | None
    mixed: MixedModelResult | ClassMixedModelResult | None
    paired: pd.DataFrame | None
    warnings: tuple[str, ...]
    unit: str = "query"  # what the method comparisons generalise over (see UNITS)
    n_units: int = 0  # how many units they rest on

    def summary_frame(self) -> pd.DataFrame:
        """One row per omnibus test and per method comparison: analysis, test/term, statistic,
        p_value, note."""
        rows = [dict(analysis="one-way", test=r.test, statistic=r.statistic, p_value=r.p_value, note=r.note)
                for r in self.one_way.tests.itertuples()]
        if self.two_way is not None:
            rows += [dict(analysis="two-way ANOVA", test=r.term, statistic=r.F, p_value=r.p_value, note=r.note)
                     for r in self.two_way.itertuples() if not r.term.startswith("Residual")]
        if self.mixed is not None:
            rows += [dict(analysis="mixed model", test=r.term, statistic=r.t, p_value=r.p_value, note=r.note)
                     for r in self.mixed.table.itertuples() if r.term != "Intercept"]
        if self.paired is not None:
            rows += [dict(analysis=f"paired {r.metric}: {r.test} (Holm)", test=f"{r.method_a} - {r.method_b}",
                          statistic=r.mean_diff, p_value=r.p_holm, note=r.note)
                     for r in self.paired.itertuples()]
        return pd.DataFrame(rows, columns=["analysis", "test", "statistic", "p_value", "note"])


SHARED_QUERIES = ("the methods answer the same queries, so the one-way tests over method x class groups count each "
                  "query once per method: their class p-values are too small when the methods agree (a copy of a "
                  "method doubles the evidence). The two-way ANOVA is the split-plot table (query as whole plot): "
                  "it tests class on the query means and method, method x class within queries. Method "
                  "differences are also tested by the mixed model and the paired tests, which pair the queries.")


#: the units of inference: what a method comparison generalises over
UNITS = {
    "query": "these trained models and this gallery, new queries of these classes",
    "class": "new items of new classes (the class is the cluster: a jackknife over classes that deletes each "
             "class from the queries and the gallery)",
}


def analyse(ap: pd.DataFrame, alpha: float = 0.05, *, posthoc: tuple[str, ...] = ("tukey", "games-howell"),
            per_class_n: int | None = None, metrics: pd.DataFrame | None = None, n_permutations: int = 10_000,
            seed: int = 0, value: str = "ap", unit: str | None = None, jackknife=None) -> VariabilityAnalysis:
    """Run the variability statistics on ``ap`` (columns method, query, label, ``value``).

    ``per_class_n`` first draws a balanced subsample of that many queries per class (seeded, the
    same queries for every method). ``posthoc`` chooses the pairwise procedures. ``metrics`` (the
    long table of :func:`~.variability.metric_frame`) gives every metric its paired test between
    methods; without it only ``value`` is tested. ``unit`` chooses what the method comparisons
    generalise over (:data:`UNITS`): ``"class"`` takes them from ``jackknife`` (the evaluation's
    :meth:`~analysis_core.evaluation.Evaluation.class_jackknife`), ``"query"`` tests the queries of
    these models; by default the class when ``jackknife`` is given, else the query, and a warning says
    which (a table alone cannot say how its queries depend on each other). Never raises on
    degenerate data: undefined statistics carry their reason in their ``note`` and in
    ``warnings``. The same as ``prepare(...).at(alpha)``.
    """
    _check_alpha(alpha)
    return prepare(ap, posthoc=posthoc, per_class_n=per_class_n, metrics=metrics, n_permutations=n_permutations,
                   seed=seed, value=value, unit=unit, jackknife=jackknife).at(alpha)


def _check_alpha(alpha: float) -> None:
    check_alpha(alpha)


@dataclass(frozen=True)
class PreparedAnalysis:
    """The part of :func:`analyse` that the significance level does not change (the one-way tests,
    two-way ANOVA, the mixed model's fit, the paired tests' input); :meth:`at` adds the rest (post-hoc
    tables, intervals, decisions) for one ``alpha``. A dashboard keeps it per selection, so that a
    change of α costs only :meth:`at`."""

    data: pd.DataFrame
    one_way: OneWayResult
    two_way: pd.DataFrame | None
    mixed: MixedFit | ClassMixedFit | None
    metrics: pd.DataFrame | None  # the paired tests' long table (several methods only)
    head_warnings: tuple[str, ...]  # subsample, one-way tests and their advice
    two_way_warnings: tuple[str, ...]
    posthoc: tuple[str, ...]
    n_permutations: int
    seed: int
    value: str
    unit: str = "query"
    jackknife: ClassJackknife | None = None  # with unit "class"

    def at(self, alpha: float) -> VariabilityAnalysis:
        """The full analysis at significance level ``alpha``."""
        _check_alpha(alpha)
        warn = list(self.head_warnings)
        post: dict[str, PostHocResult] = {}
        names = self.one_way.groups["group"].tolist()  # the groups the procedures would make
        skipped: dict[str, str] = {}
        for name in self.posthoc:
            try:
                check_posthoc(names)  # their first check, without grouping the table again to fail it
                res = POSTHOC[name](self.data, alpha, self.value)
            except TooManyGroups as exc:
                skipped[name] = str(exc)
                continue
            post[name] = res
            warn += [w for w in res.warnings if w not in warn]
        if skipped:  # one warning for the procedures skipped for one reason
            warn.append(f"pairwise comparisons ({', '.join(skipped)}) skipped: {next(iter(skipped.values()))}")
        mm = pt = None
        if self.mixed is not None:
            warn += self.two_way_warnings
            mm = self.mixed.result(alpha)
            warn += mm.warnings
            pt = self._comparisons(alpha)
            if self.unit == "class" and self.jackknife is not None and not self.jackknife.why:
                from .class_jackknife import too_few_text, too_few_to_decide

                n = self.jackknife.n_units
                if too_few_to_decide(n, alpha):
                    warn.append(f"class-level tests cannot reach α here: {too_few_text(n, alpha)}.")
        elif len(self.data):
            warn.append("one method: two-way ANOVA, mixed model and paired tests need at least two.")
        else:
            warn.append("no scored query: there is nothing to compare between methods.")
        n_units = 0 if pt is None or not len(pt) else int(pt["n_units"].max())
        # every other table here is over the queries of these classes: say so in each
        by_query = {"unit": "query", "n_units": int(self.data["query"].nunique())}
        one = replace(self.one_way, tests=self.one_way.tests.assign(**by_query))
        post = {k: replace(v, table=v.table.assign(**by_query)) for k, v in post.items()}
        if mm is not None and "unit" not in mm.table.columns:
            mm = replace(mm, table=mm.table.assign(**by_query))
        elif mm is not None and self.unit == "class":
            mm = replace(mm, table=descriptive(mm.table))
        return VariabilityAnalysis(alpha, self.data, len(self.one_way.groups), one, post, self.two_way, mm,
                                   pt, tuple(dict.fromkeys(warn)), self.unit, n_units)

    def _comparisons(self, alpha: float) -> pd.DataFrame:
        """The method comparisons of every metric at this analysis's unit."""
        if self.unit == "query":
            return metric_paired_tests(self.metrics, alpha, self.n_permutations, self.seed)
        jk = self.jackknife
        assert jk is not None  # unit "class": prepared with its jackknife
        methods = sorted(set(self.data["method"].astype(str)) & set(jk.methods))
        pairs = [(a, b) for i, a in enumerate(methods) for b in methods[i + 1:]]
        asked = list(dict.fromkeys(self.metrics["metric"])) if self.metrics is not None else ["map"]
        return jk.differences(alpha, pairs=pairs, metrics=[m for m in asked if m in jk.metrics])


def prepare(ap: pd.DataFrame, *, posthoc: tuple[str, ...] = ("tukey", "games-howell"),
            per_class_n: int | None = None, metrics: pd.DataFrame | None = None, n_permutations: int = 10_000,
            seed: int = 0, value: str = "ap", unit: str | None = None, jackknife=None) -> PreparedAnalysis:
    """The α-free part of :func:`analyse` (same parameters), to be completed by
    :meth:`PreparedAnalysis.at`."""
    unit = ("class" if jackknife is not None else "query") if unit is None else unit
    if unit not in UNITS:
        raise InputError("analyse", f"unknown unit {unit!r}.", f"use one of {sorted(UNITS)}.")
    if unit == "class" and jackknife is None and ap["method"].nunique() > 1:
        raise InputError("analyse", "unit 'class' needs the evaluation's jackknife over classes.",
                         "pass jackknife=ev.class_jackknife() (ev: the Evaluation), or unit='query'.")
    if isinstance(posthoc, str):  # "tukey": one procedure, not its letters
        posthoc = (posthoc,)
    unknown = set(posthoc) - set(POSTHOC)
    if unknown:
        raise InputError("analyse", f"unknown post-hoc procedure(s) {sorted(unknown)}.",
                         f"use some of {sorted(POSTHOC)}.")
    missing = [c for c in ("method", "query", "label", value) if c not in ap.columns]
    if missing:
        raise InputError("analyse", f"the table has no column(s) {missing} (columns: {list(ap.columns)[:10]}).",
                         "give one row per method and query with columns method, query, label and the value "
                         "(Evaluation.per_query or metric_frame make it).")
    n_permutations = check_int(n_permutations, "n_permutations", 1)
    per_class_n = check_int(per_class_n, "per_class_n (queries per class)", 1, none=True)
    seed = check_int(seed, "seed", 0, maximum=2**128)
    for col in ("method", "label", "query"):
        gone = ap[col].isna().to_numpy()
        if gone.any():
            raise InputError("analyse", f"{int(gone.sum())} row(s) have no {col} (NaN or None; first at row "
                             f"{int(np.argmax(gone))}).", f"give every row a {col}, or drop those rows first.")
    warn: list[str] = []
    values = pd.to_numeric(ap[value], errors="coerce").to_numpy(np.float64)
    finite = np.isfinite(values)
    if not finite.all():  # a query without positives has no AP: no test may take it as a number
        warn.append(f"{int((~finite).sum())} of {finite.size} rows have no finite '{value}' (e.g. queries without "
                    "positives) and were left out of every test.")
        ap = ap[finite]
        if metrics is not None and "value" in metrics.columns:
            metrics = metrics[np.isfinite(pd.to_numeric(metrics["value"], errors="coerce").to_numpy(np.float64))]
    if per_class_n:
        short = int((ap.groupby("label")["query"].nunique() < per_class_n).sum())
        ap = balanced_subsample(ap, per_class_n, seed)
        warn.append(f"statistics use a balanced subsample of {per_class_n} queries per class (seed {seed})"
                    + (f"; {short} class(es) have fewer and keep all of theirs, so the groups are not all equal."
                       if short else "."))
    ow = one_way(ap, value)
    warn += ow.warnings
    if ap["method"].nunique() > 1:
        warn.append(_unit_text(unit, jackknife, per_class_n, ap))
    if ow.advice:
        warn.append(ow.advice)
    two = mm = None
    two_warn: list[str] = []
    if ap["method"].nunique() > 1:
        if ap.groupby("query")["method"].nunique().max() > 1:
            warn.append(SHARED_QUERIES)
        two = two_way_anova(ap, value, two_warn)
        # the class unit's model has the class x method variance as the method effects' error
        mm = class_mixed_fit(ap, value) if unit == "class" else mixed_fit(ap, value)
        if metrics is None:
            metrics = ap[["method", "query", "label"]].assign(metric="map" if value == "ap" else value,
                                                              value=ap[value])
        elif per_class_n:
            metrics = metrics[metrics["query"].isin(ap["query"])]
    else:
        metrics = None
    return PreparedAnalysis(ap, ow, two, mm, metrics, tuple(warn), tuple(two_warn), tuple(posthoc), n_permutations,
                            seed, value, unit, jackknife)


#: why the class-level mixed model is shown without tests in the analysis (measured with
#: benchmarks/calibration.py; the function class_mixed_model itself still gives them)
MIXED_DESCRIPTIVE = ("descriptive: at the class unit its t tests rejected 8.3 % of null runs at α = 0.05 (leave-one-"
                     "out, 8 classes x 8 items; the model has no term for the negatives that classes share), so "
                     "no p-value or interval is given here; the method comparisons (jackknife over classes) are "
                     "the class-unit test")


def descriptive(table: pd.DataFrame) -> pd.DataFrame:
    """The class mixed model's table without its tests (:data:`MIXED_DESCRIPTIVE`): estimates,
    standard errors and df stay; the variance components are the model's value here."""
    out = table.assign(p_value=np.nan, ci_low=np.nan, ci_high=np.nan)
    fitted = out["note"].astype(str) == ""
    out.loc[fitted, "note"] = MIXED_DESCRIPTIVE
    return out


#: the tests that exist at the query unit only, said when every query is also gallery
QUERY_UNIT_ONLY = ("the one-way tests, the pairwise (post hoc) tables and the two-way ANOVA are at the query unit "
                   "(these classes, this gallery); in leave-one-out every query is also gallery, so they describe "
                   "these items rather than test a claim about new ones: under leave-one-out their null rejection "
                   "at α = 0.05 was measured at 0.27-0.88 (docs/statistics.md).")


def _unit_text(unit: str, jackknife, per_class_n: int | None, ap: pd.DataFrame) -> str:
    """What the method comparisons generalise over, said once above them."""
    if unit == "query":
        return ("method comparisons at the query unit: they hold for " + UNITS["query"] + "; queries that share a "
                "gallery (leave-one-out) are dependent, so these p-values are too small for a claim about the "
                "methods (use the class unit: analyse(..., jackknife=ev.class_jackknife())).")
    text = f"method comparisons at the class unit ({jackknife.n_units} units): they hold for {UNITS['class']}."
    if jackknife.why:
        text += f" Here they are {jackknife.why}."
    if per_class_n or ap["label"].nunique() < jackknife.n_classes:
        text += " They use every class and query of the evaluation, not only the selected subset."
    return text
