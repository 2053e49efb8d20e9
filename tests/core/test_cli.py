"""The command line contract: outputs of `evaluate`, and exit 2 + a clear message on bad input."""

from __future__ import annotations

import io
import json
import os
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_core import evaluate, load_files

from ..helpers import ROOT, run_cli
from ..helpers import good_npz as _good


def test_evaluate_writes_summary_and_per_query(tmp_path):
    p = _good(tmp_path)
    out = tmp_path / "out"
    r = run_cli("evaluate", p, "--out", out, "--k", "1,5", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert set(s["dataset"]) >= {"n_items", "n_classes", "n_queries", "n_lone_queries", "dim", "similarity"}
    m = s["methods"]["good"]
    assert set(m) >= {"map", "map_at_r", "r_precision", "precision_at_1", "mrr", "recall_at_k", "jsd",
                      "mean_pos_similarity", "mean_neg_similarity"}
    assert set(m["map"]) == {"expected", "lower", "upper"} and set(m["recall_at_k"]) == {"1", "5"}
    pq = pd.read_csv(out / "per_query.csv")
    for col in ["method", "query", "label", "n_positives", "ap", "ap_lower", "ap_upper", "map_at_r",
                "r_precision", "precision_at_1"]:
        assert col in pq.columns
    assert len(pq) == 60 and pq["query"].tolist() == list(range(60))
    assert pd.read_parquet(out / "per_query.parquet").shape[0] == 60
    # the summary is the mean over scored queries of the per-query table
    assert m["map"]["expected"] == pytest.approx(pq["ap"].mean(), abs=1e-12)
    # same numbers as the Python API
    api = evaluate(load_files([p])).summary()["methods"]["good"]
    assert api["map"] == m["map"]


def test_several_files_are_several_methods_and_npy_with_labels(tmp_path):
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 40)
    np.save(tmp_path / "a.npy", rng.standard_normal((40, 3)))
    np.save(tmp_path / "b.npy", rng.standard_normal((40, 5)))
    (tmp_path / "labels.txt").write_text("\n".join(map(str, y)) + "\n")
    r = run_cli("evaluate", tmp_path / "a.npy", tmp_path / "b.npy", "--labels", tmp_path / "labels.txt", "--quiet")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert set(s["methods"]) == {"a", "b"}


def test_csv_numeric_columns_and_list_column(tmp_path):
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 3))
    y = rng.integers(0, 3, 30)
    df = pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1], "f2": X[:, 2]})
    df.to_csv(tmp_path / "cols.csv", index=False)
    lists = [json.dumps(v.tolist()) for v in X]
    pd.DataFrame({"label": y, "embedding": lists}).to_csv(tmp_path / "lst.csv", index=False)
    a = evaluate(load_files([tmp_path / "cols.csv"])).summary()["methods"]["cols"]["map"]
    b = evaluate(load_files([tmp_path / "lst.csv"])).summary()["methods"]["lst"]["map"]
    assert a == b


def _write_bad_cases(tmp: Path) -> dict[str, tuple[list, str]]:
    """name -> (cli args after the command, a phrase the message must contain)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 4)).astype(np.float32)
    y = rng.integers(0, 3, 20)
    cases: dict[str, tuple[list, str]] = {}

    def npz(name, **arrays):
        np.savez(tmp / name, **arrays)
        return tmp / name

    Xn = X.copy()
    Xn[7, 2] = np.nan
    cases["nan"] = ([npz("nan.npz", embeddings=Xn, labels=y)], "row 7")
    Xi = X.copy()
    Xi[3, 0] = np.inf
    cases["inf"] = ([npz("inf.npz", embeddings=Xi, labels=y)], "row 3")
    cases["3d"] = ([npz("shape.npz", embeddings=X.reshape(20, 2, 2), labels=y)], "shape")
    cases["1d"] = ([npz("oned.npz", embeddings=X[:, 0], labels=y)], "1-D")
    cases["mismatch"] = ([npz("mismatch.npz", embeddings=X, labels=y[:15])], "length mismatch")
    cases["one_class"] = ([npz("oneclass.npz", embeddings=X, labels=np.zeros(20, int))], "one class")
    Xz = X.copy()
    Xz[[4, 9]] = 0
    cases["zero_cosine"] = ([npz("zeros.npz", embeddings=Xz, labels=y)], "rows 4, 9")
    cases["bad_role"] = ([npz("role.npz", embeddings=X, labels=y, role=np.array(["query", "galery"] * 10))],
                         "galery")
    cases["empty_split"] = ([npz("split.npz", embeddings=X, labels=y, split=np.array(["train", ""] * 10))],
                            "split")
    cases["non_numeric_npz"] = ([npz("strs.npz", embeddings=np.array([["a", "b"]] * 20), labels=y)],
                                "non-numeric")
    (tmp / "empty.npz").write_bytes(b"")
    cases["empty"] = ([tmp / "empty.npz"], "empty")
    good = io.BytesIO()
    np.savez(good, embeddings=X, labels=y)
    (tmp / "corrupt.npz").write_bytes(good.getvalue()[: len(good.getvalue()) // 2])
    cases["corrupt"] = ([tmp / "corrupt.npz"], "corrupt")
    pd.DataFrame({"label": y, "f0": X[:, 0], "f1": ["x"] * 3 + list(X[3:, 1])}).to_csv(tmp / "text.csv", index=False)
    cases["non_numeric_csv"] = ([tmp / "text.csv"], "'f1'")
    (tmp / "empty.csv").write_text("")
    cases["empty_csv"] = ([tmp / "empty.csv"], "empty")
    np.save(tmp / "obj.npy", np.array([{"a": 1}] * 20, dtype=object), allow_pickle=True)
    (tmp / "obj_labels.txt").write_text("\n".join(map(str, y)))
    cases["object_array"] = ([tmp / "obj.npy", "--labels", tmp / "obj_labels.txt"], "unpickling")
    cases["missing_labels"] = ([tmp / "obj_labels.txt"], "unsupported")
    np.save(tmp / "emb.npy", X)
    cases["npy_without_labels"] = ([tmp / "emb.npy"], "labels are missing")
    cases["no_file"] = ([tmp / "nope.npz"], "no such file")
    return cases


@pytest.fixture(scope="module")
def bad_cases(tmp_path_factory):
    return _write_bad_cases(tmp_path_factory.mktemp("bad"))


@pytest.mark.parametrize("command", ["check", "evaluate"])
@pytest.mark.parametrize("case", ["nan", "inf", "3d", "1d", "mismatch", "one_class", "zero_cosine", "bad_role",
                                  "empty_split", "non_numeric_npz", "empty", "corrupt", "non_numeric_csv",
                                  "empty_csv", "object_array", "missing_labels", "npy_without_labels", "no_file"])
def test_bad_input_exits_2_with_a_clear_message(bad_cases, command, case):
    args, phrase = bad_cases[case]
    r = run_cli(command, *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert phrase.lower() in r.stderr.lower(), r.stderr
    assert "Fix:" in r.stderr  # every message says what to do
    assert Path(str(args[0])).name in r.stderr  # and names the file


def test_pickle_file_is_refused_without_being_loaded(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    for name in ("evil.npy", "evil.npz"):
        (tmp_path / name).write_bytes(pickle.dumps(Evil()))
        for command in ("check", "evaluate"):
            r = run_cli(command, tmp_path / name, "--labels", tmp_path / name)
            assert r.returncode == 2 and "pickle" in r.stderr.lower(), r.stderr
    assert not marker.exists()


def test_usage_errors_exit_2_without_traceback(tmp_path):
    p = _good(tmp_path)
    for args in (["evaluate", p, "--k", "0"], ["evaluate", p, "--similarity", "manhattan"], ["frobnicate"]):
        r = run_cli(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr


def test_report_refuses_an_alpha_too_small_for_a_bootstrap_band_before_computing(tmp_path):
    """--band bootstrap at alpha = 1e-7 would need ~1e8 resamples: exit 2 with the fix, before the
    evaluation (no output folder is made) rather than after it."""
    out = tmp_path / "rep"
    r = run_cli("report", ROOT / "demo_data" / "digits.npz", "--band", "bootstrap", "--alpha", "1e-7", "--out", out,
                "--format", "")
    assert r.returncode == 2 and "larger alpha" in r.stderr and "Traceback" not in r.stderr
    assert not out.exists()
    assert "%" not in r.stderr.replace("99.99999 %", "")  # no progress bar: nothing was evaluated
