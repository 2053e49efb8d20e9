"""Each split as its own retrieval problem: natural split order, one group size for all, the
skipped splits with their reasons, and each split's numbers equal to evaluating that split
directly (the definition)."""

from __future__ import annotations

import numpy as np
import pytest

from analysis_core import evaluate
from analysis_core.evaluation import NO_POSITIVE
from analysis_core.splits import evaluate_splits, split_names


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(10), 6)
    # fold10 holds classes 0-3, fold2 classes 4-8, lone a class of its own (no second class)
    split = np.where(y < 4, "fold10", np.where(y < 9, "fold2", "lone"))
    X = {"a": rng.normal(size=(60, 5)) + np.eye(5)[y % 5], "b": rng.normal(size=(60, 5))}
    return X, y, split


def test_splits_in_natural_order_with_one_group_size_and_reasons(data):
    X, y, split = data
    ev = evaluate(X, y, split=split)
    got = evaluate_splits(ev, group_size=10, seed=3)
    assert split_names(ev) == ["fold2", "fold10", "lone"]  # natural order, not "fold10" < "fold2"
    assert list(got.evaluations) == ["fold2", "fold10"]
    assert set(got.skipped) == {"lone"} and "one class" in got.skipped["lone"] or "class" in got.skipped["lone"]
    assert got.messages() == [f"split 'lone' skipped: {got.skipped['lone']}"]
    assert got.group_size == 4  # the smallest usable split has 4 classes: comparable groups everywhere
    for sp, e in got.evaluations.items():
        direct = evaluate(X, y, split=split, within_split=sp, group_size=4, seed=3)
        assert e.split == sp and e.methods == ["a", "b"]
        assert e.summary_frame().drop(columns="split").equals(direct.summary_frame().drop(columns="split"))


def test_no_split_column_or_a_split_evaluation_gives_nothing_unless_every_split(data):
    X, y, split = data
    assert evaluate_splits(evaluate(X, y)).evaluations == {}
    one = evaluate(X, y, split=split, within_split="fold2")
    assert evaluate_splits(one).evaluations == {}
    assert list(evaluate_splits(one, every_split=True).evaluations) == ["fold2", "fold10"]


def test_a_split_without_positives_is_skipped_with_the_reason():
    rng = np.random.default_rng(1)
    y = np.array([0, 0, 1, 1, 2, 3, 4, 5])  # split "b": four classes of one item
    split = np.array(["a"] * 4 + ["b"] * 4)
    got = evaluate_splits(evaluate(rng.normal(size=(8, 3)), y, split=split))
    assert list(got.evaluations) == ["a"] and got.skipped == {"b": NO_POSITIVE}
