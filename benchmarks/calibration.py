"""Calibration of the tests and intervals the product reports by default, measured by simulation
through the public API on embeddings (not on tables): the null rejection rate of every method
comparison, the coverage of every interval, each with its 95 % Clopper-Pearson interval, and the
power at one stated effect.

    python benchmarks/calibration.py                      # 400 replicates per scenario (a few minutes)
    python benchmarks/calibration.py --replicates 50 --scenarios loo_8x8,qg_shared
    python benchmarks/calibration.py --scenarios loo_20x4,loo_60x4 --groups 20,50,C --class-only

Scenarios (classes x items per class, dimension 16; class centres N(0, I), items = centre +
N(0, 0.9^2 I); each method adds its own noise to that base set):

* ``loo_8x8`` / ``loo_20x4``: leave-one-out; two methods, base + N(0, 0.6^2) each (equally good).
  Any ``loo_<C>x<n>`` is the same design with C classes of n items (``loo_60x4``, ``loo_100x3``,
  ``loo_200x3``: more classes than the default 20 jackknife groups).
* ``qg_shared``: query/gallery (3 queries per class, the rest gallery); the gallery is the same
  vectors for both methods, only the queries carry method noise.
* ``qg_gallery_noise``: query/gallery, every item carries each method's own noise.
* ``unbalanced``: leave-one-out, 10 classes of 3 to 14 items.
* ``three_classes``: leave-one-out, 3 classes x 16 items.
* ``ten_methods``: leave-one-out 8 x 8, ten equally good methods (45 pairs; Holm within a metric:
  the family-wise rate is what is reported).
* ``splits``: two splits (train / test) of 8 classes x 8 items each, disjoint classes, the same
  generator: the generalization gap's null.
* ``runs_3x3`` / ``runs_5x5``: training runs as replicates. Leave-one-out 8 x 8; two families
  from one training procedure, 3 (5) runs each: run r's vectors are ``base @ (I + 0.25 G_r /
  sqrt(16)) + N(0, 0.5^2)`` with its own G_r ~ N(0, 1) (seed noise: a distortion of the space and
  item noise). Outputs: the default family comparison (run unit: exact permutation of run
  means), the Welch t beside it, and — for contrast — the tests between the first run of each
  family at the query and class units (they answer "these two trained models", not "these two
  procedures"). Effect: family b's item noise 0.35 instead of 0.5. Coverage, under the null: the
  Welch interval of the difference (truth 0) and the probability-of-improvement interval (truth
  1/2: one procedure twice), and each family's t interval over runs (the run summary; the
  checkpoint curves' bands are the same interval at each step) against the procedure's expected
  value on these test items, the mean of 100 further runs on the same items.

The power row ("effect") gives method b noise of scale 0.9 (``--effect-noise``) instead of 0.6 (mAP lower by about
0.05-0.1, depending on the scenario).

Truth for coverage: the expected value of each metric for data of that design, estimated by the
mean over ``--truth`` extra replicates (evaluations only).

``--groups`` (default: the tool's, ``DEFAULT_MAX_GROUPS``): the number G of delete-a-group jackknife
groups of classes behind every class-unit output, set as ``jackknife_groups`` of the evaluations and
``max_groups`` of ``class_jackknife``; a comma-separated list runs each G on the same replicates
(same seeds: the rows of two G are paired), ``C`` is delete-one-class (G = the number of classes);
a G at or above the number of classes is delete-one-class. The table then has a ``groups`` column
(the G used). ``--class-only`` leaves out the outputs that do not depend on G (query-unit tests,
two-way ANOVA, class mixed model).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import analysis_core as ac  # noqa: E402
from analysis_core.stats import analyse  # noqa: E402
from analysis_core.stats.class_jackknife import DEFAULT_MAX_GROUPS  # noqa: E402
from analysis_core.stats.class_mixed_model import class_mixed_model  # noqa: E402
from analysis_core.stats.generalization import split_generalization  # noqa: E402
from analysis_core.stats.paired_tests import metric_paired_tests  # noqa: E402
from analysis_core.stats.variability import ap_frame, metric_frame  # noqa: E402

DIM, CENTRE, ITEM, NOISE, EFFECT_NOISE = 16, 1.0, 0.9, 0.6, 0.9
METRICS = ("map", "map_at_r", "r_precision", "mrr", "precision_at_1", "recall_at_2", "recall_at_4")


def _base(rng, sizes):
    y = np.repeat(np.arange(len(sizes)), sizes)
    return y, rng.normal(0, CENTRE, (len(sizes), DIM))[y] + rng.normal(0, ITEM, (y.size, DIM))


RUN_DISTORTION, RUN_NOISE, RUN_EFFECT_NOISE = 0.25, 0.5, 0.35
TRUTH_RUNS = 100  # further runs per replicate whose mean is the expected value the run interval is about


def _train(rng, base, noise: float) -> np.ndarray:
    """One training run's vectors of the base items: a seeded distortion of the space and item noise."""
    m = np.eye(DIM) + RUN_DISTORTION * rng.normal(0, 1, (DIM, DIM)) / np.sqrt(DIM)
    return (base @ m + rng.normal(0, noise, base.shape)).astype(np.float32)


def make_runs(n_runs: int, seed: int, effect: bool = False, truth_runs: int = 0) -> dict:
    """One replicate of a runs scenario: families a and b with ``n_runs`` runs each; with
    ``truth_runs``, as many further runs of family a's procedure on the same items (``truth``),
    whose mean estimates what the run-unit interval is about: the procedure's expected value on
    these test items (the runs vary, the items do not)."""
    rng = np.random.default_rng(seed)
    y, base = _base(rng, [8] * 8)
    X = {}
    for fam in ("a", "b"):
        noise = RUN_EFFECT_NOISE if effect and fam == "b" else RUN_NOISE
        for r in range(n_runs):
            X[f"{fam}_seed{r}"] = _train(rng, base, noise)
    extra = {f"t{r}": _train(rng, base, RUN_NOISE) for r in range(truth_runs)}
    return {"X": X, "y": y, "kw": {}, "truth": extra}


def replicate_runs(n_runs: int, seed: int, alpha: float, effect: bool, groups: int = DEFAULT_MAX_GROUPS) -> dict:
    """The run-level comparison of families a and b, and the per-model tests of their first runs."""
    d = make_runs(n_runs, seed, effect, 0 if effect else TRUTH_RUNS)
    ev = ac.evaluate(d["X"], d["y"])
    fam = ev.families(alpha, seed=seed)
    tests = fam.tests
    out: dict = {}
    for r in tests[tests["metric"].isin(METRICS)].itertuples():
        out[("reject", r.metric, "run")] = bool(r.p_value < alpha)
        out[("reject", f"{r.metric} Welch t (not the default)", "run")] = bool(r.p_welch < alpha)
        if not effect:  # the same procedure twice: the difference is 0, the probability of improvement 1/2
            out[("covers", f"{r.metric} difference interval (Welch)", "run")] = bool(r.ci_low <= 0 <= r.ci_high)
            out[("covers", f"{r.metric} probability of improvement interval", "run")] = bool(
                r.pi_low <= 0.5 <= r.pi_high)
            out[("covers", f"{r.metric} probability of improvement bootstrap interval (not the default)", "run")] = \
                bool(r.pi_boot_low <= 0.5 <= r.pi_boot_high)
    if d["truth"]:  # each family's interval over runs against the procedure's expected value on these items
        truth = ac.evaluate(d["truth"], d["y"]).summary_frame().mean(numeric_only=True)
        for r in fam.summary[fam.summary["metric"].isin(METRICS)].itertuples():
            out[("covers", f"{r.metric} mean interval (each family)", "run")] = bool(
                r.ci_low <= truth[r.metric] <= r.ci_high)
    two = ac.evaluate({k: d["X"][k] for k in ("a_seed0", "b_seed0")}, d["y"], jackknife_groups=groups)
    for metric, part in metric_paired_tests(metric_frame(two, metrics=list(METRICS)), alpha).groupby("metric"):
        out[("reject", f"{metric} first runs (these models)", "query")] = bool(part["reject"].any())
    jk = two.class_jackknife(max_groups=groups)
    for metric, part in jk.differences(alpha, metrics=[m for m in METRICS if m in jk.metrics]).groupby("metric"):
        out[("reject", f"{metric} first runs (these models)", "class")] = bool(part["reject"].any())
    return out


def sizes_of(scenario: str) -> list[int]:
    """Items per class of a scenario's design (``loo_<C>x<n>``: C classes of n items)."""
    loo = re.fullmatch(r"loo_(\d+)x(\d+)", scenario)
    if loo:
        return [int(loo[2])] * int(loo[1])
    return {"ten_methods": [8] * 8, "qg_shared": [8] * 8, "qg_gallery_noise": [8] * 8, "three_classes": [16] * 3,
            "splits": [8] * 16, "unbalanced": [3, 4, 5, 6, 7, 8, 10, 11, 13, 14], "runs_3x3": [8] * 8,
            "runs_5x5": [8] * 8}[scenario]


def make(scenario: str, seed: int, effect: bool = False, effect_noise: float = EFFECT_NOISE) -> dict:
    """One replicate's data: methods, labels and the evaluate() keywords (with ``effect``, method
    b's noise has sd ``effect_noise``)."""
    rng = np.random.default_rng(seed)
    n_methods = 10 if scenario == "ten_methods" else 2
    sizes = sizes_of(scenario)
    y, base = _base(rng, sizes)
    kw: dict = {}
    scales = [NOISE] * n_methods
    if effect:
        scales[1] = effect_noise
    noisy = np.ones(y.size, bool)
    if scenario.startswith("qg"):
        role = np.where(np.arange(y.size) % sizes[0] < 3, "query", "gallery")
        kw["role"] = role
        if scenario == "qg_shared":
            noisy = role == "query"
    if scenario == "splits":
        kw["split"] = np.where(y < 8, "train", "test")
    names = [chr(ord("a") + i) for i in range(n_methods)]
    X = {}
    for name, s in zip(names, scales, strict=True):
        x = base.copy()
        x[noisy] += rng.normal(0, s, (int(noisy.sum()), DIM))
        X[name] = x.astype(np.float32)
    return {"X": X, "y": y, "kw": kw}


def clopper_pearson(k: int, n: int) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return ci.low, ci.high


def replicate(scenario: str, seed: int, alpha: float, effect: bool, groups: int = DEFAULT_MAX_GROUPS,
              class_only: bool = False, effect_noise: float = EFFECT_NOISE) -> dict:
    """The default outputs of one replicate: per metric, whether the class-unit comparison rejected
    (family-wise over pairs after Holm), whether the query-unit one did, and each method's
    class-unit interval; ``groups``: the jackknife's G; ``class_only``: the class-unit outputs only."""
    d = make(scenario, seed, effect, effect_noise)
    out: dict = {}
    if scenario == "splits":
        split = d["kw"]["split"]
        evs = {sp: ac.evaluate(d["X"], d["y"], split=split, within_split=sp, group_size=4, seed=seed,
                               jackknife_groups=groups)
               for sp in ("train", "test")}
        gen = split_generalization(evs, "a", "train", alpha, unit="class")
        for r in gen.itertuples():
            lo, hi = getattr(r, "gap_train_minus_test_ci_low", np.nan), getattr(r, "gap_train_minus_test_ci_high",
                                                                                 np.nan)
            if np.isfinite(lo):
                out[("gap covers 0", r.metric, r.unit)] = bool(lo <= 0 <= hi)
        return out
    ev = ac.evaluate(d["X"], d["y"], jackknife_groups=groups, **d["kw"])
    jk = ev.class_jackknife(max_groups=groups)
    diffs = jk.differences(alpha, metrics=[m for m in METRICS if m in jk.metrics])
    for metric, part in diffs.groupby("metric"):
        out[("reject", metric, "class")] = bool(part["reject"].any())
    iv = jk.intervals(alpha)
    for r in iv[iv["metric"].isin(METRICS)].itertuples():
        out[("interval", r.metric, r.method)] = (r.ci_low, r.ci_high)
    if class_only:
        return out
    q = metric_paired_tests(metric_frame(ev, metrics=list(METRICS)), alpha)
    for metric, part in q.groupby("metric"):
        out[("reject", metric, "query")] = bool(part["reject"].any())
    # the rest of the default statistics page / report: the class-unit mixed model's method terms (any
    # term below alpha: the family-wise rate) and the split-plot ANOVA's terms (query unit)
    res = analyse(ap_frame(ev), alpha, jackknife=jk)
    # the class mixed model's own tests (the analysis shows it without them: they do not hold α)
    mm = class_mixed_model(ap_frame(ev), alpha).table
    terms = mm[mm["term"] != "Intercept"]
    if terms["p_value"].notna().any():
        out[("reject", "mixed model method terms (not reported)", "class")] = bool((terms["p_value"] < alpha).any())
    for r in res.two_way.itertuples():  # (the class term has no null here: class centres are drawn, classes differ)
        if np.isfinite(r.p_value) and r.term != "class":
            out[("reject", f"two-way {r.term}", "query")] = bool(r.p_value < alpha)
    return out


def truth(scenario: str, n: int, start: int) -> dict:
    """Expected summary value of each (method, metric) for the design, by Monte Carlo."""
    acc = defaultdict(list)
    for seed in range(start, start + n):
        d = make(scenario, seed)
        sf = ac.evaluate(d["X"], d["y"], jackknife_groups=None, **d["kw"]).summary_frame()
        for r in sf.to_dict("records"):
            for m in METRICS:
                acc[(r["method"], m)].append(r[m])
    return {k: float(np.mean(v)) for k, v in acc.items()}


def run(scenario: str, replicates: int, alpha: float, n_truth: int, groups: int = DEFAULT_MAX_GROUPS,
        class_only: bool = False, true: dict | None = None, effect_replicates: int | None = None,
        effect_noise: float = EFFECT_NOISE) -> list[dict]:
    """The table's rows of one scenario at G = ``groups``; ``true``: the expected values (computed
    when None); ``effect_replicates``: replicates of the power rows (default: ``replicates``);
    ``effect_noise``: method b's noise sd in the power rows."""
    rows = []
    n_effect = replicates if effect_replicates is None else effect_replicates
    if scenario.startswith("runs_"):
        n_runs = int(scenario.split("x")[-1])
        null = [replicate_runs(n_runs, s, alpha, False, groups) for s in range(replicates)]
        power = [replicate_runs(n_runs, 10**6 + s, alpha, True, groups) for s in range(n_effect)]
    else:
        null = [replicate(scenario, s, alpha, False, groups, class_only) for s in range(replicates)]
        power = [replicate(scenario, 10**6 + s, alpha, True, groups, class_only, effect_noise)
                 for s in range(n_effect)]
    keys = sorted({k for r in null for k in r if k[0] in ("reject", "gap covers 0", "covers")})
    for key in keys:
        hits = [r[key] for r in null if key in r]
        k, n = int(np.sum(hits)), len(hits)
        lo, hi = clopper_pearson(k, n)
        kind = "null rejection" if key[0] == "reject" else "coverage"
        pw = [r[key] for r in power if key in r]
        rows.append(dict(scenario=scenario, groups=groups, output=(key[1] if key[1].startswith(("two-way", "mixed")) or
                                                    "(" in key[1] else f"{key[1]} comparison")
                         if key[0] == "reject" else key[1] if key[0] == "covers" else
                         f"{key[1]} gap interval", unit=key[2], measure=kind, rate=k / n, ci_low=lo, ci_high=hi,
                         n=n, power=float(np.mean(pw)) if pw and key[0] == "reject" else np.nan))
    if scenario != "splits" and not scenario.startswith("runs_"):
        true = truth(scenario, n_truth, 2 * 10**6) if true is None else true
        cover = defaultdict(list)
        for r in null:
            for key, (lo, hi) in ((k, v) for k, v in r.items() if k[0] == "interval"):
                if np.isfinite(lo):
                    cover[key[1]].append(lo <= true[(key[2], key[1])] <= hi)
        for metric, hits in sorted(cover.items()):
            k, n = int(np.sum(hits)), len(hits)
            lo, hi = clopper_pearson(k, n)
            rows.append(dict(scenario=scenario, groups=groups, output=f"{metric} interval (each method)", unit="class",
                             measure="coverage", rate=k / n, ci_low=lo, ci_high=hi, n=n, power=np.nan))
    return rows


SCENARIOS = ("loo_8x8", "loo_20x4", "qg_shared", "qg_gallery_noise", "unbalanced", "three_classes", "ten_methods",
             "splits", "runs_3x3", "runs_5x5")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--replicates", type=int, default=400)
    p.add_argument("--truth", type=int, default=1000, help="replicates for the expected values (coverage)")
    p.add_argument("--alpha", type=float, default=0.05)
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--effect-replicates", type=int, default=None,
                   help="replicates of the power rows (default: --replicates)")
    p.add_argument("--effect-noise", type=float, default=EFFECT_NOISE,
                   help="method b's noise sd in the power rows (not the runs scenarios)")
    p.add_argument("--groups", default=str(DEFAULT_MAX_GROUPS),
                   help="jackknife groups of classes G, comma-separated (each on the same replicates); "
                        "C: one group per class (delete-one-class)")
    p.add_argument("--class-only", action="store_true",
                   help="only the class-unit outputs (the query-unit tests, two-way ANOVA and mixed model do not "
                        "depend on G)")
    p.add_argument("--out", default=None, help="also write the table as CSV")
    args = p.parse_args(argv)
    import pandas as pd

    rows = []
    for sc in args.scenarios.split(","):
        n_classes = len(sizes_of(sc))
        true = None
        for g in args.groups.split(","):
            groups = n_classes if g.strip().upper() == "C" else min(int(g), n_classes)
            if not sc.startswith(("runs_", "splits")) and true is None:  # one truth for every G
                true = truth(sc, args.truth, 2 * 10**6)
            t = time.time()
            rows += run(sc, args.replicates, args.alpha, args.truth, groups, args.class_only, true,
                        args.effect_replicates, args.effect_noise)
            print(f"# {sc}, G = {groups}: {time.time() - t:.0f} s", file=sys.stderr, flush=True)
            if args.out:  # each scenario and G as it ends: a long run keeps what it measured
                pd.DataFrame(rows).to_csv(args.out, index=False)
    table = pd.DataFrame(rows)
    bound = stats.binom.ppf(0.975, args.replicates, args.alpha) / args.replicates
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\nα = {args.alpha}, {args.replicates} replicates; upper 95 % binomial bound of α: {bound:.3f}")
    if args.out:
        table.to_csv(args.out, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
