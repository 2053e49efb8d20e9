"""The Python API reads feature frames and reduced-precision tensors as the file loaders read
files: per-item columns of a frame are never features, and bfloat16 / float16 vectors are taken
exactly (widened to float32, which holds every such value)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_core import InputError, evaluate

DIGITS = Path(__file__).resolve().parents[2] / "demo_data" / "digits.npz"


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.load(DIGITS) as d:
        return d["embeddings_pca16"], d["labels"], d["split"]


def _same(a, b) -> None:
    assert a.to_dict()["methods"] == b.to_dict()["methods"]
    pa, pb = a.per_query(), b.per_query()
    pd.testing.assert_frame_equal(pa, pb)


def test_a_frame_holding_its_label_column_is_scored_without_it_and_says_so(digits):
    X, y, _ = digits
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])]).assign(label=y)
    with pytest.warns(UserWarning, match="'label'"):
        ev = evaluate(df, y)
    _same(ev, evaluate(X, y))
    assert any("['label']" in n and "not features" in n for n in ev.dataset.notes)


def test_split_role_id_confidence_columns_of_a_frame_are_not_features_either(digits):
    X, y, split = digits
    df = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    df.insert(0, "id", np.arange(len(y)))  # numeric: np.asarray(df) would silently score it
    df["split"] = split
    df["role"] = "both"
    df["confidence"] = np.linspace(0, 1, len(y))
    with pytest.warns(UserWarning, match="not features"):
        ev = evaluate({"a": df}, y)
    _same(ev, evaluate({"a": X}, y))
    note = next(n for n in ev.dataset.notes if "not features" in n)
    assert all(f"'{c}'" in note for c in ("id", "split", "role", "confidence"))


def test_a_frame_of_per_item_columns_only_is_refused_by_name(digits):
    _, y, _ = digits
    with pytest.raises(InputError, match="only the per-item column"):
        evaluate(pd.DataFrame({"label": y, "confidence": np.ones(len(y))}), y)


def test_without_labels_a_frames_label_column_is_pointed_at(digits):
    X, y, _ = digits
    with pytest.raises(InputError, match=r"df\['label'\]"):
        evaluate(pd.DataFrame(X).assign(label=y))


def test_float16_arrays_evaluate_equal_to_their_float32_copy(digits):
    X, y, _ = digits
    h = X.astype(np.float16)
    _same(evaluate(h, y), evaluate(h.astype(np.float32), y))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_reduced_precision_torch_tensors_evaluate_equal_to_their_float32_copy(digits, dtype):
    torch = pytest.importorskip("torch")
    X, y, _ = digits
    t = torch.from_numpy(X).to(getattr(torch, dtype))
    _same(evaluate(t, y), evaluate(t.float().numpy(), y))
    # a tensor still attached to autograd (a model's output) needs no .detach() first
    _same(evaluate(t.float().requires_grad_(), y), evaluate(t.float().numpy(), y))
