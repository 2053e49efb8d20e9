"""Loaders: files sniffed by content with conversion hints, archive sizes checked before
allocation, memory-mapped .npy, CSV/TSV dialects and index columns, labels-file headers, text labels."""

from __future__ import annotations

import io
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis_core import InputError, evaluate, load, load_bytes, load_files

ROOT = Path(__file__).resolve().parents[2]


def _xy(n: int = 30, d: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)).astype(np.float32), rng.integers(0, 3, n)


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# --------------------------------------------------------------------------- sniffing


def _torch_zip() -> bytes:
    """The layout torch.save writes (zip with <name>/data.pkl, data/0, version), built without torch."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model/data.pkl", pickle.dumps({"x": 1}, protocol=2))
        z.writestr("model/data/0", b"\0" * 64)
        z.writestr("model/version", b"3\n")
    return buf.getvalue()


def _safetensors() -> bytes:
    header = b'{"emb":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}'
    return struct.pack("<Q", len(header)) + header + b"\0" * 16


FOREIGN = {
    "png": (b"\x89PNG\r\n\x1a\n" + b"\0" * 200, "PNG image"),
    "torch_zip": (_torch_zip(), "PyTorch file"),
    "hdf5": (b"\x89HDF\r\n\x1a\n" + b"\0" * 200, "HDF5 file"),
    "safetensors": (_safetensors(), "safetensors file"),
    "jpeg": (b"\xff\xd8\xff\xe0" + b"\0" * 100, "JPEG image"),
}


@pytest.mark.parametrize("suffix", [".npz", ".npy", ".pt", ".h5", ".safetensors", ".bin"])
@pytest.mark.parametrize("kind", sorted(FOREIGN))
def test_foreign_formats_are_named_with_how_to_convert(kind, suffix):
    data, what = FOREIGN[kind]
    _, y = _xy()
    with pytest.raises(InputError) as e:
        load_bytes([(f"emb{suffix}", data)], labels=("labels.txt", "\n".join(map(str, y)).encode()))
    assert what in e.value.problem and "numpy.savez" in e.value.fix
    assert "rename" not in e.value.fix  # a zip PyTorch file named .npy is not an npz to rename


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", ["evil.npz", "evil.npy", "evil.pkl", "evil.pt", "evil"])
def test_pickles_of_every_protocol_are_refused_unread(tmp_path, protocol, name):
    marker = tmp_path / "pwned"
    data = pickle.dumps(_Evil(marker), protocol=protocol)
    with pytest.raises(InputError, match="pickle") as e:
        load_bytes([(name, data)], labels=("labels.npy", data))
    assert "numpy.savez" in e.value.fix
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(InputError, match="pickle"):
        load_files([p], labels=p)
    assert not marker.exists()


def test_csv_text_that_looks_like_protocol_0_is_still_csv(tmp_path):
    X, y = _xy()
    # starts with 'c' (a protocol-0 opcode) and ends with '.': only binary-suffixed files are sniffed
    text = "c0,c1,label\n" + "".join(f"{a},{b},{int(c)}\n" for a, b, c in zip(X[:, 0], X[:, 1], y, strict=True))
    text += "1.,2.,0\n1.,3.,1\n3.,3.,2."
    (tmp_path / "c.csv").write_text(text)
    ds = load(tmp_path / "c.csv")
    assert ds.n_items == 33 and ds.embeddings["c"].shape == (33, 2)


def test_npz_that_is_a_single_array_or_not_an_archive(tmp_path):
    X, y = _xy()
    buf = io.BytesIO()
    np.save(buf, X)
    with pytest.raises(InputError, match="single array"):
        load_bytes([("a.npz", buf.getvalue())])
    with pytest.raises(InputError, match="rename it to .npz"):
        load_bytes([("a.npy", _npz_bytes(embeddings=X, labels=y))], labels=("l.txt", b"0\n1\n"))
    with pytest.raises(InputError, match="not a NumPy .npz"):
        load_bytes([("a.npz", b"hello, this is text\n")])


# --------------------------------------------------------------------------- sizes before allocation


def _lying_npz(shape: tuple[int, ...], n_data: int = 4096) -> bytes:
    """An npz whose 'embeddings' header declares ``shape`` float32 but holds ``n_data`` bytes."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f4", "fortran_order": False, "shape": shape})
    member.write(b"\0" * n_data)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("embeddings.npy", member.getvalue())
        lab = io.BytesIO()
        np.save(lab, np.zeros(shape[0] if shape else 1, np.int64)[:10])
        z.writestr("labels.npy", lab.getvalue())
    return buf.getvalue()


@pytest.mark.parametrize("shape", [(10**7, 10**4), (2**20, 2**10)])
def test_header_claiming_more_than_the_archive_holds_is_refused_before_allocation(shape):
    data = _lying_npz(shape)
    assert len(data) < 2000
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="truncated or corrupt") as e:
            load_bytes([("huge.npz", data)], max_bytes=1 << 60)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(shape) in e.value.problem
    assert peak < 5 << 20  # nothing of the declared size was allocated


def test_archive_over_the_memory_limit_is_refused_with_its_shape():
    data = _npz_bytes(embeddings=np.zeros((2000, 500), np.float32), labels=np.arange(2000) % 3)
    with pytest.raises(InputError, match=r"over the limit of 1.0 MiB") as e:
        load_bytes([("big.npz", data)], max_bytes=1 << 20)
    assert "(2000, 500)" in e.value.problem and "max_bytes" in e.value.fix
    assert load_bytes([("big.npz", data)], max_bytes=8 << 20).n_items == 2000
    # the default is stated and finite
    from analysis_core.io import default_max_bytes
    assert 0 < default_max_bytes() < 1 << 50


def test_compressed_archive_is_checked_against_its_uncompressed_size(tmp_path):
    buf = io.BytesIO()
    np.savez_compressed(buf, embeddings=np.zeros((4000, 1000), np.float32), labels=np.arange(4000) % 2)
    assert len(buf.getvalue()) < 100_000  # 16 MB of zeros in a small file
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="over the limit"):
            load_bytes([("zeros.npz", buf.getvalue())], max_bytes=4 << 20)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20


def test_npy_on_disk_is_memory_mapped_and_truncated_npy_refused(tmp_path):
    X = np.random.default_rng(0).standard_normal((20000, 256)).astype(np.float32)  # 20 MB
    np.save(tmp_path / "emb.npy", X)
    (tmp_path / "labels.txt").write_text("\n".join(str(i % 50) for i in range(20000)))
    tracemalloc.start()
    try:
        ds = load_files([tmp_path / "emb.npy"], labels=tmp_path / "labels.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    e = ds.embeddings["emb"]
    base = e
    while base is not None and not isinstance(base, np.memmap):
        base = base.base
    assert isinstance(base, np.memmap)
    assert peak < 8 << 20  # well under the 20 MB array: not read whole
    np.testing.assert_array_equal(e, X)
    data = (tmp_path / "emb.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(data[: len(data) // 3])
    with pytest.raises(InputError, match="truncated or corrupt") as err:
        load_files([tmp_path / "cut.npy"], labels=tmp_path / "labels.txt")
    assert "(20000, 256)" in err.value.problem


def test_object_array_refused_from_its_header():
    data = _npz_bytes(embeddings=np.zeros((4, 2)), labels=np.array([{"a": 1}] * 4, dtype=object))
    with pytest.raises(InputError, match="'labels' is an object array"):
        load_bytes([("obj.npz", data)])


# --------------------------------------------------------------------------- CSV dialects and index


def test_to_csv_index_column_is_dropped_with_a_note(tmp_path):
    X, y = _xy()
    df = pd.DataFrame({"label": y, **{f"f{i}": X[:, i] for i in range(4)}})
    df.to_csv(tmp_path / "with_index.csv")  # writes the 0..n-1 index as an unnamed first column
    df.to_csv(tmp_path / "clean.csv", index=False)
    ds = load(tmp_path / "with_index.csv")
    assert ds.embeddings["with_index"].shape == (30, 4)
    assert len(ds.notes) == 1 and "index" in ds.notes[0] and "index=False" in ds.notes[0]
    assert load(tmp_path / "clean.csv").notes == ()
    a = evaluate(ds).to_dict()["methods"]["with_index"]
    b = evaluate(load(tmp_path / "clean.csv")).to_dict()["methods"]["clean"]
    assert a == b


def test_unnamed_column_that_is_not_a_range_index_is_refused(tmp_path):
    X, y = _xy()
    df = pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1]}, index=np.arange(30) * 7)
    df.to_csv(tmp_path / "ids.csv")
    with pytest.raises(InputError, match="no header") as e:
        load(tmp_path / "ids.csv")
    assert "index=False" in e.value.fix


def test_cli_prints_loader_notes(tmp_path):
    X, y = _xy()
    pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1]}).to_csv(tmp_path / "t.csv")
    r = subprocess.run([sys.executable, "-m", "analysis_core", "check", str(tmp_path / "t.csv")],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "note:" in r.stderr and "index" in r.stderr


@pytest.mark.parametrize(("name", "sep"), [("t.tsv", "\t"), ("tab.csv", "\t"), ("semi.csv", ";"), ("c.csv", ",")])
def test_delimiter_is_sniffed(tmp_path, name, sep):
    X, y = _xy()
    lists = ["[" + ", ".join(map(str, v)) + "]" for v in X.astype(np.float64)]
    pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1]}).to_csv(tmp_path / name, sep=sep, index=False)
    ds = load(tmp_path / name)
    ref = pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1]})
    np.testing.assert_allclose(ds.embeddings[Path(name).stem], ref[["f0", "f1"]].to_numpy(), rtol=1e-6)
    np.testing.assert_array_equal(ds.labels, y)
    assert any("separated" in n for n in ds.notes) == (name.endswith(".csv") and sep != ",")
    # a list column whose cells hold commas, in a semicolon file
    pd.DataFrame({"label": y, "embedding": lists}).to_csv(tmp_path / f"l_{name}", sep=sep, index=False)
    np.testing.assert_allclose(load(tmp_path / f"l_{name}").embeddings[f"l_{Path(name).stem}"], X, rtol=1e-6)


# --------------------------------------------------------------------------- labels


def test_text_labels_stay_text_and_plain_integers_become_integers(tmp_path):
    X, _ = _xy(n=6)
    y = ["007", "7", "007", "7", "12", "12"]
    pd.DataFrame({"label": y, "f0": X[:, 0], "f1": X[:, 1]}).to_csv(tmp_path / "s.csv", index=False)
    ds = load(tmp_path / "s.csv")
    assert ds.labels.tolist() == y and ds.n_classes == 3
    pd.DataFrame({"label": [7, 7, 8, 8, -1, -1], "f0": X[:, 0]}).to_csv(tmp_path / "i.csv", index=False)
    assert load(tmp_path / "i.csv").labels.dtype == np.int64
    np.save(tmp_path / "e.npy", X)
    (tmp_path / "labels.txt").write_text("\n".join(y) + "\n")
    ds = load(tmp_path / "e.npy", labels=tmp_path / "labels.txt")
    assert ds.labels.tolist() == y and ds.n_classes == 3
    ids = pd.DataFrame({"label": [1, 1, 2, 2, 3, 3], "id": ["001", "002", "003", "004", "005", "006"],
                        "f0": X[:, 0]})
    ids.to_csv(tmp_path / "ids.csv", index=False)
    assert load(tmp_path / "ids.csv").ids.tolist() == ids["id"].tolist()


@pytest.mark.parametrize(("name", "text", "note"), [
    ("labels.txt", "label\n{rows}", "'label'"),
    ("labels.txt", "{rows}", None),
    ("labels.txt", "species\n{rows}", "'species'"),  # text above integer labels, one line too many
    ("labels.csv", "class\n{rows}", "'class'"),
    ("labels.csv", "{rows}", None),  # no header: the first label is not swallowed as one
    ("labels.csv", "id,label\n{idrows}", "'label' column"),
    ("labels.tsv", "label\n{rows}", "'label'"),
])
def test_labels_file_header_is_recognised_and_said(tmp_path, name, text, note):
    X, y = _xy()
    np.save(tmp_path / "e.npy", X)
    rows = "\n".join(map(str, y))
    idrows = "\n".join(f"{i},{v}" for i, v in enumerate(y))
    (tmp_path / name).write_text(text.format(rows=rows, idrows=idrows) + "\n")
    ds = load(tmp_path / "e.npy", labels=tmp_path / name)
    np.testing.assert_array_equal(ds.labels, y)
    if note is None:
        assert ds.notes == ()
    else:
        assert len(ds.notes) == 1 and note in ds.notes[0] and name in ds.notes[0]


def test_labels_file_one_line_too_many_is_named(tmp_path):
    X, _ = _xy(n=4)
    np.save(tmp_path / "e.npy", X)
    (tmp_path / "labels.txt").write_text("cat\ndog\ncat\ndog\ncat\n")
    with pytest.raises(InputError, match="one too many") as e:
        load(tmp_path / "e.npy", labels=tmp_path / "labels.txt")
    assert "header" in e.value.fix


def test_npy_upload_is_checked_before_allocation():
    buf = io.BytesIO()
    np.save(buf, np.zeros((2000, 500), np.float32))
    data = buf.getvalue()
    labels = ("labels.txt", "\n".join(str(i % 2) for i in range(2000)).encode())
    with pytest.raises(InputError, match="over the limit") as e:
        load_bytes([("e.npy", data)], labels=labels, max_bytes=1 << 20)
    assert "(2000, 500)" in e.value.problem
    with pytest.raises(InputError, match="truncated or corrupt"):
        load_bytes([("e.npy", data[: len(data) // 2])], labels=labels)
    assert load_bytes([("e.npy", data)], labels=labels, max_bytes=8 << 20).n_items == 2000
