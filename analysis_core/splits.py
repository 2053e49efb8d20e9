"""Each split as its own retrieval problem: the one orchestration the report and the dashboard
share (which splits, in which order, with which group size, and why a split is skipped).

A split's items are ranked against each other only (queries and gallery inside the split): the
zero-shot protocol, where ``test_unseen`` classes are never ranked against training items. Splits
come in natural order (``fold2`` before ``fold10``); Grouped Recall@K uses one group size on every
split so that its values compare across them (:func:`~.stats.grouped_recall.split_group_size`); a
split where retrieval is impossible (one class, no positive pair) is skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .evaluation import NO_POSITIVE, Evaluation
from .methods import natural_key

#: ``evaluate_one(split, group_size)`` -> the split's Evaluation (the dashboard passes its cache)
EvaluateOne = Callable[[str, int], Evaluation]


@dataclass(frozen=True)
class SplitEvaluations:
    """``evaluations``: split -> its own Evaluation, in natural split order; ``skipped``: split ->
    why retrieval is impossible there; ``group_size``: the Grouped Recall group size of every split."""

    evaluations: dict[str, Evaluation]
    skipped: dict[str, str] = field(default_factory=dict)
    group_size: int | None = None

    def messages(self) -> list[str]:
        """One warning per skipped split (the report and the pages show the same words)."""
        return [f"split '{sp}' skipped: {why}" for sp, why in self.skipped.items()]


def split_names(ev: Evaluation) -> list[str]:
    """The splits of the items ``ev`` evaluated, in natural order (none without a split column)."""
    ds = ev.dataset
    if ds.split is None:
        return []
    return sorted(set(ds.split[ev.rows].tolist()), key=natural_key)


def splits_group_size(ev: Evaluation, splits: list[str], requested: int) -> int:
    """One group size for ``splits`` of ``ev``'s data (comparable Grouped Recall across splits)."""
    from .stats.grouped_recall import split_group_size

    ds = ev.dataset
    assert ds.split is not None
    counts = [np.unique(ds.label_codes[ds.split == sp]).size for sp in splits]
    return split_group_size(counts, requested)


def evaluate_splits(ev: Evaluation, group_size: int = 10, seed: int = 0, *, every_split: bool = False,
                    evaluate_one: EvaluateOne | None = None) -> SplitEvaluations:
    """Every split of an all-items evaluation as its own retrieval problem (nothing when the data
    has no split column, or ``ev`` is one split's, unless ``every_split``). ``evaluate_one``: how a
    split is evaluated (default :meth:`Evaluation.within_split` with ``seed``)."""
    if ev.dataset.split is None or (ev.split is not None and not every_split):
        return SplitEvaluations({})
    names = split_names(ev) if ev.split is None else sorted(set(ev.dataset.split.tolist()), key=natural_key)
    size = splits_group_size(ev, names, group_size)
    one = evaluate_one or (lambda sp, gs: ev.within_split(sp, gs, seed))
    out: dict[str, Evaluation] = {}
    skipped: dict[str, str] = {}
    for sp in names:
        try:
            e = one(sp, size)
        except InputError as exc:
            skipped[sp] = exc.problem
            continue
        if e.n_queries() == e.n_lone_queries():
            skipped[sp] = NO_POSITIVE
            continue
        out[sp] = e
    return SplitEvaluations(out, skipped, size)
