"""The report and the dashboard get split evaluations from one function: the same splits in the
same order with the same numbers (they had drifted: sorted vs natural order, two group-size rules)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis_core import load_files
from analysis_core.evaluation import evaluate
from analysis_core.report import Report, _split_evaluations
from analysis_core_dashboard import cache
from analysis_core_dashboard.views.common import split_evaluations

ROOT = Path(__file__).resolve().parents[2]


def test_report_and_dashboard_evaluate_the_same_splits_in_the_same_order_with_the_same_numbers():
    ds = load_files([ROOT / "demo_data" / "training.npz"])
    ev = evaluate(ds)
    tok = cache.Token(data="training-splits-test", similarity=ev.similarity, ks=ev.ks, n_recall=11, query_sample=None,
                      seed=0, alpha=ev.alpha)
    page = split_evaluations(tok, ev, group_size=10, seed=0)
    rep = Report()
    report = _split_evaluations(rep, ev, ev.alpha, 0, 10)
    assert list(page) == list(report) and len(page) >= 2
    for sp in report:
        pd.testing.assert_frame_equal(page[sp].summary_frame(), report[sp].summary_frame(), rtol=1e-12)
