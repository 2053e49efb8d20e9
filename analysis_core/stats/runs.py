"""Training runs as replicates: run-level summaries and family comparisons with the run as unit
(SPEC §4, "Runs (replicate trainings)" and "Unit of inference").

A claim such as "loss A beats loss B" is about a training procedure (a **family**), whose result
varies from one training (a **run**, a seed) to the next. Each run contributes one value per
metric and split — its summary metric at its final checkpoint, or at the checkpoint chosen on a
selection split (``select_on``) — and the family is judged by how those values vary over runs:

- **summary**: per family, split and metric the mean over runs, their standard deviation and the
  ``1 - alpha`` t interval (n_runs - 1 degrees of freedom), with the per-run values beside
  (``values``). It generalises to new trainings of the family evaluated on these test items.
- **tests**: every pair of families with at least two runs each: the mean difference with its
  Welch interval; the exact permutation test of the difference of run means over all
  ``C(n_a + n_b, n_a)`` reassignments of runs to families (the default test: exact under the null
  that both families are one training procedure, whatever the distribution of a run's value;
  Monte Carlo with ``n_permutations`` reassignments when there are more than
  :data:`EXACT_LIMIT`), and the Welch t test beside (``p_welch``; it rests on normal run means);
  Holm across the family pairs of each split and metric. When the runs are too few for the exact
  test to reach ``alpha`` at all (3 runs against 3: no p below 0.1), ``note`` says so and the
  interval is still given. Beside each test the **probability of improvement** P(a run of A
  beats a run of B) (ties count one half; R. Agarwal, M. Schwarzer, P. S. Castro, A. Courville
  and M. G. Bellemare, "Deep Reinforcement Learning at the Edge of the Statistical Precipice",
  NeurIPS 2021) with a score interval (``pi_low``, ``pi_high``; :func:`pi_score_interval`) and,
  for comparison with rliable, its seeded stratified bootstrap percentile interval
  (``pi_boot_low``, ``pi_boot_high``). The bootstrap is not the default because it undercovers
  with few runs: one procedure compared with itself, its 95 % interval held 1/2 in 0.77-0.85 of
  400 simulated 3 + 3 run experiments and 0.88-0.92 at 5 + 5 (``benchmarks/calibration.py``,
  scenarios ``runs_3x3``, ``runs_5x5``).
- **curves**: with checkpoints, each metric per family and step averaged over the runs that have
  that step, with a t band over runs.
- :meth:`RunAnalysis.runs_needed`: the runs per family a two-sided two-sample t test needs to
  detect a difference ``delta`` at ``alpha`` with the stated power, from the pooled run sd.

Reporting protocol after X. Bouthillier et al., "Accounting for Variance in Machine Learning
Benchmarks", MLSys 2021, and K. Musgrave, S. Belongie and S.-N. Lim, "A Metric Learning Reality
Check", ECCV 2020.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..design import Design
from ..errors import InputError
from ..metrics.registry import get_key, summary_metrics
from .multiplicity import holm
from .quantiles import t_half_width

if TYPE_CHECKING:
    from ..evaluation import Evaluation

#: up to this many reassignments of runs the permutation test enumerates them all (exact p)
EXACT_LIMIT = 200_000
#: bootstrap resamples of the probability of improvement's interval
PI_BOOTSTRAP = 2_000
UNIT = "run"
GENERALISES = "new trainings (runs) of each family, evaluated on these test items"
ONE_RUN = "one run: no spread over runs"
SAME_SPLIT = ("the checkpoint is chosen and reported on the same split '{split}': selection on the reported split "
              "makes every value optimistic; choose on another split (select_on / --select-on).")


@dataclass(frozen=True)
class RunAnalysis:
    """Run-level results (module docstring). Frames:

    ``values``: split, family, run, method, step, metric, label, value (one per run);
    ``summary``: split, family, metric, label, mean, sd, ci_low, ci_high, n_runs, runs, unit, n_units, note;
    ``tests``: split, metric, label, family_a, family_b, n_a, n_b, mean_a, mean_b, mean_diff
    (a - b), ci_low, ci_high (Welch), df, p_welch, p_permutation, n_reassignments, p_min (the
    smallest p the permutation test can give with these run counts), p_value (the default test's),
    p_holm, test, prob_improvement, pi_low, pi_high, pi_boot_low, pi_boot_high, unit, n_units, note;
    ``curves``: split, family, step, metric, label, mean, sd, ci_low, ci_high, n_runs, unit, n_units;
    ``selection``: family, run, method, step, select_on, select_metric, report_on (with select_on).
    """

    values: pd.DataFrame
    summary: pd.DataFrame
    tests: pd.DataFrame
    curves: pd.DataFrame
    selection: pd.DataFrame
    alpha: float
    warnings: list[str] = field(default_factory=list)

    def summary_frame(self) -> pd.DataFrame:
        return self.summary

    def mean_sd_frame(self, digits: int = 4) -> pd.DataFrame:
        """The summary as a reader's table: one row per split and family with ``n_runs`` and
        ``runs``, one column per metric (its label) holding ``mean ± sd`` over runs (``mean (one
        run)`` when there is nothing to spread; undefined when no run has a value)."""
        rows: dict[tuple, dict] = {}
        for r in self.summary.itertuples():
            row = rows.setdefault((r.split, r.family), {"split": r.split, "family": r.family, "n_runs": r.n_runs,
                                                        "runs": r.runs})
            row[r.label] = (f"{r.mean:.{digits}f} ± {r.sd:.{digits}f}" if math.isfinite(r.sd)
                            else f"{r.mean:.{digits}f} (one run)" if r.n_runs == 1 else "undefined (no run scored)")
        return pd.DataFrame(list(rows.values()))

    def runs_needed(self, delta: float, power: float = 0.8, alpha: float | None = None) -> pd.DataFrame:
        """Per split and metric: the pooled standard deviation of a run's value within families
        (``run_sd``, over the families with two or more runs, ``df``), and ``n_runs`` — the
        smallest number of runs per family with which a two-sided two-sample t test at ``alpha``
        detects a difference of ``delta`` with probability ``power`` (noncentral t), or NaN with
        ``note`` when it exceeds :data:`MAX_RUNS` or the sd is undefined."""
        alpha = self.alpha if alpha is None else alpha
        if not (delta > 0 and 0 < power < 1 and 0 < alpha < 1):
            raise InputError("runs_needed", f"delta {delta}, power {power}, alpha {alpha} out of range.",
                             "give delta > 0 and power, alpha in (0, 1).")
        rows = []
        for (split, metric), part in self.values.groupby(["split", "metric"], sort=False):
            ss = df = 0.0
            for _, fam in part.groupby("family", sort=False):
                v = fam["value"].to_numpy(float)
                if v.size >= 2:
                    ss += float(((v - v.mean()) ** 2).sum())
                    df += v.size - 1
            sd = math.sqrt(ss / df) if df > 0 else math.nan
            n, note = _runs_for_power(sd, delta, power, alpha)
            rows.append(dict(split=split, metric=metric, label=part["label"].iloc[0], run_sd=sd, df=df, delta=delta,
                             power=power, alpha=alpha, n_runs=n, note=note))
        return pd.DataFrame(rows, columns=["split", "metric", "label", "run_sd", "df", "delta", "power", "alpha",
                                           "n_runs", "note"])


MAX_RUNS = 1_000


def _runs_for_power(sd: float, delta: float, power: float, alpha: float) -> tuple[float, str]:
    if not math.isfinite(sd):
        return math.nan, "no family with two runs: the run sd is unknown"
    if sd == 0:
        return 2.0, "the runs of each family agree exactly: two runs per family show any difference"
    for n in range(2, MAX_RUNS + 1):
        dfree = 2 * n - 2
        crit = sps.t.ppf(1 - alpha / 2, dfree)
        ncp = delta / (sd * math.sqrt(2.0 / n))
        achieved = sps.nct.sf(crit, dfree, ncp) + sps.nct.cdf(-crit, dfree, ncp)
        if achieved >= power:
            return float(n), ""
    return math.nan, f"more than {MAX_RUNS} runs per family"


def run_analysis(evaluations: dict[str, Evaluation], design: Design | None = None, alpha: float = 0.05, *,
                 select_on: str | None = None, report_on: str | None = None, select_metric: str = "map",
                 n_permutations: int = 10_000, seed: int = 0) -> RunAnalysis:
    """Run-level results of the evaluations of one dataset (``evaluations``: split name — or
    ``"all"`` — to :class:`~analysis_core.Evaluation`, every one of the same methods).

    ``design``: the methods' (family, run, step) (default: the first evaluation's). Each run is
    represented by its last checkpoint; with ``select_on`` and ``report_on`` (split names), by the
    checkpoint whose ``select_metric`` is best on ``select_on`` (earliest step on ties), and only
    ``report_on`` is reported — a warning when they are the same split."""
    if not evaluations:
        raise InputError("runs", "no evaluation given.", "pass {split: evaluation}.")
    first = next(iter(evaluations.values()))
    design = design if design is not None else first.design
    registry = summary_metrics(first.ks)
    names = [m.name for m in registry]
    warnings: list[str] = []
    if (select_on is None) != (report_on is None):
        raise InputError("runs", "select_on and report_on go together.",
                         "give both: the split to choose each run's checkpoint on and the split to report.")
    for sp in (select_on, report_on):
        if sp is not None and sp not in evaluations:
            raise InputError("runs", f"unknown split '{sp}'.", f"use one of {sorted(evaluations)}.")
    if select_metric not in names:
        raise InputError("runs", f"unknown selection metric '{select_metric}'.", f"use one of {names}.")
    chosen = design.final_methods()
    selection = pd.DataFrame(columns=["family", "run", "method", "step", "select_on", "select_metric", "report_on"])
    if select_on is not None:
        assert report_on is not None
        if select_on == report_on:
            warnings.append(SAME_SPLIT.format(split=select_on))
        chosen = _select(design, evaluations[select_on], select_metric)
        selection = chosen.assign(select_on=select_on, select_metric=select_metric, report_on=report_on)
        evaluations = {report_on: evaluations[report_on]}
    values = []
    for split, ev in evaluations.items():
        summaries = {m: ev.method_summary(m) for m in dict.fromkeys(chosen["method"])}
        for r in chosen.itertuples():
            s = summaries[r.method]
            for m in registry:
                values.append(dict(split=split, family=r.family, run=r.run, method=r.method, step=r.step,
                                   metric=m.name, label=m.label, value=float(get_key(s, m.key))))
    vals = pd.DataFrame(values, columns=["split", "family", "run", "method", "step", "metric", "label", "value"])
    summary = _summary(vals, alpha)
    tests = _tests(vals, alpha, n_permutations, seed)
    curves = _curves(design, evaluations, registry, alpha) if select_on is None else _empty_curves()
    return RunAnalysis(vals, summary, tests, curves, selection, alpha, warnings)


def _select(design: Design, ev: Evaluation, metric: str) -> pd.DataFrame:
    """Per (family, run): the checkpoint whose ``metric`` is best on ``ev`` (earliest on ties)."""
    m = next(x for x in summary_metrics(ev.ks) if x.name == metric)
    rows = []
    base = design.final_methods()
    for r in base.itertuples():
        part = design.table[(design.table["family"] == r.family) & (design.table["run"] == r.run)
                            & design.table["step"].notna()]
        if part.empty:
            rows.append(dict(family=r.family, run=r.run, method=r.method, step=r.step))
            continue
        scored = [(float(get_key(ev.method_summary(meth), m.key)), -int(st), meth, int(st))
                  for meth, st in zip(part["method"], part["step"], strict=True)]
        scored = [s for s in scored if not math.isnan(s[0])]
        if not scored:
            rows.append(dict(family=r.family, run=r.run, method=r.method, step=r.step))
            continue
        best = max(scored)
        rows.append(dict(family=r.family, run=r.run, method=best[2], step=best[3]))
    return pd.DataFrame(rows, columns=["family", "run", "method", "step"])


def _t_interval(v: np.ndarray, alpha: float) -> tuple[float, float, float, float]:
    """mean, sd, low, high of a t interval over the values (NaN beyond what they define)."""
    n = v.size
    mean = math.fsum(v.tolist()) / n if n else math.nan
    if n < 2:
        return mean, math.nan, math.nan, math.nan
    half = t_half_width(v, alpha)
    return mean, float(np.std(v, ddof=1)), max(0.0, mean - half), min(1.0, mean + half)


def _summary(vals: pd.DataFrame, alpha: float) -> pd.DataFrame:
    rows = []
    for (split, family, metric), part in vals.groupby(["split", "family", "metric"], sort=False):
        v = part["value"].to_numpy(float)
        v = v[np.isfinite(v)]
        mean, sd, lo, hi = _t_interval(v, alpha)
        rows.append(dict(split=split, family=family, metric=metric, label=part["label"].iloc[0], mean=mean, sd=sd,
                         ci_low=lo, ci_high=hi, n_runs=int(v.size), runs=", ".join(map(str, part["run"])), unit=UNIT,
                         n_units=int(v.size), note=ONE_RUN if v.size == 1 else ""))
    return pd.DataFrame(rows, columns=["split", "family", "metric", "label", "mean", "sd", "ci_low", "ci_high",
                                       "n_runs", "runs", "unit", "n_units", "note"])


TEST_COLUMNS = ["split", "metric", "label", "family_a", "family_b", "n_a", "n_b", "mean_a", "mean_b", "mean_diff",
                "ci_low", "ci_high", "df", "p_welch", "p_permutation", "n_reassignments", "p_min", "p_value", "p_holm",
                "test", "prob_improvement", "pi_low", "pi_high", "pi_boot_low", "pi_boot_high", "unit", "n_units",
                "note"]


def _tests(vals: pd.DataFrame, alpha: float, n_permutations: int, seed: int) -> pd.DataFrame:
    rows = []
    # each metric's random streams are seeded by its place among the metrics, not by the place of its
    # (split, metric) group: a split's numbers are the same whichever other splits are analysed with it
    # (the report's every-split analysis, a dashboard page's, ``Evaluation.families`` of one split)
    place = {m: i for i, m in enumerate(dict.fromkeys(vals["metric"]))}
    for (split, metric), part in vals.groupby(["split", "metric"], sort=False):
        i = place[metric]
        fams = {f: p["value"].to_numpy(float) for f, p in part.groupby("family", sort=False)}
        fams = {f: v[np.isfinite(v)] for f, v in fams.items()}
        eligible = [f for f, v in fams.items() if v.size >= 2]
        block = []
        for j, (a, b) in enumerate(itertools.combinations(eligible, 2)):
            block.append(dict(split=split, metric=metric, label=part["label"].iloc[0], family_a=a, family_b=b,
                              **family_test(fams[a], fams[b], alpha, n_permutations,
                                            np.random.SeedSequence([seed, i, j]))))
        if block:
            frame = pd.DataFrame(block)
            frame["p_holm"] = holm(frame["p_value"]).to_numpy()
            m = len(frame)
            short = (frame["p_min"] * m > alpha) & (frame["p_min"] <= alpha)  # alone it could, after Holm not
            frame.loc[short, "note"] = (f"too few runs to decide after Holm over {m} family pairs at alpha = "
                                        f"{alpha:g}: the smallest attainable p times {m} exceeds it; the interval "
                                        "is the answer")
            rows.append(frame)
    if not rows:
        return pd.DataFrame(columns=TEST_COLUMNS)
    return pd.concat(rows, ignore_index=True)[TEST_COLUMNS]


def family_test(a: np.ndarray, b: np.ndarray, alpha: float = 0.05, n_permutations: int = 10_000,
                seed: int | np.random.SeedSequence = 0) -> dict:
    """Compare the run values ``a`` and ``b`` of two families (module docstring): the keys of
    :attr:`RunAnalysis.tests` from ``n_a`` to ``note`` except ``p_holm``."""
    a = np.asarray(a, float)
    b = np.asarray(b, float)
    na, nb = a.size, b.size
    ma, mb = math.fsum(a.tolist()) / na, math.fsum(b.tolist()) / nb
    d = ma - mb
    va, vb = float(np.var(a, ddof=1)), float(np.var(b, ddof=1))
    se2 = va / na + vb / nb
    notes = []
    if se2 > 0:
        se = math.sqrt(se2)
        dfree = se2 ** 2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
        tq = float(sps.t.ppf(1 - alpha / 2, dfree))
        lo, hi = d - tq * se, d + tq * se
        p_welch = float(2 * sps.t.sf(abs(d) / se, dfree))
    else:
        dfree = math.nan
        lo = hi = d
        p_welch = 1.0 if d == 0 else math.nan
        if d != 0:
            notes.append("every run of each family gives the same value: no Welch test (zero spread)")
    p_perm, n_re, exact, p_min = _permutation(a, b, n_permutations, seed)
    test = (f"exact permutation of run means ({n_re:,} reassignments)" if exact
            else f"permutation of run means ({n_re:,} random reassignments)")
    if p_min > alpha:
        notes.append(f"too few runs to decide at alpha = {alpha:g}: no reassignment of {na} + {nb} runs gives "
                     f"p below {p_min:.3g}; the interval is the answer")
    pi, boot_lo, boot_hi = _probability_of_improvement(a, b, alpha, seed)
    pi_lo, pi_hi = pi_score_interval(pi, na, nb, alpha)
    return dict(n_a=na, n_b=nb, mean_a=ma, mean_b=mb, mean_diff=d, ci_low=lo, ci_high=hi, df=dfree, p_welch=p_welch,
                p_permutation=p_perm, n_reassignments=n_re, p_min=p_min, p_value=p_perm, test=test, prob_improvement=pi,
                pi_low=pi_lo, pi_high=pi_hi, pi_boot_low=boot_lo, pi_boot_high=boot_hi, unit=UNIT,
                n_units=na + nb, note="; ".join(notes))


def _permutation(a: np.ndarray, b: np.ndarray, n_permutations: int,
                 seed: int | np.random.SeedSequence) -> tuple[float, int, bool, float]:
    """Two-sided permutation p of the difference of means, the number of reassignments, whether
    they are all of them, and the smallest p any data could give with these sizes (exact case)."""
    pooled = np.concatenate([a, b])
    n, na = pooled.size, a.size
    total = math.comb(n, na)
    observed = abs(a.mean() - b.mean())
    # reassignments are compared up to rounding: a relabelling that gives the same difference
    # in exact arithmetic counts as "as extreme"
    tol = 1e-9 * max(1.0, float(np.abs(pooled).max()))
    if total <= EXACT_LIMIT:
        idx = np.array(list(itertools.combinations(range(n), na)), dtype=np.int64)
        in_a = np.zeros((total, n), bool)
        np.put_along_axis(in_a, idx, True, axis=1)
        s = pooled.sum()
        sa = in_a @ pooled
        diffs = np.abs(sa / na - (s - sa) / (n - na))
        p = float(np.count_nonzero(diffs >= observed - tol)) / total
        # the smallest attainable p: the most extreme split and its mirror (equal sizes) only
        p_min = (2.0 if na == n - na else 1.0) / total
        return p, total, True, p_min
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(n_permutations):
        perm = rng.permutation(pooled)
        if abs(perm[:na].mean() - perm[na:].mean()) >= observed - tol:
            count += 1
    return (count + 1) / (n_permutations + 1), n_permutations, False, 1.0 / (n_permutations + 1)


def _pi_variance(theta: np.ndarray, na: int, nb: int) -> np.ndarray:
    """The variance of the Mann-Whitney estimate of P(X_a > X_b) at true value ``theta``, from
    J. A. Hanley and B. J. McNeil, "The meaning and use of the area under a receiver operating
    characteristic (ROC) curve", Radiology 143(1):29-36, 1982 (their Q1 = theta / (2 - theta),
    Q2 = 2 theta^2 / (1 + theta)), with both sample sizes minus one replaced by N* - 1,
    N* = (n_a + n_b) / 2, as in R. G. Newcombe, "Confidence intervals for an effect size measure
    based on the Mann-Whitney statistic. Part 2: Asymptotic methods and evaluation", Statistics in
    Medicine 25(4):559-573, 2006. At theta = 1/2 it is (n_a + n_b + 1) / (12 n_a n_b), the exact
    null variance for untied values."""
    k = (na + nb) / 2 - 1
    return theta * (1 - theta) / (na * nb) * (1 + k * (1 - theta) / (2 - theta) + k * theta / (1 + theta))


def pi_score_interval(pi: float, na: int, nb: int, alpha: float = 0.05) -> tuple[float, float]:
    """The ``1 - alpha`` score interval of a probability of improvement ``pi`` estimated from
    ``na`` and ``nb`` runs: every theta in [0, 1] with ``|pi - theta| - 1 / (2 na nb) <= z
    sqrt(V(theta))`` (:func:`_pi_variance`; ``z`` the normal quantile; the interval spans the
    outermost such theta). The score form (variance at theta, not at the estimate) keeps the
    interval inside [0, 1] and wide at estimates of 0 or 1; the continuity correction of half a
    pair's step keeps theta = 1/2 inside whenever the exact permutation test could not reject
    (3 runs against 3: every estimate, so "too few runs to decide" and the interval agree). The
    endpoints are found on a grid of 20 001 values of theta and refined by bisection."""
    if not math.isfinite(pi) or na < 1 or nb < 1:
        return math.nan, math.nan
    z = float(sps.norm.ppf(1 - alpha / 2))
    cc = 1 / (2 * na * nb)

    def outside(theta: np.ndarray) -> np.ndarray:
        gap = np.maximum(np.abs(pi - theta) - cc, 0.0)
        return gap ** 2 > z ** 2 * _pi_variance(theta, na, nb)

    grid = np.linspace(0.0, 1.0, 20_001)
    inside = np.flatnonzero(~outside(grid))
    if inside.size == 0:  # cannot happen (theta = pi is always inside); defensive
        return pi, pi

    def edge(out: float, ins: float) -> float:  # bisection between an outside and an inside theta
        for _ in range(40):
            mid = (out + ins) / 2
            if outside(np.array([mid]))[0]:
                out = mid
            else:
                ins = mid
        return ins

    lo_i, hi_i = inside[0], inside[-1]
    lo = 0.0 if lo_i == 0 else edge(grid[lo_i - 1], grid[lo_i])
    hi = 1.0 if hi_i == grid.size - 1 else edge(grid[hi_i + 1], grid[hi_i])
    return float(lo), float(hi)


def _probability_of_improvement(a: np.ndarray, b: np.ndarray, alpha: float,
                                seed: int | np.random.SeedSequence) -> tuple[float, float, float]:
    """P(X_a > X_b) + P(X_a = X_b) / 2 over all pairs of runs, and a stratified bootstrap
    percentile interval (runs resampled within each family; seeded, reproducible)."""
    def pi(x: np.ndarray, y: np.ndarray) -> np.ndarray:  # x: (B, na), y: (B, nb)
        gt = (x[:, :, None] > y[:, None, :]).mean(axis=(1, 2))
        eq = (x[:, :, None] == y[:, None, :]).mean(axis=(1, 2))
        return gt + 0.5 * eq

    est = float(pi(a[None], b[None])[0])
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    rng = np.random.default_rng(ss.spawn(1)[0])
    xa = a[rng.integers(0, a.size, (PI_BOOTSTRAP, a.size))]
    xb = b[rng.integers(0, b.size, (PI_BOOTSTRAP, b.size))]
    boot = pi(xa, xb)
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return est, float(lo), float(hi)


CURVE_COLUMNS = ["split", "family", "step", "metric", "label", "mean", "sd", "ci_low", "ci_high", "n_runs", "unit",
                 "n_units"]


def _empty_curves() -> pd.DataFrame:
    return pd.DataFrame(columns=CURVE_COLUMNS)


def _curves(design: Design, evaluations: dict[str, Evaluation], registry, alpha: float) -> pd.DataFrame:
    stepped = design.table[design.table["step"].notna()]
    if stepped.empty or not design.has_runs:
        return _empty_curves()
    rows = []
    for split, ev in evaluations.items():
        for (family, step), part in stepped.groupby(["family", "step"], sort=True):
            summaries = [ev.method_summary(m) for m in part["method"]]
            for m in registry:
                v = np.array([float(get_key(s, m.key)) for s in summaries])
                v = v[np.isfinite(v)]
                mean, sd, lo, hi = _t_interval(v, alpha)
                rows.append(dict(split=split, family=family, step=int(step), metric=m.name, label=m.label, mean=mean,
                                 sd=sd, ci_low=lo, ci_high=hi, n_runs=int(v.size), unit=UNIT, n_units=int(v.size)))
    return pd.DataFrame(rows, columns=CURVE_COLUMNS)


def families_blocks(ra: RunAnalysis) -> dict[str, dict]:
    """``summary.json``'s ``families`` block of each split (SPEC §5): family -> ``runs``,
    ``n_runs`` and per metric ``mean, sd, ci_low, ci_high, n_runs, unit``; with a checkpoint
    selection, ``selection`` says how each run's checkpoint was chosen."""
    out: dict[str, dict] = {}
    for split, part in ra.summary.groupby("split", sort=False):
        block: dict[str, dict] = {}
        for family, fam in part.groupby("family", sort=False):
            runs = ra.values[(ra.values["split"] == split) & (ra.values["family"] == family)]
            names = list(dict.fromkeys(runs["run"]))
            entry: dict = {"runs": names, "n_runs": len(names),
                           "methods": list(dict.fromkeys(runs["method"]))}
            for r in fam.itertuples():
                entry[r.metric] = {"mean": r.mean, "sd": r.sd, "ci_low": r.ci_low, "ci_high": r.ci_high,
                                   "n_runs": r.n_runs, "unit": UNIT, "level": 1 - ra.alpha,
                                   **({"note": r.note} if r.note else {})}
            block[str(family)] = entry
        if len(ra.selection):
            s = ra.selection.iloc[0]
            block = {"selection": {"select_on": s["select_on"], "report_on": s["report_on"],
                                   "select_metric": s["select_metric"],
                                   "steps": {f"{r.family}/{r.run}" if r.run else str(r.family): int(r.step)
                                             for r in ra.selection.itertuples() if not pd.isna(r.step)}},
                     **block}
        out[str(split)] = block
    return out

