"""The metric registry: one table of every metric the tool reports, read by the engine (which
per-query columns to compute, with which tie-block kernel), by :class:`~analysis_core.evaluation.
Evaluation` (where each mean goes in ``summary.json``), by the report's tables, the per-metric
paired tests and the dashboard's labels.

A per-query metric is computed by a tie-block kernel of :mod:`analysis_core.metrics.tie_blocks`
at a cutoff (``"all"``: the whole ranking; ``"R"``: the query's number of positives; ``"k"``: each
k of the evaluation's cutoffs, one column per k). Adding one = one :class:`MetricSpec` here plus
its kernel (the function in ``tie_blocks`` and its line in the engine's kernel dispatch,
:data:`analysis_core.engine.query_metrics.KERNEL_IDS`).

Pair metrics (JSD, mean similarities) are properties of all positive and negative pairs, not
means over queries: they have no per-query column and no kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class MetricSpec:
    """One registry entry. For ``cutoff="k"`` the names carry ``{k}``, filled per cutoff.

    ``name``: the flat name (``summary_frame`` column, interval key, test tables); ``column``: the
    per-query column; ``keys``: where the mean goes in ``summary.json`` (dotted paths; the first
    is the primary one); ``label`` / ``short``: for figures and pages / narrow tables; ``kind``:
    ``"mean"`` (mean of graded per-query values), ``"hit"`` (mean of 0/1 hits, fractional only
    when a tie block straddles the cutoff), ``"bound"`` (a bound of another metric) or ``"pair"``
    (a statistic of all pairs, no column); ``kernel``: the tie-block function; ``in_tables``:
    a headline metric (summary tables, per-metric paired tests); ``doc``: the definition in one line,
    for whoever reads the registry (the docstrings of :mod:`.tie_blocks` give the formulas)."""

    name: str
    column: str | None
    keys: tuple[str, ...]
    label: str
    short: str
    kind: str
    kernel: str | None = None
    cutoff: str = "all"
    in_tables: bool = True
    doc: str = ""


#: the registry, in reading order
REGISTRY: tuple[MetricSpec, ...] = (
    MetricSpec("map", "ap", ("map.expected",), "mAP", "mAP", "mean", "expected_ap", "all",
               doc="average precision of the whole ranking, expected over tie orders"),
    MetricSpec("map_lower", "ap_lower", ("map.lower",), "mAP (worst tie order)", "mAP−", "bound", "ap_lower", "all",
               in_tables=False, doc="AP with every tied positive after its tied negatives"),
    MetricSpec("map_upper", "ap_upper", ("map.upper",), "mAP (best tie order)", "mAP+", "bound", "ap_upper", "all",
               in_tables=False, doc="AP with every tied positive before its tied negatives"),
    MetricSpec("map_at_r", "map_at_r", ("map_at_r",), "MAP@R", "MAP@R", "mean", "expected_ap", "R",
               doc="AP truncated at rank R, divided by R (one query's AP@R)"),
    MetricSpec("r_precision", "r_precision", ("r_precision",), "R-Precision", "R-Prec.", "mean",
               "expected_precision_at", "R", doc="precision at rank R"),
    MetricSpec("precision_at_{k}", "precision_at_{k}", ("precision_at_k.{k}",), "P@{k}", "P@{k}", "mean",
               "expected_precision_at", "k", in_tables=False, doc="precision at rank k (divisor k)"),
    MetricSpec("mrr", "rr", ("mrr",), "MRR", "MRR", "mean", "expected_reciprocal_rank", "all",
               doc="reciprocal rank of the first positive"),
    MetricSpec("recall_at_{k}", "recall_at_{k}", ("recall_at_k.{k}",), "Recall@{k}", "R@{k}", "hit",
               "expected_hit_at", "k", doc="a positive in the top k (Recall@K of metric learning)"),
    MetricSpec("ndcg", "ndcg", ("ndcg",), "nDCG", "nDCG", "mean", "expected_ndcg", "all", in_tables=False,
               doc="normalised discounted cumulative gain of the whole ranking, binary gains"),
    MetricSpec("jsd", None, ("jsd",), "JSD", "JSD", "pair",
               doc="Jensen-Shannon divergence of the positive- and negative-pair similarity histograms"),
    MetricSpec("mean_pos_similarity", None, ("mean_pos_similarity",), "mean positive-pair similarity",
               "mean pos. sim.", "pair", in_tables=False),
    MetricSpec("mean_neg_similarity", None, ("mean_neg_similarity",), "mean negative-pair similarity",
               "mean neg. sim.", "pair", in_tables=False),
)


@dataclass(frozen=True)
class Metric:
    """A registry entry made concrete for one cutoff (see :class:`MetricSpec`); ``key`` is the
    primary ``summary.json`` key, ``k`` the cutoff of a per-k metric."""

    name: str
    column: str | None
    key: str
    label: str
    kind: str
    short: str = ""
    keys: tuple[str, ...] = ()
    kernel: str | None = None
    cutoff: str = "all"
    k: int | None = None
    in_tables: bool = True


def _concrete(spec: MetricSpec, k: int | None) -> Metric:
    def fill(s):
        return s if s is None or k is None else s.replace("{k}", str(k))

    return Metric(fill(spec.name), fill(spec.column), fill(spec.keys[0]), fill(spec.label), spec.kind,
                  fill(spec.short), tuple(fill(x) for x in spec.keys), spec.kernel, spec.cutoff, k, spec.in_tables)


def metric_table(ks: tuple[int, ...] = (1, 2, 4, 8)) -> list[Metric]:
    """Every metric for cutoffs ``ks``, in reading order. P@1 is listed
    once as ``precision_at_1`` (its keys ``precision_at_1`` and ``precision_at_k.1``); Recall@1,
    the same number per query, keeps its own column and key but is not a headline metric."""
    return list(_metric_table(tuple(sorted({int(k) for k in ks}))))


@lru_cache(maxsize=64)
def _metric_table(ks: tuple[int, ...]) -> tuple[Metric, ...]:
    """:func:`metric_table` of sorted distinct ``ks``, built once per cutoff set: a report asks
    for it hundreds of times (every paired test, every checkpoint), and the per-metric paired
    tests for 1 024 cutoffs; entries are frozen, so callers share them (each gets its own list)."""
    out: list[Metric] = []
    for spec in REGISTRY:
        if spec.cutoff != "k":
            out.append(_concrete(spec, None))
            continue
        for k in ks:
            m = _concrete(spec, k)
            if spec.name == "precision_at_{k}" and k == 1:
                m = Metric(m.name, m.column, "precision_at_1", m.label, "hit", m.short,
                           ("precision_at_1", *m.keys), m.kernel, m.cutoff, k, True)
            elif spec.name == "recall_at_{k}" and k == 1:
                m = Metric(m.name, m.column, m.key, m.label, m.kind, m.short, m.keys, m.kernel, m.cutoff, k, False)
            out.append(m)
    return tuple(out)


def query_columns(ks: tuple[int, ...]) -> list[Metric]:
    """The metrics the engine computes per query, in the order of its output columns."""
    return [m for m in metric_table(ks) if m.column is not None]


def summary_metrics(ks: tuple[int, ...] = (1, 2, 4, 8)) -> list[Metric]:
    """The headline per-query metrics (summary tables, per-metric paired tests): means over
    queries, in reading order."""
    return [m for m in metric_table(ks) if m.in_tables and m.column is not None]


def by_name(ks: tuple[int, ...] = (1, 2, 4, 8)) -> dict[str, Metric]:
    return {m.name: m for m in metric_table(ks)}


def label(name: str, short: bool = False) -> str:
    """The display label of a metric name (flat names of every cutoff, and ``grouped_recall_at_<k>``)."""
    if name.startswith("grouped_recall_at_"):
        k = name.rsplit("_", 1)[1]
        return f"GR@{k}" if short else f"Grouped Recall@{k}"
    for spec in REGISTRY:
        if spec.cutoff == "k":
            head, _, tail = spec.name.partition("{k}")
            middle = name[len(head):len(name) - len(tail)] if name.startswith(head) and name.endswith(tail) else ""
            if middle.isdigit():
                m = _concrete(spec, int(middle))
                return m.short if short else m.label
        elif spec.name == name:
            return spec.short if short else spec.label
    return name


def get_key(block: dict, dotted: str):
    """``block[a][b]`` for the dotted ``summary.json`` key ``a.b`` (``None`` when absent)."""
    for part in dotted.split("."):
        if not isinstance(block, dict) or part not in block:
            return None
        block = block[part]
    return block


def put_key(block: dict, dotted: str, value) -> None:
    """``block[a][b] = value`` for the dotted key ``a.b``."""
    *parents, last = dotted.split(".")
    for part in parents:
        block = block.setdefault(part, {})
    block[last] = value
