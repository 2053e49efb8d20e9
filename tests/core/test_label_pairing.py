"""A labels file given beside ``.npy`` embeddings (uploaded together, or listed with them on the
command line) is paired by its name (``X.npy`` + ``X_labels.npy``, ``labels_X.npy``,
``X.labels.txt``, ...) or as the only candidate; anything ambiguous is a message naming the files,
never a guess and never a traceback."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis_core import InputError, evaluate, load_bytes, load_files
from analysis_core.io import labels_name, pair_labels
from tests.helpers import run_cli

RNG = np.random.default_rng(21)
Y = np.repeat([0, 1, 2], 10)
X = (np.repeat(RNG.standard_normal((3, 5)), 10, axis=0) + RNG.standard_normal((30, 5))).astype(np.float32)
Z = RNG.standard_normal((30, 3))


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _txt(y: np.ndarray) -> bytes:
    return ("\n".join(map(str, y)) + "\n").encode()


LAB_NPY, LAB_TXT, EMB_X, EMB_Z = _npy(Y), _txt(Y), _npy(X), _npy(Z)


@pytest.mark.parametrize(("name", "expected"), [
    ("labels.npy", (True, None)), ("label.txt", (True, None)), ("LABELS.csv", (True, None)),
    ("X_labels.npy", (True, "X")), ("X-labels.npy", (True, "X")), ("X.labels.txt", (True, "X")),
    ("X labels.csv", (True, "X")), ("labels_X.npy", (True, "X")), ("X_Label.npy", (True, "X")),
    ("d_100k_labels.npy", (True, "d_100k")), ("labels-run.2.npy", (True, "run.2")),
    ("Xlabels.npy", (False, None)), ("a_labels_b.npy", (False, None)), ("labeled.npy", (False, None)),
    ("X.npy", (False, None)), ("my_label_set.txt", (False, None)),
])
def test_a_name_says_labels_and_which_embeddings_file(name, expected):
    assert labels_name(name) == expected


@pytest.mark.parametrize("lab_name", ["X_labels.npy", "X-labels.npy", "labels_X.npy", "X.labels.txt", "X_labels.csv",
                                      "x_LABELS.npy", "labels.npy", "y.npy", "classes.txt"])
@pytest.mark.parametrize("labels_first", [False, True])
def test_one_npy_and_its_labels_file_load_together(lab_name, labels_first):
    lab = LAB_TXT if lab_name.endswith((".txt", ".csv")) else LAB_NPY
    files = [("X.npy", EMB_X), (lab_name, lab)]
    ds = load_bytes(files[::-1] if labels_first else files)
    assert ds.methods == ["X"] and ds.source == "X.npy"
    np.testing.assert_array_equal(ds.labels, Y)
    np.testing.assert_array_equal(ds.embeddings["X"], X)
    assert any("X.npy" in n and lab_name in n for n in ds.notes), ds.notes  # says what it paired


def test_a_pair_on_disk_evaluates_as_the_arrays_do(tmp_path):
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "X_labels.npy", Y)
    got = evaluate(load_files([tmp_path / "X_labels.npy", tmp_path / "X.npy"])).summary()["methods"]["X"]
    ref = evaluate(X, Y).summary()["methods"]
    assert got["map"] == next(iter(ref.values()))["map"]


def test_two_pairs_are_matched_by_name_whatever_their_order():
    files = [("b_labels.npy", LAB_NPY), ("a.npy", EMB_X), ("b.npy", EMB_Z),
             ("a.labels.txt", LAB_TXT)]
    pairs, notes = pair_labels(files)
    assert [(f[0], lab[0]) for f, lab in pairs] == [("a.npy", "a.labels.txt"), ("b.npy", "b_labels.npy")]
    assert len(notes) == 2 and all("paired by name" in n for n in notes)
    ds = load_bytes(files)
    assert ds.methods == ["a", "b"]
    np.testing.assert_array_equal(ds.labels, Y)


@settings(max_examples=30, deadline=None)
@given(st.permutations([("a.npy", EMB_X), ("b.npy", EMB_Z), ("labels_a.npy", LAB_NPY), ("b-labels.txt", LAB_TXT),
                        ("extra.npz", b"")]))
def test_the_pairing_does_not_depend_on_the_file_order(files):
    pairs, _ = pair_labels(files)
    assert {f[0]: (lab[0] if lab else None) for f, lab in pairs} == {"a.npy": "labels_a.npy",
                                                                     "b.npy": "b-labels.txt", "extra.npz": None}


def test_one_labels_file_named_labels_is_shared_by_every_npy():
    ds = load_bytes([("a.npy", EMB_X), ("b.npy", EMB_Z), ("labels.npy", LAB_NPY)])
    assert ds.methods == ["a", "b"]
    np.testing.assert_array_equal(ds.labels, Y)


def test_a_named_pair_and_a_shared_labels_file_together():
    pairs, _ = pair_labels([("a.npy", EMB_X), ("b.npy", EMB_Z), ("a_labels.npy", LAB_NPY), ("labels.txt", LAB_TXT)])
    assert [(f[0], lab[0]) for f, lab in pairs] == [("a.npy", "a_labels.npy"), ("b.npy", "labels.txt")]


@pytest.mark.parametrize(("files", "message"), [
    # two .npy files, one labels file whose name pairs with neither
    ([("a.npy", EMB_X), ("b.npy", EMB_Z), ("y.npy", LAB_NPY)], "could be the labels of a.npy or b.npy"),
    ([("a.npy", EMB_X), ("b.npy", EMB_Z), ("classes.txt", LAB_TXT)], "could be the labels of a.npy or b.npy"),
    # one .npy has its labels by name, the other has none
    ([("a.npy", EMB_X), ("b.npy", EMB_Z), ("a_labels.npy", LAB_NPY)], "no labels file pairs with it"),
    # two unnamed labels files for two .npy files
    ([("a.npy", EMB_X), ("b.npy", EMB_Z), ("y1.txt", LAB_TXT), ("y2.txt", LAB_TXT)], "cannot tell which"),
    # two labels files name the same .npy
    ([("a.npy", EMB_X), ("a_labels.npy", LAB_NPY), ("labels_a.txt", LAB_TXT)], "several labels files name it"),
    # a labels file left over is not silently dropped
    ([("a.npy", EMB_X), ("a_labels.npy", LAB_NPY), ("labels.npy", LAB_NPY)], "pairs with no embeddings file"),
    ([("a.npy", EMB_X), ("a_labels.npy", LAB_NPY), ("b_labels.npy", LAB_NPY)], "pairs with no embeddings file"),
    # paired by name, but the two labels files disagree: several methods are the same items
    ([("a.npy", EMB_X), ("b.npy", EMB_Z), ("a_labels.npy", LAB_NPY), ("b_labels.npy", _npy(Y[::-1]))],
     "labels differ"),
    # a labels file alone
    ([("a_labels.npy", LAB_NPY)], "looks like a labels file"),
    # a 1-D .npy with nothing 2-D beside it stays the embeddings the reader refuses
    ([("a.npy", LAB_NPY), ("labels.npy", LAB_NPY)], "1-D"),
])
def test_ambiguous_or_inconsistent_files_are_a_message_naming_them(files, message):
    with pytest.raises(InputError) as err:
        load_bytes(files)
    assert message in str(err.value)
    assert "Fix:" in str(err.value)


def test_the_command_line_pairs_files_listed_together(tmp_path):
    np.save(tmp_path / "d_100k.npy", X)
    np.save(tmp_path / "d_100k_labels.npy", Y)
    (tmp_path / "labels.txt").write_text(_txt(Y).decode())
    r = run_cli("evaluate", tmp_path / "d_100k.npy", tmp_path / "d_100k_labels.npy", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "note: labels of d_100k.npy: d_100k_labels.npy (paired by name)" in r.stderr
    explicit = run_cli("evaluate", tmp_path / "d_100k.npy", "--labels", tmp_path / "labels.txt", "--quiet")
    assert json.loads(r.stdout)["methods"]["d_100k"]["map"] == json.loads(explicit.stdout)["methods"]["d_100k"]["map"]


def test_the_command_line_refuses_an_ambiguous_labels_file_without_a_traceback(tmp_path):
    np.save(tmp_path / "a.npy", X)
    np.save(tmp_path / "b.npy", Z)
    np.save(tmp_path / "y.npy", Y)
    r = run_cli("evaluate", tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "y.npy", "--quiet")
    assert r.returncode == 2
    assert "could be the labels of" in r.stderr and "Traceback" not in r.stderr
