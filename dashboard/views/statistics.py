"""Statistics: one-way tests, Tukey HSD / Games-Howell, two-way ANOVA, mixed model, paired tests."""

from __future__ import annotations

import streamlit as st

from analysis_core.figures.variability import paired_differences_figure, tukey_figure
from analysis_core.stats.variability import (
    MAX_POSTHOC_GROUPS,
    TooManyGroups,
    ap_frame,
    balanced_subsample,
    games_howell,
    mixed_model,
    one_way,
    paired_tests,
    tukey_hsd,
    two_way_anova,
)
from dashboard import components
from dashboard.views.common import alpha, current

st.title("Variability across classes and methods")
got = current()
if got is not None:
    key, ev = got
    a = alpha()
    methods = st.multiselect("Methods", ev.methods, default=ev.methods[:2])
    ap = ap_frame(ev, methods or ev.methods)
    all_classes = sorted(ap["label"].unique())
    default = all_classes if len(all_classes) * max(1, len(methods)) <= MAX_POSTHOC_GROUPS else all_classes[:5]
    classes = st.multiselect("Classes", all_classes, default=default,
                             help=f"pairwise comparisons need at most {MAX_POSTHOC_GROUPS} method × class groups")
    ap = ap[ap["label"].isin(classes or all_classes)]
    if st.toggle("Balanced subsample (same n queries per class, as paper 003)"):
        n = st.slider("Queries per class", 2, 50, 5)
        ap = balanced_subsample(ap, n, seed=st.number_input("Seed", 0, 10_000, 0))
    st.caption(f"{len(ap)} per-query APs in {ap.groupby(['method', 'label']).ngroups} groups, α = {a}.")

    ow = one_way(ap)
    st.subheader("One-way tests")
    components.warnings(ow.warnings)
    components.table(ow.tests, "anova")
    st.subheader("Pairwise comparisons")
    post = st.radio("Procedure", ["Tukey HSD", "Games-Howell (unequal variances)"], horizontal=True)
    try:
        res = tukey_hsd(ap, a) if post == "Tukey HSD" else games_howell(ap, a)
    except TooManyGroups as exc:
        st.info(str(exc))
    else:
        components.figure(tukey_figure(res), "tukey_hsd" if post == "Tukey HSD" else "games_howell", res.table)
        components.table(res.table, "pairwise")
    if len(set(ap["method"])) > 1:
        st.subheader("Two-way ANOVA: method × class")
        components.table(two_way_anova(ap), "two_way_anova")
        st.subheader("Mixed model: AP ~ method + (1 | query)")
        mm = mixed_model(ap)
        components.warnings(mm.warnings)
        st.caption(f"query variance {mm.query_variance:.4g}, residual variance {mm.residual_variance:.4g}")
        components.table(mm.table, "mixed_model")
        st.subheader("Paired tests")
        pt = paired_tests(ap, alpha=a)
        components.figure(paired_differences_figure(pt), "paired_differences", pt)
        components.table(pt, "paired_tests")
    else:
        st.info("Pick at least two methods for the two-way ANOVA, the mixed model and the paired tests.")
