"""The two-way ANOVA is the split-plot table of R's ``aov(value ~ method * class + Error(query))``:
compared with R itself (Rscript on a CSV the test writes) on balanced data, on unequal numbers of
queries per class, and, for queries missing a method, on the complete queries (the documented
policy); total on degenerate data; fast without a design matrix."""

from __future__ import annotations

import shutil
import subprocess
import time

import numpy as np
import pandas as pd
import pytest

from analysis_core.stats.two_way_anova import two_way_anova

RSCRIPT = shutil.which("Rscript")
needs_r = pytest.mark.r_oracle  # R's aov is the oracle here (skipped without Rscript: tests/conftest.py)

R_AOV = r"""
d <- read.csv(commandArgs(TRUE)[1], colClasses = c("character", "character", "character", "numeric"))
d$method <- factor(d$method); d$query <- factor(d$query); d$label <- factor(d$label)
s <- summary(aov(ap ~ method * label + Error(query), data = d))
cm <- aggregate(ap ~ method + label, data = d, FUN = mean)  # the class unit: one mean per method x class
s2 <- summary(aov(ap ~ method + Error(label), data = cm))
names(s2) <- paste("class unit", names(s2))
s <- c(s, s2)
for (nm in names(s)) {
  t <- s[[nm]][[1]]
  write.table(data.frame(stratum = nm, term = trimws(rownames(t)), df = t[["Df"]], ss = t[["Sum Sq"]],
                         F = t[["F value"]], p = t[["Pr(>F)"]]),
              stdout(), sep = ",", row.names = FALSE, col.names = FALSE, quote = FALSE)
}
"""
# R's row names (label is the class column) -> ours
R_TERMS = {("Error: query", "label"): "class", ("Error: query", "Residuals"): "Residual (between queries)",
           ("Error: Within", "method"): "method", ("Error: Within", "method:label"): "method:class",
           ("Error: Within", "Residuals"): "Residual (within queries)"}


def _r_aov(df: pd.DataFrame, tmp_path) -> pd.DataFrame:
    csv, script = tmp_path / "ap.csv", tmp_path / "aov.R"
    df[["method", "query", "label", "ap"]].astype({"query": str}).to_csv(csv, index=False, float_format="%.17g")
    script.write_text(R_AOV)
    out = subprocess.run([RSCRIPT, "--vanilla", str(script), str(csv)], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    rows = [r for r in (line.split(",") for line in out.strip().splitlines()) if (r[0], r[1]) in R_TERMS]
    t = pd.DataFrame([dict(term=R_TERMS[(r[0], r[1])], df=float(r[2]), sum_sq=float(r[3]),
                           F=float(r[4]) if r[4] != "NA" else np.nan, p_value=float(r[5]) if r[5] != "NA" else np.nan)
                      for r in rows])
    return t.set_index("term")


def _design(seed: int, n_m: int, per_class: list[int], interaction: float = 0.0) -> pd.DataFrame:
    """Every query answered by every method; a query effect shared by its methods (the whole
    plot), class and method effects, and an optional method x class interaction."""
    rng = np.random.default_rng(seed)
    rows = []
    for c, n_q in enumerate(per_class):
        cls = rng.normal(0, 0.1)
        for k in range(n_q):
            qeff = rng.normal(0, 0.15)
            for m in range(n_m):
                v = 0.5 + cls + qeff + 0.03 * m + interaction * m * (c % 2) + rng.normal(0, 0.1)
                rows.append(dict(method=f"m{m}", query=f"q{c}-{k}", label=f"c{c}", ap=v))
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)  # any row order


def _assert_equals_r(got: pd.DataFrame, want: pd.DataFrame) -> None:
    got = got.set_index("term")
    for term in want.index:
        for col in ("df", "sum_sq", "F", "p_value"):
            np.testing.assert_allclose(got.loc[term, col], want.loc[term, col], rtol=1e-8, atol=1e-12,
                                       equal_nan=True, err_msg=f"{term} {col}")
    assert set(got.index) == set(want.index)


@needs_r
@pytest.mark.parametrize(("seed", "n_m", "per_class", "interaction"), [
    (0, 2, [5] * 4, 0.0),  # balanced
    (1, 3, [6] * 5, 0.2),  # balanced, a real interaction
    (2, 2, [2, 7, 3, 11], 0.0),  # unequal numbers of queries per class
    (3, 4, [3, 9, 2, 5, 14, 4], 0.15),  # unequal, four methods, interaction
    (4, 3, [40, 2, 17], 0.0),
])
def test_split_plot_table_equals_r_aov_with_error_strata(tmp_path, seed, n_m, per_class, interaction):
    df = _design(seed, n_m, per_class, interaction)
    warn: list[str] = []
    got = two_way_anova(df, warn=warn)
    _assert_equals_r(got, _r_aov(df, tmp_path))
    assert warn == []
    assert got["unit"].tolist() == ["query"] * 5
    assert got["n_units"].tolist() == [sum(per_class)] * 5
    assert got.set_index("term").loc[["class", "method", "method:class"], "error"].tolist() == [
        "query within class", "method x query", "method x query"]


@needs_r
def test_queries_missing_a_method_are_left_out_with_a_count_and_the_rest_equals_r(tmp_path):
    df = _design(5, 3, [4, 6, 3, 8], 0.1)
    gone = df[(df["method"] == "m1") & df["query"].isin(["q0-1", "q3-2", "q3-5"])].index
    dup = df[(df["method"] == "m2") & (df["query"] == "q1-0")]
    nan = df.index[(df["method"] == "m0") & (df["query"] == "q2-2")]
    broken = pd.concat([df.drop(index=gone), dup]).assign(ap=lambda t: t["ap"].where(~t.index.isin(nan)))
    warn: list[str] = []
    got = two_way_anova(broken, warn=warn)
    complete = df[~df["query"].isin(["q0-1", "q3-2", "q3-5", "q1-0", "q2-2"])]
    _assert_equals_r(got, _r_aov(complete, tmp_path))
    assert any("5 of 21 queries were not answered exactly once by every method" in w for w in warn)
    assert got["n_units"].tolist() == [16] * 5


def _independent(df: pd.DataFrame) -> pd.DataFrame:
    """The two strata computed apart, with general tools: the between stratum is scipy's one-way
    ANOVA of the query means on class (its SS times the number of methods); the within stratum
    is statsmodels' sequential OLS of the query-centred values on method * class (the class
    columns carry nothing once each query is centred), with the within-stratum df;"""
    import statsmodels.formula.api as smf
    from scipy import stats
    from statsmodels.stats.anova import anova_lm

    n_m, n_q, n_c = df["method"].nunique(), df["query"].nunique(), df["label"].nunique()
    qm = df.groupby("query").agg(mean=("ap", "mean"), label=("label", "first"))
    groups = [g.to_numpy() for _, g in qm.groupby("label")["mean"]]
    between = stats.f_oneway(*groups)
    grand = qm["mean"].mean()
    ss_class = n_m * sum(len(g) * (g.mean() - grand) ** 2 for g in groups)
    ss_bres = n_m * sum(((g - g.mean()) ** 2).sum() for g in groups)
    z = df.assign(z=df["ap"] - df.groupby("query")["ap"].transform("mean"))
    t = anova_lm(smf.ols("z ~ C(method) + C(method):C(label)", data=z).fit(), typ=1)
    ss_m, ss_mc, ss_w = t["sum_sq"].iloc[0], t["sum_sq"].iloc[1], t["sum_sq"].iloc[2]
    df_m, df_mc, df_w = n_m - 1, (n_m - 1) * (n_c - 1), (n_m - 1) * (n_q - n_c)
    f_m, f_mc = ss_m / df_m / (ss_w / df_w), ss_mc / df_mc / (ss_w / df_w)
    return pd.DataFrame({
        "term": ["class", "Residual (between queries)", "method", "method:class", "Residual (within queries)"],
        "df": [n_c - 1, n_q - n_c, df_m, df_mc, df_w],
        "sum_sq": [ss_class, ss_bres, ss_m, ss_mc, ss_w],
        "F": [between.statistic, np.nan, f_m, f_mc, np.nan],
        "p_value": [between.pvalue, np.nan, stats.f.sf(f_m, df_m, df_w), stats.f.sf(f_mc, df_mc, df_w), np.nan],
    }).set_index("term")


@pytest.mark.parametrize("seed", range(3))
def test_split_plot_table_equals_the_strata_computed_apart(seed):
    """The same check without R: the strata from scipy and statsmodels on the query means and
    the query-centred values."""
    rng = np.random.default_rng(seed)
    df = _design(seed, int(rng.integers(2, 5)), rng.integers(2, 12, int(rng.integers(2, 7))).tolist(), 0.1)
    _assert_equals_r(two_way_anova(df), _independent(df))


def _table(values: np.ndarray, labels: list[str], n_m: int) -> pd.DataFrame:
    """values[q, m] for queries labelled ``labels``."""
    q = len(labels)
    return pd.DataFrame({"method": np.tile([f"m{m}" for m in range(n_m)], q), "query": np.repeat(np.arange(q), n_m),
                         "label": np.repeat(labels, n_m), "ap": np.asarray(values, np.float64).ravel()})


U = ["class", "method", "method:class"]  # the tested rows
DEFINED = None


def _undef(*reasons: str | None) -> dict[str, str | None]:
    return dict(zip(U, reasons, strict=True))


DEGENERATE = {
    # name: (table, for each tested row: None when defined, else a word of the reason)
    "one method": (_table(np.arange(8.0)[:, None] % 3, list("aaaabbbb"), 1),
                   _undef(DEFINED, "two methods", "two methods")),
    "one class": (_table(np.random.default_rng(0).random((6, 2)), list("aaaaaa"), 2),
                  _undef("two classes", DEFINED, "two classes")),
    "one query per class": (_table(np.random.default_rng(1).random((3, 2)), list("abc"), 2),
                            _undef("df 0", "df 0", "df 0")),
    "constant values": (_table(np.full((6, 2), 0.4), list("aabbcc"), 2), _undef("same", "same", "same")),
    "identical methods": (_table(np.repeat(np.random.default_rng(2).random((6, 1)), 3, axis=1), list("aaabbb"), 3),
                          _undef(DEFINED, "identical methods", "identical methods")),
    "zero residual within": (_table(np.array([[0.1, 0.3], [0.5, 0.7], [0.2, 0.2], [0.6, 0.6]]), list("aabb"), 2),
                             _undef(DEFINED, "zero residual within", "zero residual within")),
    "zero residual between": (_table(np.array([[0.1, 0.3], [0.3, 0.1], [0.6, 0.9], [0.9, 0.6]]), list("aabb"), 2),
                              _undef("zero residual between", DEFINED, DEFINED)),
    "same shift in every class": (_table(np.array([[0.1, 0.3], [0.5, 0.6], [0.2, 0.3], [0.6, 0.8]]), list("aabb"),
                                         2), _undef(DEFINED, DEFINED, DEFINED)),
    "rounding only": (_table(np.array([[0.1 + 0.2, 0.3]] * 4), list("aabb"), 2),
                      _undef("same", "same", "same")),
    "nothing complete": (pd.DataFrame({"method": ["a", "b"], "query": [0, 1], "label": "x", "ap": [0.1, 0.2]}),
                         _undef("no query", "no query", "no query")),
    "empty": (pd.DataFrame({"method": [], "query": [], "label": [], "ap": []}),
              _undef("no query", "no query", "no query")),
}


@pytest.mark.parametrize("name", list(DEGENERATE))
def test_degenerate_tables_are_undefined_with_the_reason_never_significant(name):
    df, expected = DEGENERATE[name]
    warn: list[str] = []
    t = two_way_anova(df, warn=warn).set_index("term")
    assert list(t.index) == ["class", "Residual (between queries)", "method", "method:class",
                             "Residual (within queries)"]
    for term, reason in expected.items():
        p, note = t.loc[term, "p_value"], t.loc[term, "note"]
        if reason is None:
            assert 0.0 <= p <= 1.0 and note == "", (term, p, note)
        else:
            assert np.isnan(p) and note.startswith("undefined") and reason in note, (term, note)
            assert any(term in w and reason in w for w in warn), (term, warn)


def test_copies_of_the_methods_change_nothing_between_queries():
    """A copy of every method used to double the evidence for the class effect (each query
    counted once per method); now the class is tested on the query means, which copies leave
    unchanged: the same F and p, the one-way ANOVA of the query means."""
    from scipy import stats

    rng = np.random.default_rng(7)
    base = pd.DataFrame({"method": "a", "query": range(30), "label": np.repeat(list("abc"), 10), "ap": rng.random(30)})
    pair = pd.concat([base, base.assign(method="b", ap=rng.random(30))])
    one = two_way_anova(pair).set_index("term").loc["class"]
    two = two_way_anova(pd.concat([pair, pair.assign(method=pair["method"] + "2")])).set_index("term").loc["class"]
    assert (two["F"], two["p_value"]) == pytest.approx((one["F"], one["p_value"]), rel=1e-12)
    qm = pair.groupby("query")["ap"].mean()
    ref = stats.f_oneway(*[qm[base["label"] == k] for k in "abc"])
    assert (one["F"], one["p_value"]) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-10)


def test_large_design_takes_well_under_a_second_or_two():
    rng = np.random.default_rng(8)
    q, m = 30_000, 3
    labels = rng.integers(0, 3_000, q)
    df = pd.DataFrame({"method": np.tile(["a", "b", "c"], q), "query": np.repeat(np.arange(q), m),
                       "label": np.repeat(labels, m), "ap": rng.random(q * m)})
    two_way_anova(df.head(300))  # imports
    t0 = time.perf_counter()
    t = two_way_anova(df)
    elapsed = time.perf_counter() - t0
    assert elapsed < 1.5, elapsed
    assert t.set_index("term").loc["method:class", "df"] == 2 * (np.unique(labels).size - 1)
