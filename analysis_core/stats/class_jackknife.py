"""Inference at the class unit: a delete-a-group jackknife over classes.

In leave-one-out retrieval (and whenever queries share a gallery) per-query values are dependent:
every query is gallery for the other queries of its class, and every class's items are negatives
in every other class's rankings. A test over queries then answers "these embeddings, this
gallery", and claims significance between equally good methods far too often (0.18-0.24 at
α = 0.05, measured). A researcher's claim is about new items of new classes: the class is the
cluster. Taking the class means of the per-query values removes the dependence inside a class but
not the shared negatives (0.065-0.071, measured); deleting a class from the queries **and** from
the gallery captures both (Quenouille-Tukey jackknife; for clustered data, delete-a-group, e.g.
Shao & Tu, "The Jackknife and Bootstrap", Springer, 1995, §5.2; Efron & Stein, "The jackknife
estimate of variance", Annals of Statistics, 1981, for why it errs on the conservative side).

Definitions, for one metric m and one method (every per-query mean the tool reports: mAP, MAP@R,
R-Precision, MRR, P@k, Recall@K, nDCG):

* θ = the summary value (mean over the scored queries of the full evaluation).
* The C classes are split into G groups: one class each when C <= ``max_groups`` (the
  delete-one-class jackknife), else ``max_groups`` groups of near-equal size drawn with ``seed``.
* θ_(g) = the same mean when the classes of group g are removed from the queries and the gallery
  (what a pass on the remaining items with the same settings gives).
* pseudo-values P_g = G θ - (G - 1) θ_(g); standard error se = sd(P) / sqrt(G), i.e.
  se² = (G - 1)/G Σ_g (θ_(g) - mean θ_(·))².
* interval: θ ± t_{1-α/2, G-1} se (unit "class", n_units = G); for hit rates (P@1, Recall@K) and
  for means so near 0 or 1 that n min(θ, 1 - θ) < 10 (n scored queries) the Korn-Graubard interval
  with that variance and df (Clopper-Pearson with the effective sample size, capped at n): a t
  interval of a hit rate near 1 collapses to a point when every replicate is all hits (measured
  coverage of Recall@4 0.25-0.48 before).
* a difference between two methods is the same with θ = θ_a - θ_b and θ_(g) = θ_a(g) - θ_b(g)
  (both methods answer the same queries against the same gallery in every replicate); its p-value
  is the jackknife t test (G - 1 df), below α exactly when the interval excludes 0. With so few
  groups that no distribution-free test could reach α (2 / 2^G > α: G <= 5 at α = 0.05) no p-value
  is given: the table says so and still gives the interval.

Measured (``benchmarks/calibration.py``): the sign-flip test of the pseudo-values is *not* valid
here (null rejection 0.087-0.136 at α = 0.05 on leave-one-out 8 x 8: the pseudo-values' mean is the
bias-corrected estimate, far noisier than θ when deleting a class changes every ranking), the t
test centred on θ is (0.003-0.036, conservative).

The replicates come from the evaluation's own passes: deleting a group removes its queries and,
for every other query, only negatives, so the pass counts each query's negatives per group and
every replicate follows exactly (:mod:`analysis_core.engine.replicates`; the G passes on the
remaining items that it replaced are the tests' oracle, equal to 1e-12). They are held at every
cutoff up to 32 besides the evaluation's (:class:`ClassReplicates`), so that new cutoffs K are a
view of them; the level α enters only in the accessors (:meth:`ClassJackknife.intervals`,
:meth:`ClassJackknife.differences`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..numerics import fsum_mean
from ..options import check_alpha, check_int
from .quantiles import t_quantile
from .sampling import korn_graubard

if TYPE_CHECKING:
    import pandas as pd

UNIT = "class"
DEFAULT_MAX_GROUPS = 20  # passes per method; G - 1 = 19 df is within 5 % of the normal quantile
MIN_CLASSES = 3  # removing one of two classes leaves one: no retrieval problem is left to vary


TEST = "jackknife t over classes"
ROUNDING = 1e-12  # differences of means this small are rounding, not a difference
DIFFERENCE_COLUMNS = ["metric", "method_a", "method_b", "mean_diff", "se", "ci_low", "ci_high", "df", "test",
                      "p_value", "unit", "n_units", "note", "p_holm", "reject"]


@dataclass(frozen=True)
class ClassJackknife:
    """Jackknife replicates of every per-query summary metric of every method.

    ``estimate``: (methods, metrics) full-evaluation means; ``replicates``: (groups, methods,
    metrics) the means with each group of classes deleted; ``groups``: the class labels of each
    group. ``why`` says why class-level inference is undefined (empty when defined)."""

    methods: list[str]
    metrics: list[str]
    kinds: list[str]
    estimate: np.ndarray
    replicates: np.ndarray
    groups: list[list]
    n_classes: int
    why: str = ""
    notes: list[str] = field(default_factory=list)
    n_scored: tuple[int, ...] = ()  # scored queries of each method (the Korn-Graubard cap)

    @property
    def n_units(self) -> int:
        return len(self.groups)

    def _se(self, theta_g: np.ndarray) -> np.ndarray:
        g = theta_g.shape[0]
        centred = theta_g - theta_g.mean(axis=0)
        return np.sqrt((g - 1) / g * np.sum(centred**2, axis=0))

    def intervals(self, alpha: float = 0.05) -> pd.DataFrame:
        """method, metric, estimate, se, ci_low, ci_high, df, unit, n_units, note: each summary
        metric with its 1 - alpha jackknife t interval over classes."""
        import pandas as pd  # not for evaluate(): a training loop pays for the engine only

        check_alpha(alpha)
        rows = []
        for i, m in enumerate(self.methods):
            for j, name in enumerate(self.metrics):
                est = float(self.estimate[i, j])
                se, lo, hi, note = math.nan, math.nan, math.nan, self.why
                if not self.why:
                    r = self.replicates[:, i, j]
                    if not np.isfinite(r).all() or not math.isfinite(est):
                        note = "undefined: a replicate without a scored query"
                    else:
                        se = float(self._se(r[:, None])[0])
                        n = self.n_scored[i] if self.n_scored else 0
                        if n and (self.kinds[j] == "hit" or n * min(est, 1 - est) < 10):
                            kg = korn_graubard(est, se * se, self.n_units - 1, n, alpha)
                            lo, hi = kg["low"], kg["high"]
                        else:
                            half = t_quantile(1 - alpha / 2, self.n_units - 1) * se
                            lo, hi = est - half, est + half
                rows.append(dict(method=m, metric=name, estimate=est, se=se, ci_low=lo, ci_high=hi,
                                 df=self.n_units - 1 if not self.why else math.nan, unit=UNIT,
                                 n_units=self.n_units, note=note))
        return pd.DataFrame(rows)

    def differences(self, alpha: float = 0.05, pairs: list[tuple[str, str]] | None = None,
                    metrics: list[str] | None = None) -> pd.DataFrame:
        """Every pair of methods (or ``pairs``) on every metric (or ``metrics``): metric, method_a,
        method_b, mean_diff (a - b), se, ci_low, ci_high, df, test, p_value, p_holm (Holm across
        the pairs of each metric), reject, unit, n_units, note. The p-value is the jackknife t
        test with G - 1 df, so it is below α exactly when the interval excludes 0."""
        import pandas as pd
        from scipy import stats

        from .multiplicity import holm

        check_alpha(alpha)
        index = {m: i for i, m in enumerate(self.methods)}
        pairs = pairs if pairs is not None else list(itertools.combinations(self.methods, 2))
        names = metrics if metrics is not None else self.metrics
        g = self.n_units
        rows = []
        for name in names:
            j = self.metrics.index(name)
            for a, b in pairs:
                ia, ib = index[a], index[b]
                est = float(self.estimate[ia, j] - self.estimate[ib, j])
                row = dict(metric=name, method_a=a, method_b=b, mean_diff=est, se=math.nan, ci_low=math.nan,
                           ci_high=math.nan, df=math.nan, test=TEST, p_value=math.nan, unit=UNIT, n_units=g,
                           note=self.why)
                rows.append(row)
                if self.why:
                    continue
                r = self.replicates[:, ia, j] - self.replicates[:, ib, j]
                if not np.isfinite(r).all() or not math.isfinite(est):
                    row["note"] = "undefined: a replicate without a scored query"
                    continue
                se = float(self._se(r[:, None])[0])
                if se <= ROUNDING * max(1.0, abs(est)):  # replicates equal up to rounding
                    same = abs(est) <= ROUNDING
                    row.update(se=0.0, ci_low=est, ci_high=est, df=g - 1, p_value=1.0 if same else math.nan,
                               note="the methods agree on every replicate: no difference" if same else
                               "every replicate gives the same difference: zero-width interval, no test")
                    continue
                half = t_quantile(1 - alpha / 2, g - 1) * se
                row.update(se=se, ci_low=est - half, ci_high=est + half, df=g - 1)
                if too_few_to_decide(g, alpha):
                    row["note"] = too_few_text(g, alpha)
                else:
                    row["p_value"] = float(2 * stats.t.sf(abs(est) / se, g - 1))
        out = pd.DataFrame(rows, columns=DIFFERENCE_COLUMNS[:-2])
        out["p_holm"] = np.nan
        for name in names:
            sel = out["metric"] == name
            out.loc[sel, "p_holm"] = holm(out.loc[sel, "p_value"]).to_numpy()
        out["reject"] = (out["p_holm"] < alpha).fillna(False).astype(bool)
        return out[DIFFERENCE_COLUMNS]


def too_few_to_decide(n_units: int, alpha: float) -> bool:
    """Whether ``n_units`` are too few for a distribution-free test to reach ``alpha``: the exact
    sign-flip test over n values cannot give p below 2 / 2^n (0.0625 at n = 5). A t test could, but
    only by trusting normality that so few units cannot check; no decision is made then."""
    return 2.0 / 2.0**n_units > alpha


def too_few_text(n_units: int, alpha: float) -> str:
    return (f"{n_units} classes: too few to decide at α = {alpha:g} (no distribution-free test over {n_units} units "
            f"can reach it: the exact sign-flip's smallest p is {2.0 / 2.0**n_units:.3g}); read the interval")


def class_groups(labels: np.ndarray, max_groups: int, seed: int) -> list[np.ndarray]:
    """The classes of ``labels`` (sorted) in G groups: one class per group when there are at most
    ``max_groups``, else ``max_groups`` groups of near-equal class counts, classes assigned by a
    seeded shuffle."""
    classes = np.unique(labels)
    if classes.size <= max_groups:
        return [classes[i:i + 1] for i in range(classes.size)]
    order = np.random.default_rng(seed).permutation(classes.size)
    return [np.sort(classes[order[g::max_groups]]) for g in range(max_groups)]


@dataclass(frozen=True)
class ClassReplicates:
    """What the cutoffs K do not change of a jackknife over classes: its groups and, for each group
    deleted, the mean over the scored queries of every per-query mean and hit rate (``columns``)
    of every method's pass (``means``: (groups, methods, columns)), at the cutoffs ``ks``. A
    jackknife at any cutoffs among ``ks`` is a view of it (:func:`class_jackknife`): new cutoffs
    run no pass.
    ``why``: why class-level inference is undefined (empty when defined; then no group)."""

    methods: tuple[str, ...]
    columns: tuple[str, ...]
    ks: tuple[int, ...]
    means: np.ndarray
    groups: list[list]
    n_classes: int
    why: str = ""
    notes: tuple[str, ...] = ()

    def covers(self, ks: tuple[int, ...]) -> bool:
        """Whether the replicates hold every cutoff column of ``ks``."""
        return set(ks) <= set(self.ks)


@dataclass(frozen=True)
class ReplicatePlan:
    """The groups of classes of a class jackknife, fixed before the passes so that they count
    what its replicates need (:mod:`analysis_core.engine.replicates`): ``groups`` (class codes
    of each group; empty when class-level inference is undefined, ``why``), ``item_group`` (each
    item's group, -1 for classes in none), the cutoffs ``ks`` of the replicates' columns."""

    groups: list[np.ndarray]
    item_group: np.ndarray
    n_classes: int
    n_scored_classes: int
    seed: int
    why: str = ""

    def pass_options(self) -> dict:
        """The keywords of :func:`~analysis_core.engine.core.run_pass` that count the replicates."""
        from ..engine.cutoff_plan import CUTOFF_FLOOR

        return {"delete_groups": self.item_group, "replicate_ks": tuple(range(1, CUTOFF_FLOOR + 1))}

    def replicates(self, results: dict) -> ClassReplicates:
        """The :class:`ClassReplicates` of the passes ``results`` (method -> pass result) run
        with :meth:`pass_options`."""
        methods = tuple(results)
        if self.why or not methods:
            return ClassReplicates(methods, (), (), np.empty((0, len(methods), 0)), [], self.n_classes, self.why)
        r0 = results[methods[0]]
        columns = r0.replicate_columns
        ks = tuple(sorted({int(c.rsplit("_", 1)[1]) for c in columns if c.startswith("recall_at_")}))
        means = np.stack([results[m].replicate_means for m in methods], axis=1)
        notes: tuple[str, ...] = ()
        if len(self.groups) < self.n_scored_classes:
            notes = (f"{self.n_scored_classes} classes in {len(self.groups)} jackknife groups (seed {self.seed})",)
        return ClassReplicates(methods, tuple(columns), ks, means, [list(x) for x in self.groups], self.n_classes, "",
                               notes)


def replicate_plan(codes: np.ndarray, is_query: np.ndarray | None, is_gallery: np.ndarray | None,
                   max_groups: int = DEFAULT_MAX_GROUPS, seed: int = 0) -> ReplicatePlan:
    """The :class:`ReplicatePlan` of items with class codes ``codes`` and roles (None: every item
    is both): the classes with a scored query (a query with a same-class gallery item) in
    :func:`class_groups`; undefined (``why``) with fewer than :data:`MIN_CLASSES` of them."""
    from ..engine.layout import gallery_positives

    codes = np.asarray(codes)
    isq = np.ones(codes.size, bool) if is_query is None else np.asarray(is_query, bool)
    isg = np.ones(codes.size, bool) if is_gallery is None else np.asarray(is_gallery, bool)
    scored = isq & (gallery_positives(codes, isg) > 0) if codes.size else isq
    scored_classes = np.unique(codes[scored])
    n_classes = int(np.unique(codes).size)
    none = np.full(codes.size, -1, np.int64)
    if scored_classes.size < MIN_CLASSES:
        why = (f"undefined: {scored_classes.size} class(es) with a scored query; inference over classes needs at "
               f"least {MIN_CLASSES} (deleting one of two classes leaves no retrieval problem)")
        return ReplicatePlan([], none, n_classes, int(scored_classes.size), seed, why)
    groups = class_groups(scored_classes, max_groups, seed)
    of_class = np.full(int(codes.max()) + 1, -1, np.int64)
    for g, members in enumerate(groups):
        of_class[members] = g
    return ReplicatePlan(groups, of_class[codes], n_classes, int(scored_classes.size), seed)


def class_replicates(ev, *, max_groups: int = DEFAULT_MAX_GROUPS, seed: int = 0, progress=None) -> ClassReplicates:
    """The delete-a-group replicates of the evaluation ``ev`` (see the module docstring), with
    ``ev``'s split, class sample, roles, similarity and precision, at its cutoffs and every cutoff
    up to :data:`~analysis_core.engine.cutoff_plan.CUTOFF_FLOOR` (so that
    :meth:`~analysis_core.Evaluation.with_ks` within them keeps them): one pass per method that
    counts its negatives per group (:mod:`analysis_core.engine.replicates`; :func:`evaluate
    <analysis_core.evaluation.evaluate>` counts them in its own passes, so this runs only for
    other groups). No pass when class-level inference is undefined (``why``): with fewer than
    :data:`MIN_CLASSES` classes with a scored query, or with a query sample (whose design is a
    stratified sample of queries, not of classes)."""
    from ..engine.core import run_pass

    max_groups = check_int(max_groups, "max_groups (jackknife groups of classes)", 2)
    methods = tuple(ev.methods)
    ds = ev.dataset
    codes = ds.label_codes[ev.rows]
    isq = isg = None
    if ds.role is not None:
        role = ds.role[ev.rows]
        isq, isg = np.isin(role, ("query", "both")), np.isin(role, ("gallery", "both"))
    plan = replicate_plan(codes, isq, isg, max_groups, seed)
    if ev.query_sample is not None:
        why = ("undefined: class-level intervals need every query evaluated; this evaluation is a query sample "
               "(use unit='query', or evaluate without a query sample)")
        return ClassReplicates(methods, (), (), np.empty((0, len(methods), 0)), [], plan.n_classes, why)
    if plan.why:
        return plan.replicates(dict.fromkeys(methods))
    results = {}
    for i, m in enumerate(methods):
        results[m] = run_pass(ds.embeddings[m][ev.rows], codes, is_query=isq, is_gallery=isg, similarity=ev.similarity,
                              ks=ev.ks, n_recall=2, n_bins=1, precision=ev.precision, **plan.pass_options())
        if progress is not None:
            progress(i + 1, len(methods), f"class jackknife: {m}")
    return plan.replicates(results)


def class_jackknife(ev, *, max_groups: int = DEFAULT_MAX_GROUPS, seed: int = 0, progress=None,
                    replicates: ClassReplicates | None = None) -> ClassJackknife:
    """The class jackknife of every method and per-query summary metric of the evaluation ``ev``
    (an :class:`~analysis_core.evaluation.Evaluation`; its split, class sample, roles, similarity,
    cutoffs and precision): its estimates from ``ev``, its replicates from ``replicates`` (the
    :func:`class_replicates` of ``ev`` or of ``ev`` at other cutoffs that cover ``ev``'s:
    :meth:`ClassReplicates.covers`) or, without them, from :func:`class_replicates` (one engine
    pass per method and group)."""
    from ..metrics.registry import query_columns

    if replicates is None or not replicates.covers(ev.ks):
        replicates = class_replicates(ev, max_groups=max_groups, seed=seed, progress=progress)
    cols = [m for m in query_columns(ev.ks) if m.kind in ("mean", "hit")]
    methods = ev.methods
    names = [m.name for m in cols]
    kinds = [m.kind for m in cols]
    estimate = np.full((len(methods), len(cols)), np.nan)
    n_scored = tuple(int(np.sum(ev.results[m].values[:, 0] > 0)) for m in methods)
    for i, m in enumerate(methods):
        r = ev.results[m]
        keep = r.values[:, 0] > 0
        for j, c in enumerate(cols):
            v = r.values[keep, r.columns.index(c.column)]
            estimate[i, j] = fsum_mean(v)
    if replicates.why:
        reps = np.empty((0, len(methods), len(cols)))
    else:
        at = [replicates.columns.index(c.column) for c in cols]
        reps = replicates.means[:, [replicates.methods.index(m) for m in methods]][:, :, at]
    return ClassJackknife(methods, names, kinds, estimate, reps, replicates.groups, replicates.n_classes,
                          replicates.why, list(replicates.notes), n_scored)
