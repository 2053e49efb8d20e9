"""The researcher's protocol: splits as their own retrieval problems, checkpoints in natural order,
per-method confidences, several multi-method files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from analysis_core import Dataset, evaluate, load_files
from analysis_core.report import build_report

from ..helpers import ROOT, run_cli

METRIC_KEYS = ("map_at_r", "r_precision", "precision_at_1", "mrr")


def _same_numbers(a: dict, b: dict) -> None:
    assert a["map"] == b["map"]
    for k in METRIC_KEYS:
        assert a[k] == b[k], k
    assert a["recall_at_k"] == b["recall_at_k"]
    assert a["jsd"] == b["jsd"]


@pytest.mark.slow
def test_split_cli_by_split_report_and_the_split_alone_agree(tmp_path):
    path = ROOT / "demo_data" / "training.npz"
    out = tmp_path / "ev"
    r = run_cli("evaluate", path, "--split", "test_unseen", "--out", out, "--quiet")
    assert r.returncode == 0, r.stderr
    single = json.loads((out / "summary.json").read_text())
    ds = load_files([path])
    rep = build_report(evaluate(ds), by_split=True, sweep_repeats=1)
    by_split = rep.split_evaluations["test_unseen"].summary()
    rows = np.nonzero(ds.split == "test_unseen")[0]
    alone = evaluate(Dataset(labels=ds.labels[rows], embeddings={m: e[rows] for m, e in ds.embeddings.items()}))
    alone_s = alone.summary()
    assert single["dataset"]["n_items"] == rows.size == alone_s["dataset"]["n_items"]
    for m in ds.methods:
        _same_numbers(single["methods"][m], by_split["methods"][m])
        _same_numbers(single["methods"][m], alone_s["methods"][m])
    # every table of the by-split report has a split column holding every split
    for name, t in rep.tables.items():
        assert "split" in t.columns, name
    assert {"all", "train", "test_seen", "test_unseen"} <= set(rep.tables["anova"]["split"])


def test_methods_in_natural_order_and_the_order_option(tmp_path):
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(4), 5)
    arrays = {f"embeddings_e{e}": rng.standard_normal((y.size, 4)).astype(np.float32) for e in (10, 3, 1, 30)}
    p = tmp_path / "ckpt.npz"
    np.savez(p, labels=y, **arrays)
    assert load_files([p]).methods == ["e1", "e3", "e10", "e30"]
    r = run_cli("evaluate", p, "--order", "e30,e10,e3,e1", "--quiet")
    assert r.returncode == 0, r.stderr
    assert list(json.loads(r.stdout)["methods"]) == ["e30", "e10", "e3", "e1"]
    bad = run_cli("evaluate", p, "--order", "e30,e10", "--quiet")
    assert bad.returncode == 2 and "every method once" in bad.stderr and "Traceback" not in bad.stderr


def test_each_method_has_its_own_confidence_and_a_shared_one_is_warned_about(tmp_path):
    rng = np.random.default_rng(1)
    y = np.repeat(np.arange(6), 8)
    X = {m: (np.eye(6, 8)[y] * s + rng.standard_normal((y.size, 8))).astype(np.float32)
         for m, s in (("a", 2.0), ("b", 0.8))}
    ca, cb = rng.random(y.size), rng.random(y.size)
    own = Dataset(labels=y, embeddings=X, method_confidence={"a": ca, "b": cb})
    ev = evaluate(own)
    rep = build_report(ev, sweep_repeats=1)
    erc = rep.tables["erc"]
    for m, conf in (("a", ca), ("b", cb)):
        pq = ev.per_query(m)
        pq = pq[pq["n_positives"] > 0]
        np.testing.assert_array_equal(pq["confidence"].to_numpy(), conf[pq["query"].to_numpy()])
        rho = stats.spearmanr(conf[pq["query"].to_numpy()], pq["ap"]).statistic
        assert erc.loc[erc["method"] == m, "spearman"].iloc[0] == pytest.approx(rho, abs=1e-12)
    assert erc.groupby("method")["spearman"].first().nunique() == 2
    assert not any("serves" in w for w in rep.warnings)
    shared = build_report(evaluate(Dataset(labels=y, embeddings=X, confidence=ca)), sweep_repeats=1)
    assert any("one 'confidence' column serves 2 methods" in w for w in shared.warnings)


def test_several_multi_method_files_load_together_with_prefixed_names(tmp_path):
    rng = np.random.default_rng(2)
    y = np.repeat(np.arange(3), 4)
    for run in ("run1", "run2"):
        np.savez(tmp_path / f"{run}.npz", labels=y, confidence=rng.random(y.size),
                 **{f"embeddings_e{e}": rng.standard_normal((y.size, 3)).astype(np.float32) for e in (1, 2)})
    ds = load_files([tmp_path / "run1.npz", tmp_path / "run2.npz"])
    assert ds.methods == ["run1/e1", "run1/e2", "run2/e1", "run2/e2"]
    with np.load(tmp_path / "run2.npz") as f:
        np.testing.assert_array_equal(ds.confidence_for("run2/e1"), f["confidence"])  # each file's own
    r = run_cli("evaluate", tmp_path / "run1.npz", tmp_path / "run2.npz", "--quiet")
    assert r.returncode == 0, r.stderr
    assert set(json.loads(r.stdout)["methods"]) == set(ds.methods)


def test_a_one_class_split_is_named_when_asked_for(tmp_path):
    y = np.repeat(np.arange(3), 4)
    p = tmp_path / "d.npz"
    np.savez(p, labels=y, embeddings=np.random.default_rng(3).standard_normal((12, 3)).astype(np.float32),
             split=np.where(y == 2, "odd", "main"))
    r = run_cli("evaluate", p, "--split", "odd", "--quiet")
    assert r.returncode == 2 and "split 'odd'" in r.stderr and "one class" in r.stderr


def test_checkpoint_table_in_the_report_follows_natural_order():
    ds = load_files([ROOT / "demo_data" / "training.npz"])
    rep = build_report(evaluate(ds, split="test_unseen"), sweep_repeats=1)
    t = rep.tables["checkpoints"]
    part = t[(t["metric"] == "map") & (t["family"] == "mlp64")]
    assert part["method"].tolist() == [f"mlp64_e{e}" for e in (0, 1, 3, 10, 30)]
    assert isinstance(rep.tables["checkpoint_tests"], pd.DataFrame) and len(rep.tables["checkpoint_tests"])
