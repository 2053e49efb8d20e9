"""Exact top-k neighbours with faiss, for computations that need only the first k of a ranking
(a query's drill-down, grouped Recall@K within small groups).

faiss orders tied scores arbitrarily, so this is not a substitute for the tie-aware metrics of
:mod:`analysis_core.engine.core`; callers that score a top-k list must handle ties themselves
(:func:`top_k` returns the scores for that).
"""

from __future__ import annotations

import numpy as np

from ..extras import require
from .layout import prepare_vectors


def top_k(X: np.ndarray, k: int, *, similarity: str = "cosine", queries: np.ndarray | None = None,
          exclude_self: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The k best gallery items for each query, best first.

    Parameters
    ----------
    X : (N, d) gallery embeddings (also the queries unless ``queries`` is given).
    queries : row indices of X used as queries (default: all rows).
    exclude_self : leave each query itself out of its own list (leave-one-out).

    Returns
    -------
    scores : (n_queries, k) similarity (``-distance`` for euclidean), descending.
    indices : (n_queries, k) row indices into X; -1 where fewer than k items exist.

    Examples
    --------
    >>> s, i = top_k(np.eye(3, dtype=np.float32) + 0.1, 1)
    >>> i.ravel().tolist()
    [1, 0, 0]
    """
    (faiss,) = require("bench")  # an optional dependency: without it, the pip command

    Xf = prepare_vectors(X, similarity)
    q = np.arange(Xf.shape[0]) if queries is None else np.asarray(queries)
    kk = min(k + int(exclude_self), Xf.shape[0])
    index = faiss.IndexFlatL2(Xf.shape[1]) if similarity == "euclidean" else faiss.IndexFlatIP(Xf.shape[1])
    index.add(Xf)
    D, nn = index.search(np.ascontiguousarray(Xf[q]), kk)
    if similarity == "euclidean":
        D = -np.sqrt(np.maximum(D, 0.0))
    if exclude_self:
        keep = nn != q[:, None]
        # drop the query itself (or, if it was not returned because of ties, the last column)
        drop_last = keep.all(axis=1)
        keep[drop_last, -1] = False
        D = D[keep].reshape(len(q), kk - 1)
        nn = nn[keep].reshape(len(q), kk - 1)
    out_s = np.full((len(q), k), -np.inf, np.float32)
    out_i = np.full((len(q), k), -1, np.int64)
    out_s[:, :D.shape[1]] = D[:, :k]
    out_i[:, :nn.shape[1]] = nn[:, :k]
    return out_s, out_i


def query_neighbours(Xf: np.ndarray, query: int, k: int, *, similarity: str = "cosine",
                     sq_norms: np.ndarray | None = None,
                     candidates: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The k best items for one query, best first, the query itself left out: one row of scores
    and :func:`numpy.argpartition`, no index built (a drill-down at 60 000 items in milliseconds
    instead of a faiss index per call). ``Xf``: the vectors as :func:`prepare_vectors` returns
    them (reuse them across calls); ``sq_norms``: their squared norms in float64, for euclidean
    (computed when not given). Euclidean distances are expanded in float64, as the engine's tiles
    do. ``candidates``: a boolean mask of the items that may be returned (the gallery; None:
    every item). Tied scores are ordered by item index.

    Returns (scores, indices), each of length ``min(k, candidates other than the query)``;
    scores are similarities (``-distance`` for euclidean), descending.
    """
    q = Xf[query]
    if similarity == "euclidean":
        X64 = Xf.astype(np.float64, copy=False)
        sq = np.einsum("ij,ij->i", X64, X64) if sq_norms is None else sq_norms
        s = -np.sqrt(np.maximum(sq - 2.0 * (X64 @ X64[query]) + sq[query], 0.0))
    else:
        s = Xf @ q
    s = s.astype(np.float32, copy=False)  # a fresh array either way: written below
    allowed = np.ones(s.size, bool) if candidates is None else np.asarray(candidates, bool).copy()
    allowed[query] = False  # the query itself left out
    s[~allowed] = -np.inf
    kk = min(k, int(allowed.sum()))
    if kk <= 0:
        return np.empty(0, np.float32), np.empty(0, np.int64)
    top = np.argpartition(-s, kk - 1)[:kk] if kk < s.size else np.arange(s.size)
    cut = s[top].min()
    top = np.nonzero((s >= cut) & allowed)[0]  # every item tied with the k-th: ties ordered by index, not by chance
    order = np.lexsort((top, -s[top]))[:kk]
    return s[top[order]], top[order].astype(np.int64)
