"""What a load may allocate is checked from what files declare, before anything is inflated: a
zip bomb is refused uninflated, files together count against one limit, and uncompressed arrays in
memory are views of the uploaded bytes (an accepted upload costs at most 1.5x its data)."""

from __future__ import annotations

import io
import tracemalloc
import zipfile

import numpy as np
import pytest

from analysis_core import InputError, load_bytes
from analysis_core.io.numpy_files import Allowance, OverBudget

from ..helpers import zip_bomb

MB = 2**20


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith("VmRSS:"))


def _npz(compressed: bool = False, **arrays) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _traced(fn) -> int:
    """The highest traced allocation while ``fn`` runs (numpy reports its arrays to tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.slow
def test_a_zip_bomb_is_refused_from_its_declared_size_without_inflating():
    """2 MB that inflate to 2 GB of zeros, with a 1 GiB limit: refused naming the declared shape;
    the process grows by far less than 200 MB (traced allocations and resident set)."""
    bomb = zip_bomb(2 * 10**9)
    assert len(bomb) < 3 * MB
    with zipfile.ZipFile(io.BytesIO(bomb)) as z:  # the oracle: what the archive's directory says
        assert z.getinfo("embeddings.npy").file_size > 2 * 10**9
    start = _rss_mb()

    def load():
        with pytest.raises(OverBudget) as e:
            load_bytes([("bomb.npz", bomb)], max_bytes=1 << 30)
        assert "(500000, 1000)" in e.value.problem and "1.0 GiB" in e.value.problem

    assert _traced(load) < 200 * MB
    assert _rss_mb() - start < 200


def test_files_of_one_load_count_together_and_none_is_read_when_they_are_over():
    """Two 8 MB files under a 12 MiB limit each but not together: the load is refused before
    either is inflated (nothing near 8 MB is allocated); each alone loads."""
    y = np.arange(2000) % 2
    files = [(f"m{i}.npz", _npz(compressed=True, embeddings=np.full((2000, 1000), i + 1, np.float32), labels=y))
             for i in range(2)]
    got = []
    peak = _traced(lambda: got.append(pytest.raises(OverBudget, load_bytes, files, max_bytes=12 * MB)))
    assert peak < 2 * MB
    assert "m1.npz" in str(got[0].value) and "with the 7.6 MiB of arrays before it" in got[0].value.problem
    for f in files:
        assert load_bytes([f], max_bytes=12 * MB).n_items == 2000


def test_embeddings_converted_to_float_count_their_copy():
    """int8 embeddings (1 MB declared) become float32 (4 MB more, both alive at once): a 3 MiB limit
    refuses them although the declared array fits; 6 MiB loads them."""
    X = np.random.default_rng(0).integers(-5, 5, (1000, 1000), dtype=np.int8)
    X[:, 0] = 7  # no zero vector
    data = _npz(embeddings=X, labels=np.arange(1000) % 2)
    with pytest.raises(OverBudget, match="over the limit of 3.0 MiB"):
        load_bytes([("i8.npz", data)], max_bytes=3 * MB)
    ds = load_bytes([("i8.npz", data)], max_bytes=6 * MB)
    np.testing.assert_array_equal(ds.embeddings["i8"], X.astype(np.float32))


def test_an_allowance_takes_each_array_once_and_says_how_to_raise_it():
    a = Allowance(100, what="a test budget", fix="raise it.")
    a.take("f.npz", "embeddings", 60, "60 bytes")
    a.take("f.npz", "embeddings", 60, "60 bytes")  # the same array again: free (a load checks twice)
    assert a.taken == 60
    with pytest.raises(OverBudget) as e:
        a.take("f.npz", "labels", 41, "41 bytes")
    assert "a test budget" in e.value.problem and e.value.fix == "raise it." and isinstance(e.value, InputError)
    a.take("f.npz", "labels", 40, "40 bytes")
    assert a.taken == 100


@pytest.mark.parametrize("fortran", [False, True])
def test_uncompressed_arrays_in_memory_are_views_of_the_uploaded_bytes(fortran):
    """np.savez members and .npy uploads: the embeddings share memory with the upload (no copy) and
    equal the saved array, C or Fortran order."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((300, 16)).astype(np.float32)
    X = np.asfortranarray(X) if fortran else X
    y = np.arange(300) % 3
    data = _npz(embeddings=X, labels=y)
    ds = load_bytes([("u.npz", data)])
    raw = np.frombuffer(data, np.uint8)
    np.testing.assert_array_equal(ds.embeddings["u"], X)
    assert np.shares_memory(ds.embeddings["u"], raw) != fortran  # a Fortran array is copied to C order
    npy = _npy(X)
    ds = load_bytes([("e.npy", npy), ("e_labels.npy", _npy(y))])
    np.testing.assert_array_equal(ds.embeddings["e"], X)
    assert np.shares_memory(ds.embeddings["e"], np.frombuffer(npy, np.uint8)) != fortran


def test_a_corrupt_uncompressed_member_is_refused_not_viewed():
    """A flipped byte in an np.savez member's data: the archive's checksum refuses it, as zipfile
    would when inflating."""
    X = np.random.default_rng(2).standard_normal((200, 8)).astype(np.float32)
    data = bytearray(_npz(embeddings=X, labels=np.arange(200) % 2))
    at = bytes(data).index(X.tobytes()[:64]) + 100
    data[at] ^= 0xFF
    with pytest.raises(InputError, match="corrupt"):
        load_bytes([("c.npz", bytes(data))])


@pytest.mark.parametrize("compressed", [False, True])
def test_an_accepted_upload_peaks_at_most_at_one_and_a_half_times_its_data(compressed):
    """64 MB of float32 vectors (random: incompressible) loaded from the upload's bytes: the
    highest traced allocation is at most 1.5x the decompressed data."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((16_000, 1000)).astype(np.float32)
    data = _npz(compressed=compressed, embeddings=X, labels=np.arange(16_000) % 50)
    del X
    peak = _traced(lambda: load_bytes([("big.npz", data)]))
    assert peak <= 1.5 * 64e6, peak / 1e6


@pytest.mark.parametrize("fortran", [False, True])
@pytest.mark.parametrize("form", ["savez", "savez_compressed", "npy"])
def test_an_array_read_as_a_view_takes_no_new_bytes(form, fortran):
    """What a load declares it allocates (``Allowance.take``'s ``new``, which a server budget that
    counts the uploaded bytes already reserves) is nothing exactly when the vectors it keeps share
    memory with the uploaded bytes, and their whole size otherwise."""
    taken: dict[tuple[str, str], int] = {}

    class Recording(Allowance):
        def _grant(self, name, what, nbytes, desc, new):
            taken[name, what] = new

    X = np.random.default_rng(3).standard_normal((200, 16)).astype(np.float32)
    X = np.asfortranarray(X) if fortran else X
    y = np.arange(200) % 2
    if form == "npy":
        files = [("e.npy", _npy(X)), ("e_labels.npy", _npy(y))]
    else:
        files = [("e.npz", _npz(compressed=form == "savez_compressed", embeddings=X, labels=y))]
    ds = load_bytes(files, max_bytes=Recording(None))
    viewed = np.shares_memory(ds.embeddings["e"], np.frombuffer(files[0][1], np.uint8))
    assert viewed == (form != "savez_compressed" and not fortran)
    assert taken[files[0][0], "embeddings"] == (0 if viewed else X.nbytes)
