"""A 2-D map of one method's embeddings: principal components (exact, at once) or UMAP (on
request, the ``map`` extra), of every item or of a class-stratified sample above a point budget.

* **What is projected.** The vectors as the similarity sees them: under ``cosine`` the rows
  L2-normalised (two items are close on the map when their cosine is high; the norm, which cosine
  ignores, does not spread the picture), under ``dot`` and ``euclidean`` the raw vectors.
* **PCA** (Pearson 1901; Jolliffe, *Principal Component Analysis*, 2nd ed., Springer 2002): the
  items centred, the two leading eigenvectors of the scatter matrix ``Xc^T Xc`` (or, with fewer
  items than dimensions, of the Gram matrix ``Xc Xc^T``), computed exactly by a symmetric
  eigendecomposition in float64 — the same axes as the singular value decomposition of ``Xc``,
  at the cost of one matrix product instead of an SVD of a tall matrix. Above
  :data:`EXACT_VALUES` values (n x d) that product alone takes seconds, and the two axes come from
  a seeded randomized subspace iteration instead (Halko, Martinsson & Tropp 2011), as in
  scikit-learn's ``PCA(svd_solver="auto")``: the exact axes to many digits wherever the two
  leading variances stand out from the rest. Coordinates are ``Xc v_j``; the explained
  variance ratio of axis j is their variance over the total variance.
  **Sign convention**: an eigenvector's sign is arbitrary and LAPACK builds may differ, so each
  axis is oriented so that its largest-magnitude loading is positive (the first such loading
  when several tie) — the convention of scikit-learn's ``svd_flip(u_based_decision=False)`` —
  and the picture does not mirror between machines.
* **UMAP** (McInnes, Healy & Melville 2018, *UMAP: Uniform Manifold Approximation and
  Projection for Dimension Reduction*, arXiv:1802.03426), ``umap-learn`` with a fixed
  ``random_state`` (which also makes it single-threaded: the same picture on every run), on the
  vectors above with the euclidean metric (for unit vectors, the same neighbours as cosine).
* **Budget.** Above :data:`PCA_BUDGET` items (:data:`UMAP_BUDGET` for UMAP, whose cost grows
  faster) a stratified random sample is projected and drawn (:func:`map_sample`): every class
  keeps at least one item and the rest follow class sizes; the map says how many of how many.
  50 000 WebGL points draw in well under a second in a browser; the sample bounds the page's
  JSON (about 100 bytes a point) and the projection's time.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import InputError
from ..extras import require

PCA_BUDGET = 50_000  # points projected and drawn by PCA (the rest sampled out, with a note)
# UMAP: 20 s at 20 000 x 768 on two busy cores, after a first call's compilation (numba, up to two minutes)
UMAP_BUDGET = 20_000
KINDS = ("pca", "umap")
EXACT_VALUES = 2**23  # n x d up to which PCA is exact (8.4 M values, e.g. 11 000 x 768: under a second)
_OVERSAMPLE = 10  # extra random directions of the randomized PCA (Halko et al. 2011 suggest 5-10)
_POWER_ITERATIONS = 7  # scikit-learn's randomized_svd default for a few components
_BLOCK = 8192  # rows per block of the scatter matrix: a float64 copy of one block at a time


@dataclass(frozen=True)
class Projection:
    """Map coordinates of ``rows`` (positions in the projected array, ascending) and how they
    were made. ``explained``: the share of the total variance along each axis (PCA; NaN when the
    vectors do not vary, None for UMAP). ``n_items``: items before sampling."""

    coords: np.ndarray
    rows: np.ndarray
    kind: str
    n_items: int
    seed: int
    explained: np.ndarray | None = None

    @property
    def sampled(self) -> bool:
        return self.rows.size < self.n_items

    def axis_titles(self) -> tuple[str, str]:
        """``PC1 (62.3 %)`` and ``PC2 (11.0 %)`` for PCA; ``UMAP 1`` and ``UMAP 2``."""
        if self.kind == "umap":
            return "UMAP 1", "UMAP 2"
        ex = self.explained if self.explained is not None else np.full(2, np.nan)
        return tuple(f"PC{j + 1}" + ("" if np.isnan(ex[j]) else f" ({100 * ex[j]:.1f} % of variance)")
                     for j in range(2))  # type: ignore[return-value]

    def note(self) -> str:
        """What is drawn, in one sentence for the page and the figure."""
        what = ("a stratified random sample of " + f"{self.rows.size:,} of {self.n_items:,} items (every class "
                f"kept, seed {self.seed})") if self.sampled else f"all {self.n_items:,} items"
        if self.kind == "pca" and self.explained is not None and np.isnan(self.explained).all():
            return f"PCA of {what}: every item maps to one point (the vectors do not vary)."
        return f"{'PCA' if self.kind == 'pca' else 'UMAP'} of {what}."


def map_sample(codes: np.ndarray, budget: int, seed: int = 0) -> np.ndarray:
    """Rows of a class-stratified random sample of about ``budget`` items (all rows, ascending,
    when there are at most ``budget``). Class c of n_c items keeps ``max(1, floor(budget n_c / N))``
    items, or all of its own if fewer; when the one-item minimums overshoot the budget, the classes
    furthest above their share give one back; the remaining places go by largest remainder (ties
    to the lower class code). Then the items are drawn without replacement within each class with
    ``numpy.random.default_rng(seed)``. With more classes than ``budget``, one item of each
    class is kept (so the sample has ``n_classes`` items). ``codes``: integer class codes."""
    codes = np.asarray(codes)
    n = codes.size
    if budget < 1:
        raise InputError("embedding map", f"a point budget of {budget} draws nothing.", "use a budget of at least 1.")
    if n <= budget:
        return np.arange(n)
    classes, inverse, sizes = np.unique(codes, return_inverse=True, return_counts=True)
    exact = budget * sizes / n
    take = np.minimum(np.maximum(np.floor(exact).astype(np.int64), 1), sizes)
    while take.sum() > max(budget, classes.size):  # the one-item minimums overshot: trim the most over share
        over = np.flatnonzero(take > 1)
        over = over[np.lexsort((over, -(take[over] - exact[over])))]
        take[over[:int(take.sum()) - budget]] -= 1
    left = budget - int(take.sum())
    if left > 0:
        room = take < sizes
        order = np.lexsort((np.arange(classes.size), -(exact - take)))
        order = order[room[order]][:left]
        take[order] += 1
    rng = np.random.default_rng(seed)
    by_class = np.argsort(inverse, kind="stable")
    starts = np.r_[0, np.cumsum(sizes)]
    chosen = [by_class[starts[c]:starts[c + 1]][rng.choice(sizes[c], take[c], replace=False)]
              for c in range(classes.size)]
    return np.sort(np.concatenate(chosen))


def map_vectors(X: np.ndarray, similarity: str, rows: np.ndarray | None = None) -> np.ndarray:
    """The vectors the map places, of the rows ``rows`` of ``X`` (every row when None): under
    ``cosine`` L2-normalised (each norm summed in float64, then each row divided by it in the
    array's own dtype, by blocks of rows: no float64 copy of the whole array, and the division
    writes in place into the gathered rows; zero rows refused), under ``dot`` and ``euclidean``
    the raw vectors."""
    if similarity not in ("cosine", "dot", "euclidean"):
        raise InputError("embedding map", f"unknown similarity '{similarity}'.", "use cosine, dot or euclidean.")
    X = np.asarray(X)
    if similarity != "cosine":
        return X if rows is None else X[rows]
    dtype = np.float64 if X.dtype == np.float64 else np.float32
    # one copy of the mapped rows, normalised in place
    out = X.astype(dtype, copy=True) if rows is None else X[rows].astype(dtype, copy=False)
    for a in range(0, out.shape[0], _BLOCK):
        B = out[a:a + _BLOCK]
        norms = np.sqrt(np.square(B, dtype=np.float64).sum(axis=1))
        if not (norms > 0).all():
            bad = np.flatnonzero(~(norms > 0))[:5] + a
            bad = (bad if rows is None else np.asarray(rows)[bad]).tolist()
            raise InputError("embedding map", f"rows {bad} are zero vectors, which have no direction under cosine.",
                             "drop them, or use the dot or euclidean similarity.")
        B /= norms.astype(dtype)[:, None]
    return out


def _oriented(v: np.ndarray) -> np.ndarray:
    """Columns of ``v`` each multiplied by the sign of its largest-magnitude entry."""
    lead = np.argmax(np.abs(v), axis=0)
    signs = np.sign(v[lead, np.arange(v.shape[1])])
    return v * np.where(signs == 0, 1.0, signs)


def _exact_axes(X: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """All principal axes (d, <= d columns), by decreasing variance: eigenvectors of the float64
    scatter matrix, or with fewer items than dimensions of the Gram matrix (same non-zero
    eigenvalues; the axes are ``Xc^T u / sqrt(lambda)``)."""
    n, d = X.shape
    if n >= d:
        scatter = np.zeros((d, d))
        for a in range(0, n, _BLOCK):
            B = X[a:a + _BLOCK].astype(np.float64) - mean
            scatter += B.T @ B
        return np.linalg.eigh(scatter)[1][:, ::-1]
    Xc = X.astype(np.float64) - mean
    lam, u = np.linalg.eigh(Xc @ Xc.T)
    lam, u = lam[::-1][:2], u[:, ::-1][:, :2]
    with np.errstate(divide="ignore", invalid="ignore"):
        vec = (Xc.T @ u) / np.sqrt(np.maximum(lam, 0.0))
    return np.where(np.isfinite(vec), vec, 0.0)


def _randomized_axes(X: np.ndarray, mean: np.ndarray, seed: int) -> np.ndarray:
    """The two leading principal axes by randomized subspace iteration (Halko, Martinsson & Tropp
    2011, *Finding structure with randomness*, SIAM Review 53(2):217-288, Algorithm 4.4):
    :data:`_OVERSAMPLE` + 2 random directions (seeded), :data:`_POWER_ITERATIONS` multiplications
    by ``Xc^T Xc`` each followed by a QR in float64, then the exact eigenvectors of the scatter
    matrix restricted to that subspace (Rayleigh-Ritz). ``Xc`` is never formed: ``Xc Q = X Q -
    1 (mean Q)``. The error shrinks like ``(lambda_{l+1} / lambda_2)^(q + 1/2)`` (variances
    ``lambda``, ``l`` directions, ``q`` iterations): where the two leading variances are 10 times
    the 13th, the exact axes to about 7 digits; where they are nearly equal, no method's second
    axis is stable (a sample of other items would turn it)."""
    d = X.shape[1]
    k = min(d, 2 + _OVERSAMPLE)
    Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((d, k)))[0]
    mean_x = mean.astype(X.dtype)

    def scatter_times(Q: np.ndarray) -> np.ndarray:  # Xc^T (Xc Q), products in X's dtype
        Qx = Q.astype(X.dtype)
        Y = X @ Qx - mean_x @ Qx
        return (X.T @ Y - np.outer(mean_x, Y.sum(axis=0))).astype(np.float64)

    for _ in range(_POWER_ITERATIONS):
        Q = np.linalg.qr(scatter_times(Q))[0]
    small = Q.T @ scatter_times(Q)
    w, u = np.linalg.eigh((small + small.T) / 2)
    return Q @ u[:, ::-1][:, :2]


def pca_2d(X: np.ndarray, *, exact_up_to: int | None = None, seed: int = 0,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first two principal components of the rows of ``X`` (n, d): returns (coordinates
    (n, 2), explained variance ratio (2,), components (d, 2) — unit loadings, each with its
    largest-magnitude entry positive). Exact (:func:`_exact_axes`) for at most ``exact_up_to``
    values (``n d``; default :data:`EXACT_VALUES`), else by seeded randomized subspace iteration
    (:func:`_randomized_axes`), as scikit-learn's ``PCA(svd_solver="auto")`` chooses for large
    data. The ratio of axis j is the variance of its coordinates over the total variance, summed
    in float64. With ``d = 1`` the second axis is 0 with ratio 0; an axis without variance
    (beyond the data's rank) is 0 with ratio 0; when the rows do not vary every coordinate is 0
    and both ratios are NaN (undefined: no variance to explain)."""
    X = np.asarray(X)
    n, d = X.shape
    mean = X.mean(axis=0, dtype=np.float64)
    exact = X.size <= (EXACT_VALUES if exact_up_to is None else exact_up_to) or d <= 2 + _OVERSAMPLE
    vec = _oriented((_exact_axes(X, mean) if exact else _randomized_axes(X, mean, seed))[:, :2])
    components = np.zeros((d, 2))
    components[:, :vec.shape[1]] = vec
    coords = np.empty((n, 2))
    total = 0.0
    for a in range(0, n, _BLOCK):
        B = X[a:a + _BLOCK].astype(np.float64) - mean
        coords[a:a + _BLOCK] = B @ components
        total += float(np.einsum("ij,ij->", B, B))
    var = np.einsum("ij,ij->j", coords, coords)
    if total == 0:
        return np.zeros((n, 2)), np.full(2, np.nan), components
    # an axis with (numerically) no variance is no direction: coordinates 0, not rounding noise
    tiny = var <= total * 1e-12 * max(n, d)
    coords[:, tiny] = 0.0
    components[:, tiny] = 0.0
    return coords, np.where(tiny, 0.0, var / total), components


def umap_installed() -> bool:
    """Whether ``umap-learn`` (the ``map`` extra) can be imported, without importing it (seconds)."""
    try:
        return importlib.util.find_spec("umap") is not None
    except (ImportError, ValueError):  # a broken or blocked install
        return False


def umap_2d(X: np.ndarray, seed: int = 0) -> np.ndarray:
    """UMAP coordinates (n, 2) of the rows of ``X`` (euclidean metric, ``random_state=seed``).
    Needs the ``map`` extra (``umap-learn``): without it, :class:`InputError` with the pip command.
    Fewer than 4 items, or rows that are all equal, are placed by :func:`pca_2d` instead (UMAP needs
    neighbours to embed)."""
    (umap,) = require("map")
    X = np.asarray(X, dtype=np.float32)
    n = X.shape[0]
    if n < 4 or not np.ptp(X, axis=0).any():
        return pca_2d(X)[0]
    model = umap.UMAP(n_components=2, n_neighbors=min(15, n - 1), metric="euclidean", random_state=seed,
                      init="spectral" if n > 10 else "random")
    with warnings.catch_warnings():  # "n_jobs overridden by setting random_state": the point of the seed
        warnings.filterwarnings("ignore", message="n_jobs value", category=UserWarning)
        return np.asarray(model.fit_transform(X), dtype=np.float64)


def project(X: np.ndarray, codes: np.ndarray, kind: str = "pca", *, similarity: str = "cosine",
            budget: int | None = None, seed: int = 0) -> Projection:
    """The 2-D map of the rows of ``X`` (one method's embeddings, (n, d)) with class codes
    ``codes``: ``kind`` ``pca`` (exact, :func:`pca_2d`) or ``umap`` (:func:`umap_2d`), of the
    vectors :func:`map_vectors` gives for ``similarity``, of every row or — above ``budget``
    (default :data:`PCA_BUDGET`, :data:`UMAP_BUDGET` for UMAP) — of :func:`map_sample`'s rows
    (``seed`` draws the sample and seeds UMAP)."""
    if kind not in KINDS:
        raise InputError("embedding map", f"unknown projection '{kind}'.", f"use one of {', '.join(KINDS)}.")
    X = np.asarray(X)
    if X.ndim != 2 or X.shape[0] != np.asarray(codes).size or X.shape[0] < 1 or X.shape[1] < 1:
        raise InputError("embedding map", f"embeddings of shape {X.shape} and {np.asarray(codes).size} labels "
                         "do not make a map.", "give an (n, d) array with n >= 1, d >= 1 and one label per row.")
    if budget is None:
        budget = PCA_BUDGET if kind == "pca" else UMAP_BUDGET
    rows = map_sample(codes, budget, seed)
    V = map_vectors(X, similarity, rows if rows.size < X.shape[0] else None)
    if kind == "pca":
        coords, ratio, _ = pca_2d(V, seed=seed)
        return Projection(coords, rows, kind, X.shape[0], seed, ratio)
    return Projection(umap_2d(V, seed), rows, kind, X.shape[0], seed)


def map_frame(proj: Projection, labels: np.ndarray, *, rows: np.ndarray | None = None,
              ids: np.ndarray | None = None, ap: pd.Series | None = None,
              split: np.ndarray | None = None) -> pd.DataFrame:
    """The points of ``proj`` as a table for :func:`~analysis_core.figures.embedding_map.
    embedding_map_figure`: ``x, y``, ``row`` (the input row: ``rows[proj.rows]`` when the
    projected array was a subset of the input, e.g. one split's items), ``label``, ``id`` (only
    with ``ids``), ``ap`` (``ap``: per-query AP indexed by input row; NaN where an item has
    none) and ``split`` when given. ``labels``, ``ids`` and ``split`` are aligned with the
    projected array."""
    at = proj.rows
    row = at if rows is None else np.asarray(rows)[at]
    df = pd.DataFrame({"x": proj.coords[:, 0], "y": proj.coords[:, 1], "row": row, "label": np.asarray(labels)[at]})
    if ids is not None:
        df["id"] = np.asarray(ids)[at].astype(str)
    df["ap"] = np.nan if ap is None else ap.reindex(row).to_numpy(np.float64)
    if split is not None:
        df["split"] = np.asarray(split)[at]
    return df


#: the per-query metrics the map's selection table shows, in this order
SELECTION_METRICS = ("ap", "r_precision", "precision_at_1", "map_at_r")


def selection_table(per_query: pd.DataFrame, rows: np.ndarray, labels: np.ndarray,
                    ids: np.ndarray | None = None) -> pd.DataFrame:
    """Per-query metrics of the input rows ``rows`` (a selection on the map), one line each in
    ascending row order: ``row, id, label, n_positives`` and :data:`SELECTION_METRICS` from
    ``per_query`` (one method's :meth:`~analysis_core.Evaluation.per_query` frame, ``query`` =
    input row). Items that were not scored as queries (lone, gallery only, outside a query
    sample) are listed with empty metrics: a selection never loses a point. ``labels`` and
    ``ids`` are indexed by input row."""
    rows = np.unique(np.asarray(rows, dtype=np.int64))
    pq = per_query.set_index("query")
    cols = ["n_positives", *[m for m in SELECTION_METRICS if m in pq.columns]]
    got = pq.reindex(rows)[cols]
    got.loc[got["n_positives"] == 0, cols[1:]] = np.nan  # a lone query has no metric to show
    out = pd.DataFrame({"row": rows, "id": (np.asarray(ids)[rows] if ids is not None else rows).astype(str),
                        "label": np.asarray(labels)[rows]})
    return pd.concat([out, got.reset_index(drop=True)], axis=1)
