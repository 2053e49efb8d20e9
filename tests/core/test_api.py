"""The Python front door: ``Dataset(...)`` and ``evaluate(X, y)`` validate like the file loaders
(same ``InputError`` messages), results match scikit-learn, and result objects are small."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score

from analysis_core import Dataset, InputError, evaluate, load, load_files
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
    with pytest.raises(InputError) as e:
        evaluate(X, y, name="case")
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


def _tie_free_float64(seed: int, n: int = 45, d: int = 6, c: int = 4):
    """Float64 data, its cosine scores as the engine ranks them (normalised in float64, rounded to
    float32), and a check that no two gallery scores of a row are closer than float32 rounding of a
    dot product could reorder (so the ranking, hence AP, is the same whatever the summation order)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.repeat(np.arange(c), -(-n // c))[:n]
    V = (X / np.linalg.norm(X, axis=1, keepdims=True)).astype(np.float32).astype(np.float64)
    S = V @ V.T
    gaps = np.diff(np.sort(S + np.diag(np.full(n, np.inf)), axis=1)[:, :-1], axis=1)
    return X, y, S, gaps.min()


# seeds whose data are tie-free far above float32 rounding (~1e-7): most are, a few are not
_TIE_FREE_SEEDS = [s for s in range(30) if _tie_free_float64(s)[3] > 1e-5][:6]


@pytest.mark.parametrize("seed", _TIE_FREE_SEEDS)
def test_evaluate_arrays_map_equals_sklearn_leave_one_out(seed):
    X, y, S, min_gap = _tie_free_float64(seed)
    assert min_gap > 1e-5 and len(_TIE_FREE_SEEDS) == 6
    aps = []
    for i in range(len(y)):
        others = np.arange(len(y)) != i
        aps.append(average_precision_score(y[others] == y[i], S[i, others]))
    ev = evaluate(X, y)
    assert ev.summary()["methods"]["embeddings"]["map"]["expected"] == pytest.approx(np.mean(aps), abs=1e-9)
    # the same numbers as the file loader on the same float64 array
    assert ev.summary()["methods"] == evaluate(Dataset(labels=y, embeddings={"embeddings": X})).summary()["methods"]


def test_load_takes_one_path_or_several(tmp_path):
    X, y = _data()
    np.savez(tmp_path / "a.npz", embeddings=X, labels=y)
    np.savez(tmp_path / "b.npz", embeddings=X[:, :2], labels=y)
    one = load(str(tmp_path / "a.npz"))
    assert one.methods == ["a"] and one.n_items == 20
    assert load(tmp_path / "a.npz").methods == ["a"]
    assert load_files(str(tmp_path / "a.npz")).methods == ["a"]  # a str is a path, not its characters
    assert load([tmp_path / "a.npz", str(tmp_path / "b.npz")]).methods == ["a", "b"]
    with pytest.raises(InputError, match="no such file"):
        load(str(tmp_path / "missing.npz"))


class _OnlyDLPack:
    """A tensor-like object exposing only the DLPack protocol (no __array__)."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, *args, **kwargs):
        return self._a.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


class _OnlyArray:
    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a if dtype is None else self._a.astype(dtype)


def test_array_protocols_give_the_numpy_result():
    X, y = _data(n=40, seed=3)
    ref = evaluate(X, y).summary()["methods"]
    assert not hasattr(_OnlyDLPack(X), "__array__")
    assert evaluate(_OnlyDLPack(X), _OnlyDLPack(y)).summary()["methods"] == ref
    assert evaluate(_OnlyArray(X), list(y)).summary()["methods"] == ref
    assert evaluate(X.tolist(), y.tolist()).summary()["methods"] == ref


def test_torch_cpu_tensor():
    torch = pytest.importorskip("torch")
    X, y = _data(n=40, seed=3)
    ref = evaluate(X, y).summary()["methods"]
    assert evaluate(torch.from_numpy(X), torch.from_numpy(y)).summary()["methods"] == ref
    with pytest.raises(InputError, match="detach"):
        evaluate(torch.from_numpy(X).requires_grad_(), y)


def test_keywords_reach_the_evaluation():
    X, y = _data(n=40, seed=4)
    split = np.where(np.arange(40) < 20, "train", "test")
    role = np.where(np.arange(40) % 4 == 0, "query", "both")
    ev = evaluate({"a": X, "b": X[:, :2]}, y, split=split, role=role, within_split="test", similarity="dot",
                  ks=(1, 3))
    assert ev.methods == ["a", "b"] and ev.split == "test" and ev.similarity == "dot" and ev.ks == (1, 3)
    assert ev.rows.tolist() == list(range(20, 40))
    with pytest.raises(InputError, match="within_split"):
        evaluate(X, y, split="test")
    with pytest.raises(InputError, match="no labels"):
        evaluate(X)
    with pytest.raises(InputError, match="together with a Dataset"):
        evaluate(Dataset(labels=y, embeddings={"a": X}), y)


def test_summary_frame_one_row_per_method_equal_to_the_document():
    X, y = _data(n=60, seed=5)
    ev = evaluate({"a": X, "b": X[:, :2]}, y, ks=(1, 4), group_size=2)
    f = ev.summary_frame()
    doc = ev.to_dict()
    assert doc == ev.summary()
    assert f["method"].tolist() == ["a", "b"] and "split" not in f
    for m, row in f.set_index("method").iterrows():
        s = doc["methods"][m]
        assert row["map"] == s["map"]["expected"] and row["map_lower"] == s["map"]["lower"]
        assert row["map_at_r"] == s["map_at_r"] and row["mrr"] == s["mrr"] and row["jsd"] == s["jsd"]
        assert row["recall_at_4"] == s["recall_at_k"]["4"] and row["precision_at_4"] == s["precision_at_k"]["4"]
        g = s["grouped_recall_at_k"]["k"]["1"]
        assert (row["grouped_recall_at_1"], row["grouped_recall_at_1_low"], row["grouped_recall_at_1_high"]) == (
            g["mean"], g["ci_low"], g["ci_high"])
        assert row["share_queries_with_mixed_ties"] == s["ties"]["share_queries_with_mixed_ties"]
    assert not any(c.endswith("_low") for c in f.columns if not c.startswith("grouped"))  # exact: no intervals


def test_summary_frame_intervals_with_query_sampling_and_split_column():
    X, y = _data(n=120, seed=6)
    split = np.where(np.arange(120) < 60, "train", "test")
    ev = evaluate(X, y, split=split, within_split="train", query_sample=30, seed=1)
    f = ev.summary_frame()
    assert f.shape[0] == 1 and f["split"].tolist() == ["train"]
    iv = ev.to_dict()["methods"]["embeddings"]["intervals"]
    for key in ("map", "map_at_r", "recall_at_1", "jsd", "mean_pos_similarity"):
        assert (f[f"{key}_low"].iloc[0], f[f"{key}_high"].iloc[0]) == (iv[key]["low"], iv[key]["high"])
        assert f[f"{key}_low"].iloc[0] <= f[key].iloc[0] <= f[f"{key}_high"].iloc[0]


def test_per_query_unknown_method_lists_the_known_ones():
    X, y = _data()
    ev = evaluate({"alpha": X, "beta": X * 2}, y)
    assert ev.per_query("beta")["method"].unique().tolist() == ["beta"]
    assert len(ev.per_query()) == 40
    for call in (ev.per_query, ev.pr_curves, ev.method_summary):
        with pytest.raises(InputError, match="'alpha', 'beta'"):
            call("typo")


def test_evaluation_repr_is_short():
    X, y = _data(n=3000, d=64)
    text = repr(evaluate(X, y, ks=(1,)))
    assert len(text) < 250 and "n_items=3000" in text and "methods=['embeddings']" in text


def test_split_named_twice_is_refused():
    X, y = _data()
    ds = Dataset(labels=y, embeddings={"a": X}, split=np.where(np.arange(20) < 10, "train", "test"))
    assert evaluate(ds, within_split="test").split == evaluate(ds, split="test").split == "test"
    with pytest.raises(InputError, match="both split and within_split"):
        evaluate(ds, split="test", within_split="train")


def test_unknown_option_is_an_input_error_naming_the_valid_ones():
    X, y = _data()
    with pytest.raises(InputError, match="similarty") as e:
        evaluate(X, y, similarty="dot")
    assert "similarity" in e.value.fix and "query_sample" in e.value.fix
    with pytest.raises(InputError, match="unknown similarity"):
        evaluate(X, y, similarity="manhattan")
