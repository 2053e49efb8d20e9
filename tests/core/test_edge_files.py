"""Edges of the command line and the file readers found by a hostile pass (2026-11-23): a binary
labels file read as text, an .npz with a member that is not an array, data without a positive,
a labels file given for files that hold their own, vectors so large that scores overflow, and
paths the file system refuses."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import analysis_core as ac
from analysis_core.errors import InputError

from ..helpers import ROOT, run_cli


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _blobs(n_classes=4, per=8, d=6, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), per)
    X = (np.repeat(rng.standard_normal((n_classes, d)) * 2, per, axis=0) + rng.standard_normal((y.size, d)))
    return X.astype(dtype), y


def test_a_labels_file_that_is_an_archive_is_refused_not_read_as_text(tmp_path):
    X, y = _blobs()
    np.save(tmp_path / "emb.npy", X)
    _npz(tmp_path / "labels.npz", labels=y)
    r = run_cli("check", tmp_path / "emb.npy", "--labels", tmp_path / "labels.npz")
    assert r.returncode == 2 and "NumPy .npz archive" in r.stderr and "Traceback" not in r.stderr


def test_a_labels_file_for_a_file_with_its_own_labels_is_refused(tmp_path):
    X, y = _blobs()
    _npz(tmp_path / "good.npz", embeddings=X, labels=y)
    (tmp_path / "labels.txt").write_text("\n".join(map(str, y)))
    r = run_cli("check", tmp_path / "good.npz", "--labels", tmp_path / "labels.txt")
    assert r.returncode == 2 and "only .npy embeddings take one" in r.stderr


def test_a_labels_file_alone_is_named_as_such(tmp_path):
    np.save(tmp_path / "labels.npy", np.arange(5))
    r = run_cli("check", tmp_path / "labels.npy")
    assert r.returncode == 2 and "looks like a labels file" in r.stderr


def test_an_npz_with_a_member_that_is_not_an_array_loads(tmp_path):
    """numpy reads such an archive (a README or a folder entry beside the arrays); so do we."""
    X, y = _blobs()
    p = _npz(tmp_path / "extra.npz", embeddings=X, labels=y)
    with zipfile.ZipFile(p, "a") as zf:
        zf.writestr("README.txt", "made by hand")
        zf.writestr("notes/", "")
    ds = ac.load(p)
    np.testing.assert_array_equal(ds.embeddings["extra"], X)
    r = run_cli("check", p)
    assert r.returncode == 0, r.stderr


def test_data_without_a_positive_is_evaluated_with_a_warning(tmp_path):
    rng = np.random.default_rng(0)
    p = _npz(tmp_path / "singletons.npz", embeddings=rng.standard_normal((6, 4)).astype(np.float32),
             labels=np.arange(6))
    r = run_cli("check", p)
    assert r.returncode == 0 and "warning: every class has one item" in r.stderr
    r = run_cli("evaluate", p, "--quiet")
    assert r.returncode == 0 and "warning: no query has a positive" in r.stderr
    r = run_cli("evaluate", p, "--quiet", "--query-sample", "3")
    assert r.returncode == 2 and "only 0 queries have a positive" in r.stderr


def test_a_group_size_larger_than_the_classes_warns(tmp_path):
    X, y = _blobs()
    r = run_cli("evaluate", _npz(tmp_path / "g.npz", embeddings=X, labels=y), "--quiet", "--group-size", "50")
    assert r.returncode == 0 and "grouped recall undefined" in r.stderr


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), exponents=st.lists(st.integers(-1000, 1000), min_size=32, max_size=32),
       precision=st.sampled_from(["float32", "float64"]))
def test_cosine_results_do_not_change_when_rows_are_scaled_by_powers_of_two(seed, exponents, precision):
    """Cosine is scale-free: each row times 2^k (k up to +-1000, values ~1e+-300, whose squares
    overflow or underflow float64) gives the same results bit for bit (values ~1e200 gave every
    score 0 before)."""
    X, y = _blobs(seed=seed, dtype=np.float64)
    scaled = np.ldexp(X, np.array(exponents)[:, None])
    assert np.isfinite(scaled).all() and (np.abs(scaled).max(axis=1) > 0).all()
    a = ac.evaluate(X, y, precision=precision, n_bins=16).to_dict()["methods"]["embeddings"]
    b = ac.evaluate(scaled, y, precision=precision, n_bins=16).to_dict()["methods"]["embeddings"]
    assert a == b


@pytest.mark.parametrize(("scale", "similarity", "precision", "suggests64"), [
    (1e200, "dot", "float64", False), (1e200, "euclidean", "float32", False), (1e20, "dot", "float32", True),
    (1e160, "euclidean", "float64", False)])
def test_scores_that_overflow_are_refused_with_the_fix(scale, similarity, precision, suggests64):
    X, y = _blobs(dtype=np.float64)
    with pytest.raises(InputError, match="overflow") as exc:
        ac.evaluate(X * scale, y, similarity=similarity, precision=precision)
    assert ("--precision float64" in str(exc.value)) == suggests64
    assert "divide the embeddings" in str(exc.value)


def test_dot_scores_within_range_in_float64_are_computed_there():
    """1e20 overflows float32 dot products but not float64: the double-precision pass ranks them
    as the unscaled data (scaling by a power of ten is not exact, so compare metrics, not bits)."""
    X, y = _blobs(dtype=np.float64)
    a = ac.evaluate(X, y, similarity="dot", precision="float64").to_dict()["methods"]["embeddings"]["map"]
    b = ac.evaluate(X * 1e20, y, similarity="dot", precision="float64").to_dict()["methods"]["embeddings"]["map"]
    assert a["expected"] == pytest.approx(b["expected"], abs=1e-12)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="needs root and setpriv to run as an unprivileged user (root ignores permissions)")
def test_paths_the_file_system_refuses_exit_2_naming_the_path():
    """As a user who may not read the input, or write the output folder, the package's folder or
    a home: exit 2 naming the path (not 'internal error'); numba's cache then goes to a folder
    of the user's own (it refused to compile: "no locator available")."""
    import tempfile

    X, y = _blobs()
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # pytest's tmp_path sits under a 0700 folder
        _refused_paths(Path(d), X, y)


def _refused_paths(tmp_path, X, y):
    tmp_path.chmod(0o755)
    good = _npz(tmp_path / "good.npz", embeddings=X, labels=y)
    good.chmod(0o644)
    secret = _npz(tmp_path / "secret.npz", embeddings=X, labels=y)
    secret.chmod(0o600)
    ro = tmp_path / "ro_out"
    ro.mkdir(mode=0o555)
    ro.chmod(0o555)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}

    def as_nobody(*args):
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-m", "analysis_core",
               *map(str, args)]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
                            "import analysis_core"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    if probe.returncode != 0:  # e.g. a checkout under a 0700 folder (mktemp -d): nothing to test as that user
        why = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        pytest.skip(f"an unprivileged user cannot import this checkout ({why})")
    for args, path in ((("check", secret), "secret.npz"), (("evaluate", good, "--quiet", "--out", ro), "ro_out")):
        r = as_nobody(*args)
        assert r.returncode == 2, r.stderr
        assert path in r.stderr and "Permission denied" in r.stderr and "internal error" not in r.stderr


def test_missing_embedding_cells_are_named(tmp_path):
    p = tmp_path / "list.csv"
    p.write_text('label,embedding\na,"[1, 2]"\nb,\na,"[0, 1]"\nb,"[2, 2]"\n')
    r = run_cli("check", p)
    assert r.returncode == 2 and "no vector at row 1" in r.stderr


def test_a_non_numeric_feature_column_is_named_with_its_type_when_no_value_is_bad(tmp_path):
    buf = io.StringIO()
    buf.write("label,a,b\n")
    for i in range(6):
        buf.write(f"{i % 2},{10**25 + i},{i}\n")  # numbers, but beyond 64-bit integers
    (tmp_path / "big.csv").write_text(buf.getvalue())
    r = run_cli("check", tmp_path / "big.csv")
    assert r.returncode == 2 and "(e.g. row )" not in r.stderr and "column 'a' is not numeric" in r.stderr


@pytest.mark.parametrize("text", ["\ufeffcat\ncat\ndog\ndog\nemu\nemu\n", "PAR1\nPAR1\nPAR2\nPAR2\nPAR3\nPAR3\n",
                                  "cat\r\ncat\r\ndog\r\ndog\r\nemu\r\nemu\r\n"])
def test_text_labels_files_load_whatever_their_first_bytes(tmp_path, text):
    """A UTF-8 BOM is not part of the first label (it split a class in two), a first label
    'PAR1' (a gene) is not a Parquet magic number, Windows line ends are line ends."""
    X, _ = _blobs(3, 2)
    np.save(tmp_path / "emb.npy", X)
    (tmp_path / "labels.txt").write_bytes(text.encode("utf-8"))
    ds = ac.load(tmp_path / "emb.npy", labels=tmp_path / "labels.txt")
    assert np.bincount(ds.label_codes).tolist() == [2, 2, 2]
    assert not any(lab.startswith("\ufeff") for lab in ds.labels.astype(str))


def test_a_utf16_labels_file_is_named_as_such(tmp_path):
    X, _ = _blobs(2, 3)
    np.save(tmp_path / "emb.npy", X)
    (tmp_path / "labels.txt").write_bytes("a\na\na\nb\nb\nb\n".encode("utf-16"))
    with pytest.raises(InputError, match="UTF-16"):
        ac.load(tmp_path / "emb.npy", labels=tmp_path / "labels.txt")


@pytest.mark.parametrize("seed", [2**53 + 1, 2**63 - 1, np.int64(2**62 + 3), np.uint64(2**63 + 5)])
def test_whole_numbers_beyond_two_to_the_53_are_whole_numbers(seed):
    X, y = _blobs()
    assert ac.evaluate(X, y, seed=seed).to_dict()["methods"]


def test_a_zero_dimensional_array_of_cut_offs_is_refused_by_name():
    X, y = _blobs()
    with pytest.raises(InputError, match="ks"):
        ac.evaluate(X, y, ks=np.array(5))


def test_the_overflow_message_gives_the_true_norm_and_the_working_fix():
    """float64 vectors of norm ~3e39 overflow float32 scores but not float64 ones: the message
    gives that norm (it said 'above 1e154', from the float32 infinities) and offers float64."""
    X, y = _blobs(dtype=np.float64)
    X = X * 1e39
    true = float(np.max(np.linalg.norm(X / 1e39, axis=1))) * 1e39
    with pytest.raises(InputError, match="precision float64") as exc:
        ac.evaluate(X, y, similarity="euclidean")
    assert f"{true:.3g}" in str(exc.value)
    assert ac.evaluate(X, y, similarity="euclidean", precision="float64").to_dict()["methods"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a folder owned by another user")
def test_the_fallback_numba_cache_is_never_a_folder_someone_else_controls(monkeypatch):
    """numba unpickles its cache index: a cache folder another user made beforehand in the shared
    temporary directory (predictable name, world-writable) would run their code as this user.
    Such a folder, or one of ours that others may enter, is passed over for a fresh private one."""
    import stat
    import tempfile

    import analysis_core.engine as engine

    with tempfile.TemporaryDirectory() as shared:
        monkeypatch.setattr(tempfile, "tempdir", shared)
        monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
        planted = Path(shared) / f"analysis_core-numba-{os.getuid()}"
        planted.mkdir()
        os.chown(planted, 4242, 4242)
        planted.chmod(0o777)
        chosen = engine._private_cache_dir()
        assert Path(chosen) != planted and Path(chosen).parent == Path(shared)
        st_ = os.lstat(chosen)
        assert st_.st_uid == os.getuid() and not st_.st_mode & 0o077 and stat.S_ISDIR(st_.st_mode)
        os.chown(planted, os.getuid(), os.getgid())  # ours, but others may write into it
        assert Path(engine._private_cache_dir()) != planted
        planted.chmod(0o700)  # ours and private: used
        assert Path(engine._private_cache_dir()) == planted
        planted.rmdir()
        assert Path(engine._private_cache_dir()) == planted and planted.is_dir()  # made 0700
        assert not planted.stat().st_mode & 0o077
