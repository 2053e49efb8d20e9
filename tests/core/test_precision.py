"""``precision="float64"``: near-equal scores of float64 embeddings stay apart (trec_eval's AP),
where float32 rounding merges them into ties; the option reaches the summary, the API and the CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from analysis_core import InputError, evaluate
from analysis_core.engine.core import run_pass

from ..helpers import good_npz as _good
from ..helpers import run_cli
from .oracle import score_matrix

DELTA = 1e-9  # the gap between a positive's and a negative's score that float32 cannot see


def _unit32(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


def _near_tie_data(seed: int = 5):
    """Dense float64 vectors with positives and negatives whose cosines with some queries differ
    by about ``DELTA``, of two kinds that float32 merges differently:

    * axis queries ``q = 3 e_k``, each with a positive and a negative whose k-th unit coordinates
      differ by DELTA: in float32 both scores are the same rounded coordinate (exact ties between
      distinct vectors);
    * a positive ``p`` and a negative ``p + DELTA * w`` whose unit vectors round to the same float32
      vector (merged as duplicates): tied for every query in float32, apart in float64.

    The only exact float64 ties (the axis queries' zero scores with each other) are between
    negatives. Returns X, labels, the axis queries' rows and the near-duplicate positives' classes."""
    rng = np.random.default_rng(seed)
    d, n_classes, n_base = 16, 6, 240
    y = list(rng.integers(0, n_classes, n_base))
    X = list(rng.standard_normal((n_classes, d))[y] + 1.5 * rng.standard_normal((n_base, d)))
    c = float(np.float32(0.9)) + 2 * DELTA  # c and c - DELTA round to the same float32
    axis_queries = []
    for k in range(n_classes):
        axis_queries.append(len(X))
        X.append(3.0 * np.eye(d)[k])
        y.append(k)
        for cos, label in ((c, k), (c - DELTA, (k + 1) % n_classes)):  # positive, then negative
            u = rng.standard_normal(d)
            u[k] = 0.0
            X.append(cos * np.eye(d)[k] + np.sqrt(1.0 - cos * cos) * u / np.linalg.norm(u))
            y.append(label)
    dup_classes = list(range(4))
    for label in dup_classes:
        p = rng.standard_normal(d)
        while not np.array_equal(_unit32(p), _unit32(n := p + DELTA * rng.standard_normal(d))):
            pass  # a coordinate straddled a float32 rounding boundary: draw another w
        X += [p, n]
        y += [label, (label + 2) % n_classes]
    return np.asarray(X, np.float64), np.asarray(y), np.asarray(axis_queries), np.asarray(dup_classes)


def _trec_eval_ap(S: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Leave-one-out AP of every query by trec_eval (pytrec_eval) for the rankings of the float64
    scores ``S``. trec_eval keeps a run's scores as C ``float`` (usnistgov/trec_eval issue #34), so
    it would itself merge scores 1e-9 apart (and break the tie by docno): it gets each item's rank
    in the float64 order as its score instead (small integers, exact in a float)."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    n = len(y)
    qrels, run = {}, {}
    for i in range(n):
        gallery = np.delete(np.arange(n), i)
        order = gallery[np.argsort(-S[i, gallery], kind="stable")]
        qrels[str(i)] = {str(j): 1 for j in gallery if y[j] == y[i]}
        run[str(i)] = {str(j): float(n - r) for r, j in enumerate(order)}
    res = pytrec_eval.RelevanceEvaluator(qrels, {"map"}).evaluate(run)
    return np.array([res[str(i)]["map"] for i in range(n)])


def _per_query(X, y, precision):
    r = run_pass(X, y, precision=precision, n_threads=2)
    cols = {c: r.values[np.argsort(r.query_items), i] for i, c in enumerate(r.columns)}
    return cols["ap"], cols["n_mixed_tie_blocks"]


def test_float64_ap_equals_trec_eval_where_float32_merges_near_ties():
    X, y, axis_q, dup_classes = _near_tie_data()
    S = score_matrix(X, "cosine")
    gaps = [S[q, q + 1] - S[q, q + 2] for q in axis_q]
    assert min(gaps) > DELTA / 2  # the positive is ahead in float64, by far more than rounding
    ref = _trec_eval_ap(S, y)
    ap64, mixed64 = _per_query(X, y, "float64")
    ap32, mixed32 = _per_query(X, y, "float32")
    # float32 ties the constructed pairs (the test can fail): mixed tie blocks and another AP
    assert (mixed32[axis_q] > 0).all()
    assert np.abs(ap32[axis_q] - ref[axis_q]).min() > 1e-4
    dup_queries = np.nonzero(np.isin(y[:-2 * len(dup_classes)], dup_classes))[0]  # not the pairs themselves
    assert (mixed32[dup_queries] > 0).all()
    # float64 keeps them apart: no tie mixes a positive and a negative, and trec_eval's AP for every query
    assert (mixed64 == 0).all()
    np.testing.assert_allclose(ap64, ref, rtol=0, atol=1e-9)


@pytest.mark.parametrize("sim", ["cosine", "dot", "euclidean"])
def test_float64_pass_is_deterministic_and_matches_float32_on_tie_free_data(sim):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((1100, 7))
    y = rng.integers(0, 12, 1100)
    perm = rng.permutation(1100)
    a = run_pass(X, y, similarity=sim, precision="float64", n_threads=2)
    b = run_pass(X[perm], y[perm], similarity=sim, precision="float64", n_threads=1, block_size=1)
    o = np.argsort(perm[b.query_items])
    assert b.values[o].tobytes() == a.values[np.argsort(a.query_items)].tobytes()
    assert (b.sum_pos, b.sum_neg) == (a.sum_pos, a.sum_neg)
    f32 = run_pass(X, y, similarity=sim, n_threads=2)
    ap = f32.columns.index("ap")  # the same AP up to the few pairs float32 rounding reorders
    np.testing.assert_allclose(f32.values[np.argsort(f32.query_items), ap], a.values[np.argsort(a.query_items), ap],
                               rtol=0, atol=1e-3)


def test_float32_input_is_upcast_and_precision_is_recorded():
    X = np.random.default_rng(1).standard_normal((80, 5)).astype(np.float32)
    y = np.arange(80) % 4
    ev = evaluate(X, y, precision="float64")
    assert ev.summary()["dataset"]["precision"] == "float64"
    up = evaluate(X.astype(np.float64), y, precision="float64")
    assert ev.summary()["methods"] == up.summary()["methods"]
    assert evaluate(X, y).summary()["dataset"]["precision"] == "float32"


def test_an_unknown_precision_is_an_input_error():
    with pytest.raises(InputError, match="unknown precision 'float16'.*float32, float64"):
        evaluate(np.eye(4), [0, 0, 1, 1], precision="float16")


def test_cli_precision_reaches_summary_json(tmp_path):
    p = _good(tmp_path)
    r = run_cli("evaluate", p, "--out", tmp_path / "out", "--quiet", "--precision", "float64")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["dataset"]["precision"] == "float64"
    r = run_cli("evaluate", p, "--precision", "double")
    assert r.returncode == 2 and "--precision" in r.stderr and "Traceback" not in r.stderr
