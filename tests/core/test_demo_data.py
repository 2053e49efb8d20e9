"""The bundled demo sets regenerate from their script.

Text and integer arrays (labels, splits, ids) regenerate exactly. Floating-point arrays come from
BLAS products (PCA, LDA, the MLP's training in float64) whose summation order depends on the CPU and
the BLAS kernel, so they are compared to a tolerance: across OpenBLAS core types (unset, Haswell,
SandyBridge, Prescott) the float64 confidences differed by at most 2.2e-15 relative after 30 epochs,
and a float64 value that lands near a float32 rounding boundary may round one ulp (6e-8 relative)
either way when stored. 1e-6 relative keeps a margin of 10^9 over the float64 drift and of 16 over
one float32 ulp, and still catches any change to the script (a different seed, step or layer)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RTOL, ATOL = 1e-6, 1e-9  # see the module docstring for why


def _script():
    spec = importlib.util.spec_from_file_location("make_demo_data", ROOT / "demo_data" / "make_demo_data.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _assert_same(made: dict, path: Path) -> None:
    with np.load(path, allow_pickle=False) as saved:
        assert sorted(saved.files) == sorted(made)
        for k, v in made.items():
            v = np.asarray(v)
            assert saved[k].dtype == v.dtype, k
            if v.dtype.kind == "f":
                np.testing.assert_allclose(v, saved[k], rtol=RTOL, atol=ATOL, err_msg=k)
            else:
                assert np.array_equal(saved[k], v), k


def test_training_demo_regenerates_to_rounding():
    pytest.importorskip("sklearn")
    made = _script().make_training()
    _assert_same(made, ROOT / "demo_data" / "training.npz")
    # the zero-shot protocol: the unseen split holds exactly the classes never trained on
    seen = set(made["labels"][made["split"] == "train"].tolist())
    unseen = set(made["labels"][made["split"] == "test_unseen"].tolist())
    assert seen == {0, 1, 2, 3, 4, 5, 6} and unseen == {7, 8, 9}
    assert set(made["labels"][made["split"] == "test_seen"].tolist()) <= seen


def test_other_demo_sets_regenerate_to_rounding():
    pytest.importorskip("sklearn")
    mod = _script()
    rng = np.random.default_rng(20261122)
    _assert_same(mod.make_digits(rng), ROOT / "demo_data" / "digits.npz")
    _assert_same(mod.make_many_classes(rng), ROOT / "demo_data" / "many_classes.npz")
