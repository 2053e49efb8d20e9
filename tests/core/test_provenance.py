"""``summary.json`` records where it came from (SPEC §5): versions, options, seed, precision and
each input by name with its SHA-256, and no absolute path or folder anywhere."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import analysis_core

ROOT = Path(__file__).resolve().parents[2]
DIGITS = ROOT / "demo_data" / "digits.npz"


def _cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "analysis_core", *argv], capture_output=True, text=True, cwd=cwd,
                          env={"PYTHONPATH": str(ROOT), "PATH": ""})


def _no_paths(text: str, *folders: Path) -> None:
    for folder in folders:
        assert str(folder) not in text and str(folder.resolve()) not in text


def _check_block(prov: dict, command: str, inputs: dict[str, tuple[Path, str]]) -> None:
    assert prov["tool"] == {"name": "embedding-retrieval-eval", "version": analysis_core.__version__}
    assert prov["python"] == platform.python_version()
    assert {"numpy", "scipy", "pandas", "numba", "plotly"} <= set(prov["packages"])
    assert prov["packages"]["numpy"] == np.__version__
    assert prov["command"] == command
    assert prov["precision"] == "float32" and prov["seeds"] == {"seed": 3}
    assert prov["options"]["seed"] == 3 and prov["options"]["similarity"] == "cosine"
    assert not {"files", "labels", "out"} & set(prov["options"])  # paths are inputs (by name) or not recorded
    assert {i["name"]: i["role"] for i in prov["inputs"]} == {n: r for n, (_, r) in inputs.items()}
    for rec in prov["inputs"]:
        path = inputs[rec["name"]][0]
        assert rec["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert rec["bytes"] == path.stat().st_size


def test_evaluate_writes_provenance_with_input_digests_and_no_paths(tmp_path):
    folder = tmp_path / "inputs"
    folder.mkdir()
    with np.load(DIGITS) as d:
        np.save(folder / "emb.npy", d["embeddings_pca16"])
        (folder / "labels.txt").write_text("\n".join(map(str, d["labels"])) + "\n")
    out = tmp_path / "result"
    run = _cli("evaluate", str(folder / "emb.npy"), "--labels", str(folder / "labels.txt"), "--seed", "3",
               "--out", str(out), "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (out / "summary.json").read_text()
    _no_paths(text, tmp_path, ROOT)
    summary = json.loads(text)
    assert summary["dataset"]["source"] == "emb.npy"
    _check_block(summary["provenance"], "evaluate",
                 {"emb.npy": (folder / "emb.npy", "embeddings"), "labels.txt": (folder / "labels.txt", "labels")})


@pytest.mark.slow
@pytest.mark.parametrize("command", ["evaluate", "report"])
def test_the_summary_of_evaluate_and_report_on_the_demo_data_names_its_inputs_only(tmp_path, command):
    out = tmp_path / "out"
    extra = ("--out", str(out)) if command == "evaluate" else ("--out", str(out), "--format", "")
    run = _cli(command, str(DIGITS), "--seed", "3", "--quiet", *extra, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    text = (out / "summary.json").read_text()
    _no_paths(text, tmp_path, ROOT)
    summary = json.loads(text)
    assert summary["dataset"]["source"] == "digits.npz"
    _check_block(summary["provenance"], command, {"digits.npz": (DIGITS, "embeddings")})


def test_a_printed_summary_has_the_provenance_too(tmp_path):
    run = _cli("evaluate", str(DIGITS), "--seed", "3", "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    _no_paths(run.stdout, ROOT)
    _check_block(json.loads(run.stdout)["provenance"], "evaluate", {"digits.npz": (DIGITS, "embeddings")})


def test_the_python_api_records_its_options_and_seed():
    with np.load(DIGITS) as d:
        X, y = d["embeddings_pca16"], d["labels"]
    summary = analysis_core.evaluate(X, y, seed=7, group_size=3, ks=(1, 5)).to_dict()
    prov = summary["provenance"]
    assert prov["command"] == "api" and prov["tool"]["version"] == analysis_core.__version__
    assert prov["seeds"] == {"seed": 7} and prov["precision"] == "float32"
    assert prov["options"]["group_size"] == 3 and prov["options"]["ks"] == [1, 5]
    assert prov["options"]["similarity"] == "cosine"  # the defaults used are recorded too
    assert prov["inputs"] == [] and summary["dataset"]["source"] == "input arrays"
    json.dumps(summary)  # plain JSON


def test_an_upload_keeps_its_name_whatever_characters_it_holds_and_a_file_on_disk_loses_its_folder(tmp_path):
    """A browser upload's name is a name, not a path: a '/' inside it stays (the dashboard shows it
    literally); a file on disk is named without its folder."""
    import io

    import numpy as np

    from analysis_core import load_bytes, load_files

    buf = io.BytesIO()
    np.savez(buf, embeddings=np.eye(4, dtype=np.float32), labels=np.array([0, 0, 1, 1]))
    name = "![x](http://127.0.0.1:9/x.png) a/b.npz"
    assert load_bytes([(name, buf.getvalue())]).source == name
    (tmp_path / "d.npz").write_bytes(buf.getvalue())
    assert load_files([tmp_path / "d.npz"]).source == "d.npz"
