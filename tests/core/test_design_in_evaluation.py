"""A design given after the passes (Evaluation.with_design, what the dashboard's design table uses),
the design CSV read from an upload, the run summary as a reader's table, and run-level numbers that
do not depend on which other splits are analysed with them."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from analysis_core import InputError, evaluate
from analysis_core.design import Design, read_csv
from analysis_core.stats.runs import run_analysis

FAMILIES = ("alpha", "beta")
SEEDS = tuple(range(8))  # enough runs for bootstrap intervals that move with the seed
STEPS = (1, 5)


@pytest.fixture(scope="module")
def runs_eval():
    """2 families x 8 seeds x 2 checkpoints on 150 items of 6 classes in two splits; family beta's
    clusters are a little tighter (the runs of the two overlap), each seed a different noise draw."""
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(6), 25)
    split = np.where(labels < 3, "seen", "unseen")
    centres = rng.standard_normal((6, 5))
    emb = {}
    for fam, spread in zip(FAMILIES, (1.2, 1.15), strict=True):
        for seed in SEEDS:
            noise = np.random.default_rng([seed, len(fam)]).standard_normal((labels.size, 5))
            for step in STEPS:
                emb[f"{fam}_seed{seed}_e{step}"] = (centres[labels] + spread * noise / step ** 0.3).astype(np.float32)
    return evaluate(emb, labels, split=split, ks=(1, 2))


def _table(ev) -> pd.DataFrame:
    """One family 'pooled' of 16 runs ('alpha0' ... 'beta7'): another design than the names'."""
    t = ev.design.table
    return pd.DataFrame({"method": t["method"], "family": "pooled", "run": t["family"] + t["run"].str[-1],
                         "step": t["step"].astype(str)})


def test_with_design_gives_what_evaluate_gives_with_that_design(runs_eval):
    table = _table(runs_eval)
    given = evaluate(runs_eval.dataset, ks=(1, 2), design=table)
    swapped = runs_eval.with_design(table)
    assert swapped.design.rows == given.design.rows != runs_eval.design.rows
    a, b = swapped.families().summary, given.families().summary
    assert list(a["family"].unique()) == ["pooled"] and set(a["n_runs"]) == {16}
    np.testing.assert_allclose(a[["mean", "sd", "ci_low", "ci_high"]].to_numpy(float),
                               b[["mean", "sd", "ci_low", "ci_high"]].to_numpy(float), rtol=0, atol=1e-12)
    # the passes are shared, and each design keeps its own run-level results
    assert swapped.results is runs_eval.results
    assert set(runs_eval.families().summary["family"]) == set(FAMILIES)


def test_pooled_family_mean_and_sd_are_numpys_over_the_last_checkpoints(runs_eval):
    swapped = runs_eval.with_design(_table(runs_eval))
    last = [f"{f}_seed{s}_e{STEPS[-1]}" for f in FAMILIES for s in SEEDS]
    v = np.array([runs_eval.method_summary(m)["map"]["expected"] for m in last])
    row = swapped.families().summary.set_index("metric").loc["map"]
    assert row["mean"] == pytest.approx(v.mean(), abs=1e-12)
    assert row["sd"] == pytest.approx(v.std(ddof=1), abs=1e-12)
    shown = swapped.families().mean_sd_frame().set_index("family").loc["pooled", "mAP"]
    assert shown == f"{v.mean():.4f} ± {v.std(ddof=1):.4f}"


def test_mean_sd_frame_says_one_run_when_there_is_no_spread(runs_eval):
    # seed 0 of alpha alone in its family: no sd
    t = runs_eval.design.table
    table = pd.DataFrame({"method": t["method"], "family": np.where(t["run"] == "seed0", "first", t["family"]),
                          "run": t["run"], "step": t["step"].astype(str)})
    table.loc[table["family"] == "first", "family"] = "first_" + t.loc[table["family"] == "first", "family"]
    frame = runs_eval.with_design(table).families().mean_sd_frame().set_index("family")
    assert frame.loc["first_alpha", "n_runs"] == 1 and frame.loc["first_alpha", "mAP"].endswith("(one run)")
    assert "±" in frame.loc["alpha", "mAP"] and frame.loc["alpha", "n_runs"] == 7


def test_a_splits_run_numbers_do_not_depend_on_the_other_splits_analysed(runs_eval):
    seen, unseen = runs_eval.within_split("seen"), runs_eval.within_split("unseen")
    together = run_analysis({"all": runs_eval, "seen": seen, "unseen": unseen}).tests
    alone = unseen.families().tests
    together = together[together["split"] == "unseen"].reset_index(drop=True)
    assert len(alone) == len(together) > 0
    assert ((alone["pi_boot_high"] - alone["pi_boot_low"]) > 0).any()  # bootstrap intervals that a seed could move
    cols = ["mean_diff", "ci_low", "ci_high", "p_value", "p_holm", "prob_improvement", "pi_low", "pi_high",
            "pi_boot_low", "pi_boot_high"]
    np.testing.assert_allclose(together[cols].to_numpy(float), alone[cols].to_numpy(float), rtol=0, atol=1e-12)


def test_within_split_follows_the_design(runs_eval):
    swapped = runs_eval.with_design(_table(runs_eval))
    assert swapped.within_split("seen").design.rows == swapped.design.rows
    assert runs_eval.within_split("seen").design.rows == runs_eval.design.rows


def test_a_design_csv_upload_is_read_and_bad_bytes_are_an_input_error(runs_eval):
    text = _table(runs_eval).to_csv(index=False).encode()
    d = Design.from_table(read_csv(io.BytesIO(text), "design.csv"), runs_eval.methods)
    assert d.rows == runs_eval.with_design(_table(runs_eval)).design.rows
    for bad in (b"", b'method,family\n"unclosed,x\n', b"\xff\xfe\x00bad"):
        with pytest.raises(InputError) as err:
            Design.from_table(read_csv(io.BytesIO(bad), "design.csv"), runs_eval.methods)
        assert "design.csv" in str(err.value)
