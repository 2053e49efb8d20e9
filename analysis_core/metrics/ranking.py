"""Tie-aware ranking metrics of one query, in the style of scikit-learn's ``average_precision_score``.

Each function takes the binary relevance of the gallery items and their scores (higher = retrieved
first) and returns the metric's **expectation over the uniformly random order of tied items**, the
value an unbiased tie-breaker gives on average: deterministic, and equal to the usual definition
when no scores tie. They compute exactly what the evaluation engine computes for every query: both
call the compiled tie-block definitions of :mod:`analysis_core.metrics.tie_blocks`.

Notation: the gallery sorted by score falls into tie blocks c = 1..m (maximal runs of equal score),
best first; block c holds t_c items of which r_c are relevant; T_{c-1} items and R_{c-1} relevant
items rank strictly ahead of it; R is the number of relevant items.

References
----------
.. [1] F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures Efficiently
   in the Presence of Tied Scores", Advances in Information Retrieval (ECIR 2008), LNCS 4956,
   pp. 414-421, Springer, 2008.
.. [2] K. Musgrave, S. Belongie and S.-N. Lim, "A Metric Learning Reality Check", Computer Vision -
   ECCV 2020, LNCS 12370, pp. 681-699, Springer, 2020.
.. [3] A. Nicolaou, S. Dey, V. Christlein, A. Maier and D. Karatzas, "Non-deterministic Behavior of
   Ranking-based Metrics when Evaluating Embeddings", Reproducible Research in Pattern Recognition
   (RRPR 2018), LNCS 11455, Springer, 2019.
.. [4] F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the Impact
   of Inter-query Variability on the Performance of Retrieval Systems", Image Analysis and
   Recognition (ICIAR 2014), LNCS 8814, Springer, 2014.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from ..errors import InputError
from . import tie_blocks

__all__ = ["APResult", "average_precision", "hit_at_k", "map_at_r", "pr_curve", "precision_at_k",
           "r_precision", "reciprocal_rank"]


class APResult(NamedTuple):
    """Expected average precision over tie orders, with its worst and best tie order."""

    expected: float
    lower: float
    upper: float


def _blocks(relevant: ArrayLike, scores: ArrayLike, caller: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate one ranking and return (T, t, r) of its tie blocks holding a relevant item, best first."""
    rel = np.asarray(relevant)
    s = np.asarray(scores)
    if rel.ndim != 1 or s.ndim != 1:
        raise InputError(caller, f"relevant and scores must be 1-D, got shapes {rel.shape} and {s.shape}.",
                         "pass one ranking: a relevance flag and a score per gallery item.")
    if rel.shape != s.shape:
        raise InputError(caller, f"{rel.size} relevance flags for {s.size} scores (length mismatch).",
                         "give one relevance flag per score.")
    if s.dtype.kind not in "biuf":
        raise InputError(caller, f"scores have non-numeric dtype {s.dtype}.", "pass numbers.")
    if rel.dtype.kind not in "biuf" or not np.isin(rel, (0, 1)).all():
        raise InputError(caller, "relevance must be binary (0/1 or False/True).",
                         "threshold graded relevance first, e.g. relevant = grades > 0.")
    # integers stay integers: above 2^53 distinct int64 scores would round to equal float64 ones
    s = s.astype(np.int64 if s.dtype.kind in "bi" else np.uint64 if s.dtype.kind == "u" else np.float64)
    if s.dtype.kind == "f" and not np.isfinite(s).all():
        bad = np.nonzero(~np.isfinite(s))[0]
        raise InputError(caller, f"scores have NaN or infinite values at position(s) {bad[:5].tolist()}.",
                         "repair or remove those items.")
    rel = rel.astype(bool)
    if not rel.any():
        raise InputError(caller, "no relevant item: the metric is undefined for this ranking.",
                         "evaluate only queries with at least one relevant item.")
    order = np.argsort(s, kind="stable")[::-1]  # best first (no negation: it overflows integers)
    s, rel = s[order], rel[order]
    starts = np.r_[0, np.nonzero(s[1:] != s[:-1])[0] + 1]
    t = np.diff(np.r_[starts, s.size])
    r = np.add.reduceat(rel.astype(np.int64), starts)
    keep = r > 0
    return starts[keep].astype(np.int64), t[keep].astype(np.int64), r[keep].astype(np.int64)


def _cutoff(k: int, caller: str) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= 2**62:
        raise InputError(caller, f"k must be a positive integer (at most 2**62), got {k!r}.", "use e.g. k=1.")
    return int(k)


def average_precision(relevant: ArrayLike, scores: ArrayLike) -> APResult:
    r"""Tie-aware average precision of one ranking: expected value, worst and best tie order.

    Without ties, :math:`AP = \frac{1}{R}\sum_{i=1}^{R} \frac{i}{\mathrm{rank}_i}` (``rank_i``: the
    rank of the i-th relevant item), equal to scikit-learn's ``average_precision_score``. With
    ties, the expectation over tie orders [1]_

    .. math:: E[AP] = \frac{1}{R}\sum_c \sum_{j=1}^{t_c} \frac{r_c}{t_c}
              \frac{R_{c-1} + 1 + (j-1)\frac{r_c-1}{t_c-1}}{T_{c-1}+j}

    (the fraction taken as 0 when t_c = 1), and the bounds [3]_ with relevant items last / first in
    every block,
    :math:`AP^- = \frac{1}{R}\sum_c\sum_{i=1}^{r_c}\frac{R_{c-1}+i}{T_{c-1}+t_c-r_c+i}`,
    :math:`AP^+ = \frac{1}{R}\sum_c\sum_{i=1}^{r_c}\frac{R_{c-1}+i}{T_{c-1}+i}`.

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        1 (or True) for the items relevant to the query, 0 otherwise; at least one must be 1.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first. Equal scores are ties.

    Returns
    -------
    APResult
        ``(expected, lower, upper)``: E[AP], AP^- and AP^+; all three equal without ties.

    Raises
    ------
    InputError
        Shapes differ or are not 1-D, relevance not binary, no relevant item, non-finite scores.

    References
    ----------
    .. [1] F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures
       Efficiently in the Presence of Tied Scores", ECIR 2008, LNCS 4956, pp. 414-421, 2008.
    .. [3] A. Nicolaou, S. Dey, V. Christlein, A. Maier and D. Karatzas, "Non-deterministic
       Behavior of Ranking-based Metrics when Evaluating Embeddings", RRPR 2018, LNCS 11455, 2019.

    Examples
    --------
    >>> from analysis_core import average_precision
    >>> average_precision([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]).expected  # no ties: (1/1 + 2/3) / 2
    0.8333333333333333
    >>> average_precision([1, 0, 1, 0], [0.9, 0.8, 0.8, 0.1])  # tie at 0.8: rank 2 or 3
    APResult(expected=0.9166666666666666, lower=0.8333333333333333, upper=1.0)
    """
    T, t, r = _blocks(relevant, scores, "average_precision")
    lo, hi = tie_blocks.ap_bounds(T, t, r)
    return APResult(float(tie_blocks.expected_ap(T, t, r, np.iinfo(np.int64).max)), float(lo), float(hi))


def map_at_r(relevant: ArrayLike, scores: ArrayLike) -> float:
    r"""Tie-aware MAP@R of one ranking [2]_: average precision truncated at rank R, divided by R.

    Without ties, :math:`\mathrm{MAP@R} = \frac{1}{R}\sum_{i=1}^{R} P@i \cdot \mathrm{rel}_i`
    (P@i: precision at rank i, rel_i: 1 if rank i is relevant). With ties, the sum of
    :func:`average_precision`'s expectation restricted to ranks :math:`T_{c-1}+j \le R`.

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.

    Returns
    -------
    float
        Expected MAP@R over tie orders, in [0, 1].

    References
    ----------
    .. [2] K. Musgrave, S. Belongie and S.-N. Lim, "A Metric Learning Reality Check", ECCV 2020,
       LNCS 12370, pp. 681-699, 2020.
    .. [1] F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures
       Efficiently in the Presence of Tied Scores", ECIR 2008, LNCS 4956, pp. 414-421, 2008.

    Examples
    --------
    >>> from analysis_core import map_at_r
    >>> map_at_r([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1])  # R = 2: only rank 1 counts, (1/1) / 2
    0.5
    """
    T, t, r = _blocks(relevant, scores, "map_at_r")
    return float(tie_blocks.expected_ap(T, t, r, int(r.sum())))


def precision_at_k(relevant: ArrayLike, scores: ArrayLike, k: int) -> float:
    r"""Tie-aware precision at cutoff k of one ranking.

    :math:`E[P@k] = \frac{1}{k}\sum_c r_c \frac{\min(\max(k - T_{c-1}, 0), t_c)}{t_c}`: a tie
    block straddling the cutoff contributes the expected share of its relevant items inside it.
    The divisor is always k (trec_eval's ``P_k``), so for k > R the best value is R/k, and ranks
    past the end of a short ranking count as not relevant.

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.
    k : int
        Cutoff, k >= 1.

    Returns
    -------
    float
        Expected P@k over tie orders, in [0, 1].

    References
    ----------
    .. [1] F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures
       Efficiently in the Presence of Tied Scores", ECIR 2008, LNCS 4956, pp. 414-421, 2008.

    Examples
    --------
    >>> from analysis_core import precision_at_k
    >>> precision_at_k([0, 1, 1, 0], [0.9, 0.5, 0.5, 0.5], k=2)  # rank 2 is one of three tied
    0.3333333333333333
    """
    caller = "precision_at_k"
    T, t, r = _blocks(relevant, scores, caller)
    return float(tie_blocks.expected_precision_at(T, t, r, _cutoff(k, caller)))


def r_precision(relevant: ArrayLike, scores: ArrayLike) -> float:
    r"""Tie-aware R-Precision of one ranking [2]_: precision at cutoff R (the number of relevant
    items), :math:`E[P@R]` as in :func:`precision_at_k`.

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.

    Returns
    -------
    float
        Expected R-Precision over tie orders, in [0, 1].

    References
    ----------
    .. [2] K. Musgrave, S. Belongie and S.-N. Lim, "A Metric Learning Reality Check", ECCV 2020,
       LNCS 12370, pp. 681-699, 2020.

    Examples
    --------
    >>> from analysis_core import r_precision
    >>> r_precision([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1])  # R = 2, one relevant in the top 2
    0.5
    """
    T, t, r = _blocks(relevant, scores, "r_precision")
    return float(tie_blocks.expected_precision_at(T, t, r, int(r.sum())))


def hit_at_k(relevant: ArrayLike, scores: ArrayLike, k: int) -> float:
    r"""Tie-aware Recall@K in the metric-learning sense [2]_: whether a relevant item is in the top k.

    Without ties 1 if any of the first k items is relevant, else 0 (a hit rate; not the
    information-retrieval recall, the share of relevant items retrieved). With ties, the
    probability over tie orders: only the first block holding a relevant item decides; if it
    straddles the cutoff with :math:`k' = k - T_{c-1}` slots inside,
    :math:`1 - \binom{t_c - r_c}{k'} / \binom{t_c}{k'}` (hypergeometric).

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.
    k : int
        Cutoff, k >= 1.

    Returns
    -------
    float
        Probability of a hit in the top k, in [0, 1].

    References
    ----------
    .. [2] K. Musgrave, S. Belongie and S.-N. Lim, "A Metric Learning Reality Check", ECCV 2020,
       LNCS 12370, pp. 681-699, 2020.

    Examples
    --------
    >>> from analysis_core import hit_at_k
    >>> hit_at_k([0, 1, 0, 0], [0.5, 0.5, 0.5, 0.1], k=1)  # one relevant among three tied
    0.33333333333333337
    """
    caller = "hit_at_k"
    T, t, r = _blocks(relevant, scores, caller)
    return float(tie_blocks.expected_hit_at(T, t, r, _cutoff(k, caller)))


def reciprocal_rank(relevant: ArrayLike, scores: ArrayLike) -> float:
    r"""Tie-aware reciprocal rank of one ranking: :math:`E[1/\mathrm{rank}_1]`, the expected
    inverse rank of the first relevant item over tie orders (its mean over queries is the MRR).

    If the first block with a relevant item starts after :math:`T` items and holds t items, r of
    them relevant, the first relevant item is at position J of the block with
    :math:`P(J=j) = \binom{t-j}{r-1} / \binom{t}{r}`, and the value is :math:`E[1/(T+J)]`.

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.

    Returns
    -------
    float
        Expected reciprocal rank, in (0, 1].

    References
    ----------
    .. [1] F. McSherry and M. Najork, "Computing Information Retrieval Performance Measures
       Efficiently in the Presence of Tied Scores", ECIR 2008, LNCS 4956, pp. 414-421, 2008.

    Examples
    --------
    >>> from analysis_core import reciprocal_rank
    >>> reciprocal_rank([0, 1, 0], [0.9, 0.5, 0.5])  # rank 2 or 3: (1/2 + 1/3) / 2
    0.41666666666666663
    """
    T, t, r = _blocks(relevant, scores, "reciprocal_rank")
    return float(tie_blocks.expected_reciprocal_rank(T, t, r))


def pr_curve(relevant: ArrayLike, scores: ArrayLike, n_points: int = 11,
             interpolated: bool = False) -> tuple[np.ndarray, np.ndarray]:
    r"""Tie-aware precision-recall curve of one ranking on a fixed recall grid [4]_.

    Recall grid :math:`r_j = j / (N_P - 1)`, j = 0..N_P-1. Precision comes from the points
    :math:`(i/R,\ E[i/\mathrm{rank}_i])`, i = 1..R, linearly interpolated between them and
    constant for :math:`r < 1/R` (linear interpolation commutes with the expectation over tie
    orders, so this is the expected curve). With ``interpolated=True`` the precision at r is the
    maximum over the points with recall >= r (trec_eval's ``iprec_at_recall``).

    Parameters
    ----------
    relevant : array-like of shape (n_items,)
        Binary relevance; at least one relevant item.
    scores : array-like of shape (n_items,)
        Finite scores; higher ranks first.
    n_points : int, default 11
        Number N_P >= 2 of recall grid points.
    interpolated : bool, default False
        Interpolated precision instead of the linear interpolation of the points.

    Returns
    -------
    recall : ndarray of shape (n_points,)
        The grid, 0 to 1.
    precision : ndarray of shape (n_points,)
        Expected precision at each grid point (the plain curve). With ``interpolated=True``: the
        interpolation of the expected points, max over recall >= r of E[precision], which under
        ties is at most E[max over recall >= r of precision] (the interpolation is not linear, so
        it does not commute with the expectation over tie orders; without ties they are equal).

    References
    ----------
    .. [4] F. Brughi, D. Gil, L. Badiella, E. Jove Casabella and O. Ramos Terrades, "Exploring the
       Impact of Inter-query Variability on the Performance of Retrieval Systems", ICIAR 2014,
       LNCS 8814, 2014.

    Examples
    --------
    >>> from analysis_core import pr_curve
    >>> recall, precision = pr_curve([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1], n_points=3)
    >>> recall.tolist(), [round(p, 4) for p in precision.tolist()]
    ([0.0, 0.5, 1.0], [1.0, 1.0, 0.6667])
    """
    caller = "pr_curve"
    T, t, r = _blocks(relevant, scores, caller)
    if isinstance(n_points, bool) or not isinstance(n_points, (int, np.integer)) or n_points < 2:
        raise InputError(caller, f"n_points = {n_points!r} gives no recall grid.", "use at least 2 points.")
    precision = tie_blocks.pr_curve(T, t, r, int(n_points), bool(interpolated))
    return np.arange(int(n_points)) / (int(n_points) - 1), precision  # the grid the engine uses
