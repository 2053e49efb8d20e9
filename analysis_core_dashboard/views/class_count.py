"""Class count & group size: metrics on C sampled classes, grouped Recall@K with its interval,
and the sweep curves."""

from __future__ import annotations

import streamlit as st

from analysis_core.figures.class_sweep import SWEEP_METRICS, sweep_figure
from analysis_core_dashboard import cache, components
from analysis_core_dashboard.jobs import Progress
from analysis_core_dashboard.views.common import alpha, current


def sweep_size(n_classes: int) -> int:
    """The sweep's group size: fixed, so that the sliders above never recompute the sweep."""
    return min(10, max(2, n_classes // 2))


SWEEP_LABEL = "Sweeping class counts"


@st.fragment(run_every=0.5)
def sweep_running(progress: Progress) -> None:
    """The running sweep's progress, redrawn every half second; the page reruns once it is done
    (then the sweep is stored and drawn)."""
    if progress.finished:
        st.rerun()
    st.progress(progress.fraction, text=f"{SWEEP_LABEL}: {progress.stage}" if progress.stage else SWEEP_LABEL)
    st.caption("The controls above stay usable meanwhile.")


@st.fragment
def class_sweep(key, ds, method: str, exact: bool, ev) -> None:
    """The sweep over class counts: started in the background the first time (a method's first
    visit runs 20-odd passes), its progress shown while the controls above stay usable; the
    number of repeats reruns this section only."""
    n_all = ds.n_classes
    repeats = st.slider("Repeats per class count", 1, cache.SWEEP_MAX_REPEATS, 3, key="cc-repeats")
    sweep_s = sweep_size(n_all)
    sw = cache.sweep_started(key, ds, method, sweep_s, repeats, exact, ev)
    if isinstance(sw, Progress):
        sweep_running(sw)
        return
    sampled = sw["n_queries"] < sw["of_queries"]
    st.caption(f"C classes sampled at random, {repeats} repeat(s) each; grouped Recall@1 with S = {sweep_s}; "
               "whiskers span the repeats." + (
                   f" Class counts {', '.join(str(c) for c in sorted(set(sw.loc[sampled, 'n_classes'])))}: over "
                   f"{cache.EXACT_ITEMS:,} items, so each repeat ranks a stratified sample of "
                   f"{cache.SAMPLE_QUERIES:,} of its queries (Recall@1, MAP@R, mAP estimated; JSD of their pairs) "
                   f"and grouped Recall@1 at most {cache.SAMPLE_QUERIES:,} of each group's." if sampled.any() else ""))
    title = f"Metrics against the number of classes ({components.plot_text(method)})"
    components.figure(sweep_figure(sw, title=title), "class_sweep", sw)
    st.dataframe(sw.groupby("n_classes")[list(SWEEP_METRICS)]
                 .agg(["mean", "std"]).round(4), width="stretch")


st.title("Class count & group size")
got = current()
if got is not None:
    key, ev = got
    ds = ev.items  # the chosen split's items: classes are sampled within it
    n_all = ds.n_classes
    method = st.selectbox("Method", ev.methods, key="cc_method", bind="query-params")
    c1, c2, c3 = st.columns(3)
    n_classes = components.int_slider("Number of classes C", 2, n_all, n_all, where=c1, key="cc-classes",
                                      bind="query-params", help="evaluate C classes drawn at random (seeded)")
    group_size = components.int_slider("Group size S", 2, min(n_classes, 100), 10, where=c2, key="cc-group",
                                       bind="query-params", help="classes per group for Grouped Recall@K")
    seed = c3.number_input("Seed", 0, 10_000, 0)
    exact = ds.n_items > cache.EXACT_ITEMS and st.toggle(
        "Every query (exact, slower)", False, key="cc-exact",
        help=f"C classes holding more than {cache.EXACT_ITEMS:,} items are evaluated on a stratified sample of "
             f"{cache.SAMPLE_QUERIES:,} of their queries (against all of their items), with intervals; on: every "
             "query, the exact values, a pass over all of their items")
    sub = cache.subset_evaluation(key, ds, method, n_classes, group_size, seed, exact, ev)
    s = sub.summary()
    m = s["methods"][method]
    g = m["grouped_recall_at_k"]
    k1 = g["k"]["1"]
    iv = m.get("intervals", {})

    def interval(name: str) -> str | None:
        return f"{100 * (1 - alpha()):g}% interval [{iv[name]['low']:.4f}, {iv[name]['high']:.4f}]" \
            if name in iv else None

    cols = st.columns(5)
    cols[0].metric("Items", f"{s['dataset']['n_items']:,}")
    cols[1].metric("Recall@1", f"{m['recall_at_k']['1']:.4f}", help=interval("recall_at_1"))
    cols[2].metric("MAP@R", f"{m['map_at_r']:.4f}", help=interval("map_at_r"))
    cols[3].metric(f"Grouped R@1 (S = {group_size})", f"{k1['mean']:.4f}" if k1["mean"] is not None else "–",
                   help=f"{100 * (1 - alpha()):g}% interval over {g['n_groups']} groups")
    cols[4].metric("JSD", f"{m['jsd']:.4f}")
    lo, hi = k1["ci_low"], k1["ci_high"]
    sampled = g["n_observed"] < g["n_queries"]
    st.caption((f"Grouped Recall@1 interval: [{lo:.4f}, {hi:.4f}] over {g['n_groups']} groups; "
                f"{g['n_dropped_classes']} left-over classes dropped." if lo is not None and lo == lo
                else f"{g['n_groups']} group(s): too few for an interval; {g['n_dropped_classes']} classes dropped.")
               + (f" Estimated: each group ranks a stratified sample of at most {g['query_sample']:,} of its "
                  f"queries ({g['n_observed']:,} of {g['n_queries']:,} known), and the interval carries that "
                  "sampling; turn on “Every query” for the exact value." if sampled else ""))
    if "query_sample" in s["dataset"]:
        qs = s["dataset"]["query_sample"]
        st.caption(f"Recall@1, MAP@R and JSD estimated from a stratified sample of {qs['n']:,} of the {qs['of']:,} "
                   f"queries (seed {qs['seed']}) ranked against all {s['dataset']['n_items']:,} items: Recall@1 "
                   f"{interval('recall_at_1')}, MAP@R {interval('map_at_r')}, JSD {interval('jsd')}. "
                   "Turn on “Every query” for the exact values.")
    st.subheader("Sweep over the number of classes")
    class_sweep(key, ds, method, exact, ev)
    i = ev.methods.index(method)  # the methods after this one first, as listed
    cache.prefetch_class_count(key, ds, ev.methods[i + 1:] + ev.methods[:i], n_classes, group_size, seed,
                               sweep_size(n_all), st.session_state.get("cc-repeats", 3), exact, ev)
