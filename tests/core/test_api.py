"""The Python front door: ``Dataset(...)`` and ``evaluate(X, y)`` validate like the file loaders
(same ``InputError`` messages), results match scikit-learn, and result objects are small."""

from __future__ import annotations

import numpy as np
import pytest

from analysis_core import Dataset, InputError, load_files
from analysis_core.evaluation import evaluate as evaluate_dataset


def _data(n: int = 20, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, 3, n)


def _bad_inputs() -> dict[str, tuple[np.ndarray, np.ndarray, str]]:
    """name -> (embeddings, labels, a phrase of the message)."""
    X, y = _data()
    Xn = X.copy()
    Xn[[7, 11], 2] = np.nan
    Xz = X.copy()
    Xz[[4, 9]] = 0
    return {
        "nan": (Xn, y, "rows 7, 11"),
        "length_mismatch": (X, y[:15], "length mismatch"),
        "one_d": (X[:, 0], y, "1-D"),
        "one_class": (X, np.zeros(20, int), "one class"),
        "zero_vector_cosine": (Xz, y, "rows 4, 9"),
    }


def _loader_error(tmp_path, X, y) -> InputError:
    p = tmp_path / "case.npz"
    np.savez(p, embeddings=X, labels=y)
    with pytest.raises(InputError) as e:
        evaluate_dataset(load_files([p]))
    return e.value


@pytest.mark.parametrize("case", sorted(_bad_inputs()))
def test_dataset_construction_raises_the_loaders_message(tmp_path, case):
    X, y, phrase = _bad_inputs()[case]
    ref = _loader_error(tmp_path, X, y)
    assert phrase.lower() in ref.problem.lower()
    with pytest.raises(InputError) as e:
        # zero vectors are only wrong under cosine: the check is reached by evaluate, not by construction
        evaluate_dataset(Dataset(labels=y, embeddings={"case": X}))
    assert (e.value.problem, e.value.fix) == (ref.problem, ref.fix)
    if case == "zero_vector_cosine":
        Dataset(labels=y, embeddings={"case": X})  # a valid dataset for dot / euclidean
        evaluate_dataset(Dataset(labels=y, embeddings={"case": X}), similarity="dot")
    else:
        with pytest.raises(InputError) as e:
            Dataset(labels=y, embeddings={"case": X})
        assert (e.value.problem, e.value.fix) == (ref.problem, ref.fix)


def test_all_nan_embeddings_are_refused_not_scored():
    X, y = _data()
    with pytest.raises(InputError, match="NaN"):
        Dataset(labels=y, embeddings={"m": np.full_like(X, np.nan)})


def test_dataset_checks_methods_and_optional_columns():
    X, y = _data()
    with pytest.raises(InputError, match="has 10 rows"):
        Dataset(labels=y, embeddings={"a": X, "b": X[:10]})
    with pytest.raises(InputError, match="galery"):
        Dataset(labels=y, embeddings={"a": X}, role=np.array(["query", "galery"] * 10))
    with pytest.raises(InputError, match="'confidence' has NaN"):
        Dataset(labels=y, embeddings={"a": X}, confidence=np.r_[np.nan, np.ones(19)])
    with pytest.raises(InputError, match="non-empty dict"):
        Dataset(labels=y, embeddings=X)


def test_subset_of_a_valid_dataset_shares_the_checked_arrays():
    X, y = _data()
    ds = Dataset(labels=y, embeddings={"a": X})
    assert np.shares_memory(ds.embeddings["a"], X)  # a valid float32 array is not copied
    sub = ds.subset(np.arange(10))
    np.testing.assert_array_equal(sub.embeddings["a"], X[:10])
    np.testing.assert_array_equal(sub.label_codes, np.unique(y[:10], return_inverse=True)[1])


def test_repr_is_short_and_names_the_shape():
    X, y = _data(n=3000, d=64)
    text = repr(Dataset(labels=y, embeddings={"a": X}, ids=np.arange(3000)))
    assert len(text) < 200 and "n_items=3000" in text and "64-d" in text and "ids" in text
