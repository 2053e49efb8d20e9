"""The hierarchical model of replicate runs per split and metric: where the variance of a
per-query value comes from (run within family, class, class x family, query) and family
differences that use every query of every run (SPEC §4, "Runs"). The model itself:
:mod:`.run_mixed_model`; the runs: :mod:`.runs`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..metrics.registry import summary_metrics
from .multiplicity import holm
from .runs import UNIT, RunAnalysis

if TYPE_CHECKING:
    from ..evaluation import Evaluation


#: the per-query metrics the hierarchical model is fitted to (summary metric -> per-query column)
MODEL_METRICS = ("map", "map_at_r", "r_precision")


@dataclass(frozen=True)
class RunModels:
    """The hierarchical model of each split and metric
    (:func:`~analysis_core.stats.run_mixed_model.run_mixed_model`: ``value ~ family + (1 |
    family:run) + (1 | class) + (1 | class:family) + (1 | query)`` on the per-query values of
    every run). ``pairs``: split, metric, family_a, family_b, estimate, se, df, t, p_value,
    p_holm (across family pairs), ci_low, ci_high, unit, n_units (runs), note. ``components``:
    split, metric, component, variance, sd, share, note: where the variance comes from."""

    pairs: pd.DataFrame
    components: pd.DataFrame
    warnings: list[str] = field(default_factory=list)


def run_models(evaluations: dict[str, Evaluation], ra: RunAnalysis, alpha: float | None = None,
               metrics: tuple[str, ...] = MODEL_METRICS) -> RunModels:
    """Fit the hierarchical model to the per-query values of the runs in ``ra.values`` (each run's
    reported checkpoint), per split of ``ra`` and metric."""
    from .run_mixed_model import run_mixed_model

    alpha = ra.alpha if alpha is None else alpha
    pairs, comps, warnings = [], [], []
    for split in dict.fromkeys(ra.values["split"]):
        ev = evaluations[split]
        chosen = ra.values[(ra.values["split"] == split)].drop_duplicates(["family", "run"])
        if chosen.groupby("family")["run"].nunique().max() < 2:
            continue
        registry = {m.name: m for m in summary_metrics(ev.ks)}
        cols = {r.method: ev.per_query_columns(r.method) for r in chosen.itertuples()}
        for metric in metrics:
            column = registry[metric].column
            assert column is not None
            parts = []
            for r in chosen.itertuples():
                c = cols[r.method]
                keep = c["n_positives"] > 0
                parts.append(pd.DataFrame({"family": str(r.family), "run": f"{r.family}/{r.run}",
                                           "class": c["label"][keep].astype(str), "query": c["query"][keep],
                                           "value": c[column][keep].astype(float)}))
            fit = run_mixed_model(pd.concat(parts, ignore_index=True), alpha)
            warnings += [f"[{split}, {metric}] {w}" for w in fit.warnings]
            p = fit.pairs(alpha)
            if len(p):
                p["p_holm"] = holm(p["p_value"]).to_numpy() if p["p_value"].notna().any() else np.nan
            n_runs = int(sum(fit.n_runs.values()))
            pairs.append(p.assign(split=split, metric=metric, unit=UNIT, n_units=n_runs))
            comps.append(fit.variance_components.assign(split=split, metric=metric))
    pair_cols = ["split", "metric", "family_a", "family_b", "estimate", "se", "df", "t", "p_value", "p_holm", "ci_low",
                 "ci_high", "unit", "n_units", "note"]
    comp_cols = ["split", "metric", "component", "variance", "sd", "share", "note"]
    return RunModels(pd.concat(pairs, ignore_index=True)[pair_cols] if pairs else pd.DataFrame(columns=pair_cols),
                     pd.concat(comps, ignore_index=True)[comp_cols] if comps else pd.DataFrame(columns=comp_cols),
                     list(dict.fromkeys(warnings)))
