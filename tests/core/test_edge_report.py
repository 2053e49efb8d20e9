"""Edges of ``report`` found by a hostile pass (2026-11-23): method names holding ``/`` (several
files of several methods each), a split where no query has a positive, long method names in the
LaTeX tables, and the order of a dict of methods given to the API."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import analysis_core as ac
from tests.helpers import compile_two_column

from ..helpers import run_cli


def _checkpoints(path, seed, names=("model_epoch1", "model_epoch2", "model_epoch10"), split=None):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(6), 8)
    centres = rng.standard_normal((6, 8)) * 2
    arrays = {f"embeddings_{m}": (centres[y] + (1 + i) * rng.standard_normal((y.size, 8))).astype(np.float32)
              for i, m in enumerate(names)}
    np.savez(path, labels=y, **arrays, **({"split": split} if split is not None else {}))
    return path


@pytest.mark.slow
def test_a_report_of_methods_named_file_slash_method_writes_every_file(tmp_path):
    """Two files of several methods each: names ``run_a/model_epoch1`` ... The figures named after
    them were written into folders that did not exist, and the report stopped half-written with
    'choose a writable --out folder'."""
    a = _checkpoints(tmp_path / "run_a.npz", 0)
    b = _checkpoints(tmp_path / "run_b.npz", 1)
    out = tmp_path / "rep"
    r = run_cli("report", a, b, "--out", out, "--format", "svg", "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert all(p.is_file() for p in (out / "figures").iterdir())
    assert sum(n.startswith("histograms_run_a-model_epoch") for n in figures) == 3, figures
    assert len(set(figures)) == len(figures)
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary["methods"]) == [f"{f}/model_epoch{e}" for f in ("run_a", "run_b") for e in (1, 2, 10)]


@pytest.mark.slow
def test_a_split_without_a_positive_is_skipped_with_its_reason(tmp_path):
    """A split whose every class has one item in it is no retrieval problem: skipped and named,
    like a split of one class (it was kept, with all-NaN columns and empty figures)."""
    split = np.array(["train"] * 42 + ["test"] * 6)
    p = _checkpoints(tmp_path / "s.npz", 2, split=split)
    d = dict(np.load(p))
    d["labels"] = np.r_[np.repeat(np.arange(6), 7), np.arange(6, 12)]  # test: six classes of one item
    np.savez(p, **d)
    r = run_cli("report", p, "--out", tmp_path / "rep", "--format", "", "--by-split", "--sweep-repeats", "1",
                "--quiet")
    assert r.returncode == 0, r.stderr
    assert "split 'test' skipped: no query has a positive" in r.stderr
    summary = json.loads((tmp_path / "rep" / "summary.json").read_text())
    assert list(summary.get("splits", {})) in ([], ["train"])


@pytest.mark.slow
@pytest.mark.latex
def test_long_method_names_keep_every_table_within_its_width(tmp_path):
    """Names of 27 characters with underscores (proxyanchor_bninception_e10) could not break in
    their column, and bold best values are wider than regular ones: 11 of 15 tables overflowed."""
    names = ("proxyanchor_bninception_e10", "multisimilarity_resnet50_e10", "contrastive_vit_small_e10")
    p = _checkpoints(tmp_path / "long.npz", 3, names=names)
    r = run_cli("report", p, "--out", tmp_path / "rep", "--format", "", "--sweep-repeats", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    texs = sorted((tmp_path / "rep" / "tables").glob("*.tex"))
    assert {"summary", "summary_column"} <= {t.stem for t in texs}
    log = compile_two_column(texs, tmp_path)
    assert log.count("Overfull \\hbox") == 0, re.findall(r"Overfull \\hbox.*", log)


def test_a_dict_of_methods_is_evaluated_in_natural_order():
    rng = np.random.default_rng(4)
    y = np.repeat(np.arange(3), 5)
    embs = {m: rng.standard_normal((15, 4)).astype(np.float32) for m in ("ck_e1", "ck_e10", "ck_e2")}
    ev = ac.evaluate(embs, y)
    assert ev.methods == ["ck_e1", "ck_e2", "ck_e10"]
    assert list(ev.to_dict()["methods"]) == ["ck_e1", "ck_e2", "ck_e10"]


@pytest.mark.parametrize("requested", [4, 10])
def test_reports_summary_has_grouped_recall_equal_to_its_table(tmp_path, requested):
    """summary.json of ``report`` gave Grouped Recall@K for each split but not for the data as a
    whole. It now has it, at S = the requested size or the class count if smaller, with the same
    numbers as the report's grouped_recall table row of that S."""
    data = _checkpoints(tmp_path / "d.npz", 2)
    out = tmp_path / "rep"
    r = run_cli("report", data, "--out", out, "--format", "", "--sweep-repeats", "1", "--group-size", requested,
                "--seed", 3, "--quiet")
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    import pandas as pd

    from analysis_core.stats.grouped_recall import grouped_recall

    table = pd.read_csv(out / "tables" / "grouped_recall.csv")
    size = min(requested, 3)  # at most half of the 6 classes: two groups, an interval
    ds = ac.load(data)
    for m, block in summary["methods"].items():
        g = block["grouped_recall_at_k"]
        assert g["group_size"] == size and g["n_groups"] == 6 // size
        fresh = grouped_recall(ds.embeddings[m], ds.label_codes, group_size=size, ks=(1, 2, 4, 8), seed=3)
        want = fresh.table.set_index("k")
        rows = table[(table["method"] == m) & (table["group_size"] == size)].set_index("k")
        assert len(rows) == len(g["k"]) > 0
        for k, v in g["k"].items():
            assert v["mean"] == pytest.approx(want.loc[int(k), "mean"], abs=1e-12)
            assert rows.loc[int(k), "mean"] == pytest.approx(want.loc[int(k), "mean"], abs=1e-12)
            for key in ("ci_low", "ci_high"):
                assert v[key] == pytest.approx(want.loc[int(k), key], abs=1e-12)


@pytest.mark.slow
def test_a_report_of_a_one_class_split_has_no_grouped_recall_and_says_why(tmp_path):
    """``--split`` naming a split of one class: no groups can be formed; the report still runs."""
    split = np.where(np.repeat(np.arange(6), 8) == 0, "lone", "rest")
    data = _checkpoints(tmp_path / "d.npz", 2, split=split)
    out = tmp_path / "rep"
    r = run_cli("report", data, "--out", out, "--format", "", "--sweep-repeats", "1", "--split", "rest", "--quiet")
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert all(b["grouped_recall_at_k"]["group_size"] == 2 for b in summary["methods"].values())  # 5 classes
    r = run_cli("report", data, "--out", tmp_path / "rep2", "--format", "", "--sweep-repeats", "1", "--split", "lone",
                "--quiet")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "one class" in r.stderr, r.stderr


def test_a_report_of_an_evaluation_without_a_positive_is_refused(tmp_path):
    """``--split`` naming a split of singleton classes wrote 22 files of NaN tables and blank
    figures with exit 0; it now stops with the reason before writing anything."""
    y = np.array(list(np.repeat(list("abcd"), 10)) + list("fghij"))
    split = np.array(["train"] * 40 + ["lonely"] * 5)
    rng = np.random.default_rng(0)
    data = tmp_path / "d.npz"
    np.savez(data, labels=y, embeddings_m1=rng.normal(size=(45, 8)), embeddings_m2=rng.normal(size=(45, 8)),
             split=split)
    r = run_cli("report", data, "--out", tmp_path / "r", "--format", "", "--split", "lonely", "--quiet")
    assert r.returncode == 2 and "no query has a positive" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r").exists()
