"""The bundled demo sets regenerate bit for bit from their script."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("make_demo_data", ROOT / "demo_data" / "make_demo_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _assert_same(made: dict, path: Path) -> None:
    with np.load(path, allow_pickle=False) as saved:
        assert sorted(saved.files) == sorted(made)
        for k, v in made.items():
            assert saved[k].dtype == np.asarray(v).dtype, k
            assert np.array_equal(saved[k], v), k


def test_training_demo_regenerates_bit_identically():
    pytest.importorskip("sklearn")
    made = _script().make_training()
    _assert_same(made, ROOT / "demo_data" / "training.npz")
    # the zero-shot protocol: the unseen split holds exactly the classes never trained on
    seen = set(made["labels"][made["split"] == "train"].tolist())
    unseen = set(made["labels"][made["split"] == "test_unseen"].tolist())
    assert seen == {0, 1, 2, 3, 4, 5, 6} and unseen == {7, 8, 9}
    assert set(made["labels"][made["split"] == "test_seen"].tolist()) <= seen


def test_other_demo_sets_regenerate_bit_identically():
    pytest.importorskip("sklearn")
    mod = _script()
    rng = np.random.default_rng(20261122)
    _assert_same(mod.make_digits(rng), ROOT / "demo_data" / "digits.npz")
    _assert_same(mod.make_many_classes(rng), ROOT / "demo_data" / "many_classes.npz")
