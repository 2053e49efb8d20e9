"""The shipped replicate-runs experiment (demo_data/digits_runs.npz, made by make_runs_data.py) has
the design its script documents.

Only structure is checked: the file comes from training with PyTorch, whose floating-point results
depend on the CPU, the kernels and the library version, and PyTorch is not a dependency of the
project, so the file is not regenerated here. Equalities between embeddings are within the file
(two arrays the script computed from the same weights), never against recomputed values."""

from __future__ import annotations

import csv
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from analysis_core import load

DATA = Path(__file__).resolve().parents[2] / "demo_data"
NPZ, DESIGN = DATA / "digits_runs.npz", DATA / "digits_runs_design.csv"
LOSSES, SEEDS, EPOCHS = ("triplet", "proxyanchor", "multisim"), (0, 1, 2), (0, 1, 3, 10)
NAME = re.compile(r"^(?P<loss>[a-z]+)_seed(?P<seed>\d+)_e(?P<epoch>\d+)$")


@pytest.fixture(scope="module")
def ds():
    return load(NPZ)


def _parse(method: str) -> tuple[str, int, int]:
    m = NAME.match(method)
    assert m is not None, method
    return m["loss"], int(m["seed"]), int(m["epoch"])


def test_every_loss_seed_and_checkpoint_is_one_method(ds):
    assert len(ds.methods) == 36
    assert sorted(map(_parse, ds.methods)) == sorted(itertools.product(LOSSES, SEEDS, EPOCHS))


def test_items_are_sklearns_digits_with_finite_16d_embeddings(ds):
    sklearn = pytest.importorskip("sklearn.datasets")
    _, y = sklearn.load_digits(return_X_y=True)
    assert ds.n_items == 1797
    assert np.array_equal(ds.labels, y)
    for m, e in ds.embeddings.items():
        assert e.shape == (1797, 16), m
        assert np.isfinite(e).all(), m
        # cosine needs a direction for every item; float16 storage must not have flushed one to zero
        assert (np.linalg.norm(e, axis=1) > 0).all(), m
    with np.load(NPZ, allow_pickle=False) as raw:  # stored compactly; the loader widens to float32
        assert all(raw[f"embeddings_{m}"].dtype == np.float16 for m in ds.methods)
    assert NPZ.stat().st_size < 3_000_000


def test_zero_shot_split_classes_and_sizes(ds):
    assert set(ds.split.tolist()) == {"train", "test_seen", "test_unseen"}
    classes = {s: set(ds.labels[ds.split == s].tolist()) for s in ("train", "test_seen", "test_unseen")}
    assert classes == {"train": set(range(7)), "test_seen": set(range(7)), "test_unseen": {7, 8, 9}}
    # every item of digits 7-9 is unseen; digits 0-6 split 70/30 as scikit-learn's train_test_split
    # rounds (test share rounded up), and stratified: each class's train share within one item of 70 %
    assert (ds.split == "test_unseen").sum() == np.isin(ds.labels, [7, 8, 9]).sum()
    n_seen = int(np.isin(ds.labels, range(7)).sum())
    assert (ds.split == "test_seen").sum() == math.ceil(0.3 * n_seen)
    assert (ds.split == "train").sum() == n_seen - math.ceil(0.3 * n_seen)
    for c in range(7):
        in_class = ds.labels == c
        assert abs((ds.split[in_class] == "train").sum() - 0.7 * in_class.sum()) <= 1, c


def test_seed_sets_the_start_and_training_moves_it(ds):
    e = ds.embeddings
    for seed in SEEDS:
        # the network is built first after seeding: the three losses of one seed share epoch 0
        start = e[f"triplet_seed{seed}_e0"]
        assert all(np.array_equal(e[f"{loss}_seed{seed}_e0"], start) for loss in LOSSES)
        for loss in LOSSES:
            assert not np.allclose(e[f"{loss}_seed{seed}_e10"], start, atol=1e-2), (loss, seed)
    # the seed reaches the initialisation (and, with it, the runs differ)
    for a, b in itertools.combinations(SEEDS, 2):
        assert not np.allclose(e[f"triplet_seed{a}_e0"], e[f"triplet_seed{b}_e0"], atol=1e-2)
        for loss in LOSSES:
            assert not np.allclose(e[f"{loss}_seed{a}_e10"], e[f"{loss}_seed{b}_e10"], atol=1e-2)


def test_design_table_lists_exactly_the_methods(ds):
    with DESIGN.open(newline="") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == ["method", "family", "run", "step"]
        rows = list(reader)
    assert len(rows) == len({r["method"] for r in rows}) == 36
    assert {r["method"] for r in rows} == set(ds.methods)
    for r in rows:
        loss, seed, epoch = _parse(r["method"])
        assert (r["family"], r["run"], int(r["step"])) == (loss, f"seed{seed}", epoch)
