"""Statistics: with replicate runs, family comparisons with the run as unit; then one-way tests,
Tukey HSD / Games-Howell, two-way ANOVA, mixed model, paired tests — all from one ``analyse`` call
(the report runs the same)."""

from __future__ import annotations

import math

import streamlit as st

from analysis_core.figures.variability import paired_differences_figure, tukey_figure
from analysis_core.methods import natural_key
from analysis_core.report import mixed_caption
from analysis_core.stats.analysis import QUERY_UNIT_ONLY
from analysis_core.stats.posthoc import MAX_POSTHOC_GROUPS
from analysis_core.stats.runs import GENERALISES as RUN_GENERALISES
from analysis_core.stats.variability import ap_frame, hardest_and_easiest
from analysis_core_dashboard import cache, components
from analysis_core_dashboard.views.common import alpha, current, first_methods, run_counts, runs, unit

EXTREME_CLASSES = 20  # above 2 x this many classes, the picker opens on the hardest and easiest


@st.fragment
def pairwise(res, n_groups: int) -> None:
    """The post-hoc procedure's table and figure: choosing it reruns this section only."""
    post = st.radio("Procedure", ["tukey", "games-howell"], horizontal=True,
                    format_func={"tukey": "Tukey HSD", "games-howell": "Games-Howell (unequal variances)"}.get)
    if post in res.posthoc:
        ph = res.posthoc[post]
        name = "tukey_hsd" if post == "tukey" else "games_howell"
        components.figure(tukey_figure(ph), name, ph.table)
        components.table(ph.table, "pairwise")
    elif n_groups > MAX_POSTHOC_GROUPS:
        st.info(f"No pairwise table: {n_groups} method × class groups (at most {MAX_POSTHOC_GROUPS}). Pick fewer "
                "classes or methods; the tests above and below use every query.")
    else:
        st.info("No pairwise table: fewer than two method × class groups hold two queries, so there is nothing "
                "to compare pairwise.")


@st.fragment
def families(key, ev) -> None:
    """The family comparisons with the run as unit; the checkpoint selection reruns this section only."""
    ds = ev.dataset
    st.subheader(f"Families (unit: run) — {run_counts(ev.design)}")
    select_on = report_on = None
    if ds.split is not None and ev.design.has_steps:
        splits = sorted(set(ds.split.tolist()), key=natural_key)
        c1, c2 = st.columns(2)
        select_on = c1.selectbox("Choose each run's checkpoint on", [None, *splits], format_func=_split_option,
                                 help="The checkpoint with the best mAP on this split, per run (none: its last "
                                      "checkpoint).")
        report_on = c2.selectbox("Report it on", [None, *splits], format_func=_split_option)
        if (select_on is None) != (report_on is None):
            st.info("Choose both splits — where each run's checkpoint is chosen and where it is reported — or "
                    "neither (each run at its last checkpoint).")
            select_on = report_on = None
    ra = runs(key, ev, select_on, report_on)
    components.warnings(ra.warnings)
    chosen = (f"each run at the checkpoint with the best mAP on split '{select_on}', reported on '{report_on}'"
              if select_on else "each run at its last checkpoint")
    st.caption(f"A family (a loss, an architecture) judged by its runs ({chosen}): the mean difference of run means "
               f"(a − b) with its Welch {100 * (1 - ra.alpha):g}% interval, the exact permutation test of the run "
               "means (p_value), Holm across family pairs within each split and metric (p_holm), and the probability "
               "that a run of family_a beats a run of family_b with a stratified bootstrap interval. It generalises "
               f"to {RUN_GENERALISES}.")
    shown = ra.tests[["split", "label", "family_a", "family_b", "n_a", "n_b", "mean_diff", "ci_low", "ci_high",
                      "p_value", "p_holm", "p_welch", "prob_improvement", "pi_low", "pi_high", "test", "note"]]
    if len(shown):
        components.table(shown.rename(columns={"label": "metric"}), "family_tests")
    else:
        st.info("Fewer than two families have two or more runs: there is no family comparison (each family's mean "
                "± sd over runs is on the Overview).")
    if len(ra.selection):
        with st.expander("The checkpoint chosen per run"):
            components.table(ra.selection, "run_selection")
    st.caption("Every test further down compares methods — single trained models — query by query or class by "
               "class: it holds **for these trained models**, not for their training procedures.")


def _split_option(sp: str | None) -> str:
    return "none" if sp is None else f"split: {sp}"


st.title("Variability across classes and methods")
got = current()
if got is not None:
    key, ev = got
    a = alpha()
    if ev.design.has_runs:
        families(key, ev)
    methods = st.multiselect("Methods", ev.methods, default=first_methods(ev), key="stats_methods", bind="query-params")
    ap = ap_frame(ev, methods or ev.methods)
    all_classes = sorted(ap["label"].unique(), key=lambda c: natural_key(str(c)))
    default = hardest_and_easiest(ap, EXTREME_CLASSES)
    classes = st.multiselect("Classes", all_classes, default=default, key="stats_classes", bind="query-params",
                             help=f"Tukey HSD and Games-Howell tables are made for at most {MAX_POSTHOC_GROUPS} "
                                  "method × class groups; every other test uses every selected query.")
    if len(default) < len(all_classes):
        st.caption(f"{len(all_classes):,} classes: the {EXTREME_CLASSES} hardest and {EXTREME_CLASSES} easiest (lowest "
                   "and highest mean AP over the methods) are selected; pick others, or clear the picker for all.")
    subsample = None
    if st.toggle("Balanced subsample (same n queries per class, as Brughi et al.)"):
        subsample = (st.slider("Queries per class", 2, 50, 5), st.number_input("Seed", 0, 10_000, 0))
    selection = (tuple(methods or ev.methods), tuple(classes or all_classes), subsample, unit())
    ap = cache.selection_frame(ap, selection)
    n_groups = ap.groupby(["method", "label"]).ngroups
    st.caption(f"{len(ap)} per-query APs in {n_groups} groups, α = {a}.")
    if subsample is None and set(selection[1]) == set(default):
        # from the page as it opens only: every query, where a new selection costs seconds (a guess
        # made at every move of the other controls would slow the next move down). Started before
        # this selection's statistics, on the core they leave idle (the guess yields to them).
        cache.prefetch_statistics(key, ev, selection)
    res = cache.statistics(key, ev, selection, ap)
    components.warnings(list(res.warnings))

    st.subheader("One-way tests — unit: query")
    if ev.dataset.role is None:
        st.caption(QUERY_UNIT_ONLY[0].upper() + QUERY_UNIT_ONLY[1:])
    components.table(res.one_way.tests, "anova")
    st.subheader("Pairwise comparisons")
    pairwise(res, n_groups)
    if res.two_way is not None:
        st.subheader("Two-way ANOVA: method × class, split-plot (query as whole plot) — unit: query")
        st.caption("These models and this gallery: with leave-one-out the queries of a class share its gallery, so "
                   "these p-values are too small for a claim about the methods (see the method comparisons).")
        components.table(res.two_way, "two_way_anova")
        class_model = getattr(res.mixed, "unit", "query") == "class"
        st.subheader("Mixed model: AP ~ method + (1 | class) + (1 | class:method) + (1 | class:query) — unit: class"
                     if class_model else "Mixed model: AP ~ method + (1 | query) — unit: query")
        if math.isfinite(res.mixed.residual_variance):
            st.caption(mixed_caption(res.mixed))
        else:
            st.caption("Variances not estimated: the model is undefined here (the table's note says why).")
        components.table(res.mixed.table, "mixed_model")
        st.subheader(f"Method comparisons, every metric — unit: {res.unit} ({res.n_units:,} units)")
        if res.unit == "class":
            st.caption("Generalises to new items of new classes: a jackknife over classes (each class deleted from "
                       "the queries and the gallery), the mean difference (a − b) with its "
                       f"{100 * (1 - a):g}% t interval over classes and its p-value; Holm within each metric. It "
                       "uses every class and query of the evaluation, whatever the class picker above selects.")
        else:
            st.caption("Holds for these trained models and this gallery only (queries that share a gallery are "
                       "dependent): sign-flip permutation test for AP, MAP@R, R-Precision and RR; exact McNemar "
                       "test on the discordant counts for P@1 and Recall@K; Holm within each metric; the mean "
                       f"difference (a − b) with its {100 * (1 - a):g}% t interval beside every p-value.")
        ap_rows = res.paired[res.paired["metric"] == "map"]
        components.figure(paired_differences_figure(ap_rows), "paired_differences", ap_rows)
        components.table(res.paired, "paired_tests")
    elif len(selection[0]) < 2:
        st.info("Pick at least two methods for the two-way ANOVA, the mixed model and the paired tests.")
    else:
        st.info("The two-way ANOVA, the mixed model and the paired tests need two methods with scored queries "
                "among the selected classes; here fewer have any.")
