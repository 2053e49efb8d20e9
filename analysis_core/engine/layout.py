"""The canonical layout: vectors as the engine scores them, exact duplicates merged into unique
vectors, and an order that depends on content and roles only (see :mod:`.core`)."""

from __future__ import annotations

import numpy as np

#: the dtypes similarities can be computed in (``precision``); float32 is the default
PRECISIONS = ("float32", "float64")


_PREPARE_BLOCK_BYTES = 2**20  # bytes of float64 rows per block of prepare_vectors: a few blocks stay in cache


def prepare_vectors(X: np.ndarray, similarity: str, precision: str = "float32") -> np.ndarray:
    """The vectors the tiles multiply, in ``precision``: normalised in float64 (cosine), then
    rounded to float32, or kept in float64. float32 input with ``precision="float64"`` is upcast
    (exactly): its products are then computed without float32 rounding, but its values keep the
    float32 resolution they were given in. Computed in C-ordered blocks of rows (every step is per
    element or per row, each row's sum pairwise): the same bits for any block height and for a
    Fortran-ordered or strided input as for a C-ordered one, so equal rows stay equal."""
    X = np.asarray(X)
    dtype = np.dtype(precision)
    out = np.empty(X.shape, dtype)
    shift = euclidean_shift(X) if similarity == "euclidean" else None
    step = max(1, _PREPARE_BLOCK_BYTES // max(1, 8 * X.shape[1]))
    for a in range(0, X.shape[0], step):
        # C order: each row's sum is pairwise whatever the input's layout or the block's height
        X64 = np.ascontiguousarray(X[a:a + step], dtype=np.float64)
        if shift is not None:
            X64 = X64 - shift
        if similarity == "cosine":
            with np.errstate(over="ignore", under="ignore"):  # such rows are rescaled just below
                norms = np.sqrt(np.add.reduce(X64 * X64, axis=1))
            extreme = ~((norms > 2.0**-500) & (norms < 2.0**500))  # squares would overflow or underflow
            if extreme.any():
                X64 = X64.copy()
                X64[extreme] = _unit_scale(X64[extreme])
                norms[extreme] = np.sqrt(np.add.reduce(X64[extreme] * X64[extreme], axis=1))
            X64 = X64 / norms[:, None]
        # + 0.0 turns -0.0 into 0.0 so equal vectors have equal bytes
        with np.errstate(over="ignore"):  # beyond float32: infinite scores, refused by setup.prepare
            np.add(X64.astype(dtype), dtype.type(0.0), out=out[a:a + step])
    return out


EUCLIDEAN_SHIFT_RATIO = 2.0**10  # centre when the data's offset is this many times its spread (squared)


def euclidean_shift(X: np.ndarray) -> np.ndarray | None:
    """The translation euclidean vectors are scored after, or None (the vectors as given).

    Distances do not change under a translation, but their expansion ``|x|^2 + |y|^2 - 2 x.y``
    cancels away the data when the vectors sit far from the origin (a cloud of spread 0.01 at
    1e6: mAP 0.33 instead of 0.90), and rounding to float32 keeps ~7 digits of the coordinates,
    not of their differences. When the midpoint of the data's bounding box is more than
    ``sqrt(EUCLIDEAN_SHIFT_RATIO)`` times farther from the origin than the box's half-diagonal,
    the vectors are moved by that midpoint first (in float64). Min and max do not depend on the
    row order, so neither does the shift; data near the origin are left exactly as given, so the
    exact ties of integer or binary codes stay ties."""
    if X.size == 0:
        return None
    centre, half = box_centre(X)
    scale = float(np.max(np.abs(centre)))
    if scale == 0.0 or not np.isfinite(scale):
        return None
    c, h = centre / scale, half / scale  # no overflow in the squares
    return centre if float(c @ c) > EUCLIDEAN_SHIFT_RATIO * float(h @ h) else None


def box_centre(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(midpoint, half-extent) of the rows' bounding box, per coordinate, in float64: from min and
    max only, so the same bits for the rows in any order."""
    lo = np.min(X, axis=0).astype(np.float64)
    hi = np.max(X, axis=0).astype(np.float64)
    return lo / 2 + hi / 2, hi / 2 - lo / 2


def _unit_scale(rows: np.ndarray) -> np.ndarray:
    """Each row times the power of two that brings its largest magnitude into [0.5, 1): exact, and
    the same direction, so cosine normalisation neither overflows (values ~1e200) nor loses the
    row to underflow (values ~1e-200)."""
    _, e = np.frexp(np.max(np.abs(rows), axis=1))
    return np.ldexp(rows, -e[:, None])


#: odd 64-bit multipliers of :func:`row_hashes`, fixed (a hash of the content, never of the run)
_HASH_MULTIPLIERS = np.random.default_rng(0x5EED_CA70).integers(1, 2**63, 4096, dtype=np.uint64) | np.uint64(1)
_HASH_BLOCK_BYTES = 2**23  # bytes of uint64 words per block of row_hashes


def row_hashes(X: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's bytes (uint64): equal rows get equal hashes; different rows
    collide with probability ~2^-64. Each 32-bit word is multiplied by its column's odd constant,
    mixed (xor-shift, multiply) and the row summed modulo 2^64: integer arithmetic, so the same
    value for the row at any position, in any block, on any machine. ``X`` C-contiguous, its
    rows a whole number of 32-bit words."""
    width = X.dtype.itemsize * X.shape[1] // 4
    words = np.ascontiguousarray(X).reshape(X.shape[0], -1).view(np.uint32).reshape(X.shape[0], width)
    mult = np.resize(_HASH_MULTIPLIERS, width) ^ (np.arange(width, dtype=np.uint64) << np.uint64(32))
    out = np.zeros(X.shape[0], np.uint64)
    step = max(1, _HASH_BLOCK_BYTES // max(1, 8 * width))
    with np.errstate(over="ignore"):
        for a in range(0, X.shape[0], step):
            z = words[a:a + step].astype(np.uint64)
            z *= mult
            z ^= z >> np.uint64(29)
            z *= np.uint64(0xBF58476D1CE4E5B9)
            z ^= z >> np.uint64(32)
            np.add.reduce(z, axis=1, out=out[a:a + step])
    return out


def unique_rows(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)`` of the distinct rows of ``X`` by their bytes, like ``np.unique`` of the
    rows viewed as bytes with ``return_index`` and ``return_inverse`` (``first``: the smallest row
    index of each distinct row; ``inverse``: each row's distinct row), but the distinct rows in the
    order of :func:`row_hashes` instead of the bytes: a sort of n integers instead of n rows of
    d values (0.1-1.6 s for 75 000 x 768 float32, against ~0.1 s). Rows of one hash are checked
    to be equal; on a collision (distinct rows, one hash) the bytes order is used instead."""
    n = X.shape[0]
    X = np.ascontiguousarray(X)
    if n == 0 or (X.dtype.itemsize * X.shape[1]) % 4 or X.shape[1] == 0:
        return _unique_bytes(X)
    h = row_hashes(X)
    order = np.argsort(h, kind="stable")  # stable: the first row of a run is its smallest index
    hs = h[order]
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(hs[1:], hs[:-1], out=new[1:])
    if not new.all():  # rows sharing a hash: equal rows (duplicates), or a collision
        words = X.view(np.uint32).reshape(n, -1)
        later = np.nonzero(~new)[0]
        leader = np.maximum.accumulate(np.where(new, np.arange(n), 0))[later]
        if not np.array_equal(words[order[later]], words[order[leader]]):
            return _unique_bytes(X)
    inv = np.empty(n, np.int64)
    inv[order] = np.cumsum(new) - 1
    return order[new].astype(np.int64), inv


def _unique_bytes(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`unique_rows` in the bytes order (``np.unique`` of the rows as bytes)."""
    if X.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rows = X.reshape(X.shape[0], -1).view(np.dtype((np.void, max(1, X.dtype.itemsize * X.shape[1])))) \
        if X.shape[1] else np.zeros((X.shape[0], 1), np.uint8).view(np.dtype((np.void, 1)))
    _, first, inv = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    return first.astype(np.int64), inv.ravel().astype(np.int64)


def canonical_order(Xf: np.ndarray, codes: np.ndarray, isq: np.ndarray, bucket: np.ndarray | None = None):
    """The rows of ``Xf`` holding the unique vectors, in canonical order (``Xf[rows]`` are the
    vectors the pass multiplies: :func:`~.row_order.rows_in_order`), and the items sorted to match.

    Order: vectors of queries first (so a few queries against a large gallery touch only the
    first row tiles), then by smallest ``bucket`` (the groups of classes of delete-a-group
    replicates, :mod:`.replicates`: each group's vectors together; none: one bucket), then by
    smallest class code, then by :func:`unique_rows`' order (a hash of the bytes): content, roles
    and groups only."""
    n, d = Xf.shape
    first, inv = unique_rows(Xf)
    n_u = first.shape[0]
    min_code = np.full(n_u, np.iinfo(np.int64).max, np.int64)
    np.minimum.at(min_code, inv, codes)
    any_q = np.zeros(n_u, np.int64)
    np.maximum.at(any_q, inv, isq.astype(np.int64))
    min_bucket = np.zeros(n_u, np.int64)
    if bucket is not None and bucket.any():
        min_bucket[:] = np.iinfo(np.int64).max
        np.minimum.at(min_bucket, inv, bucket)
    u_order = np.lexsort((np.arange(n_u), min_code, min_bucket, 1 - any_q))  # bytes order breaks ties: content only
    u_rank = np.empty(n_u, np.int64)
    u_rank[u_order] = np.arange(n_u)
    item_u = u_rank[inv]
    items = np.lexsort((np.arange(n), codes, item_u))
    uptr = np.zeros(n_u + 1, np.int64)
    np.cumsum(np.bincount(item_u, minlength=n_u), out=uptr[1:])
    return first[u_order], items, item_u[items], uptr


def score_range(Xu: np.ndarray, similarity: str) -> tuple[float, float]:
    """The range the pair histograms span: [-1, 1] for cosine, +-(largest norm)^2 for dot, and
    [-2 r, 0] for euclidean with r the largest distance from the midpoint of the vectors' bounding
    box (every distance is at most 2 r): the same for the data moved anywhere, so the histograms
    and JSD do not depend on where the data sit (the largest norm made them change with the
    offset, and jump where :func:`euclidean_shift` starts to move the vectors)."""
    if similarity == "cosine":
        return -1.0, 1.0
    X64 = Xu.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # an infinite (or NaN) range is refused by the caller
        if similarity == "euclidean" and Xu.size:
            X64 -= box_centre(X64)[0]
        m = float(np.sqrt(np.max(np.add.reduce(X64**2, axis=1)))) if Xu.size else 0.0
    if m == 0.0:
        return -1.0, 1.0
    return (-m * m, m * m) if similarity == "dot" else (-2.0 * m, 0.0)


def gallery_positives(codes: np.ndarray, is_gallery: np.ndarray) -> np.ndarray:
    """R of every item as a query: the gallery items of its class other than itself."""
    gal_per_class = np.bincount(codes[is_gallery], minlength=int(codes.max()) + 1 if codes.size else 0)
    return gal_per_class[codes] - is_gallery.astype(np.int64)
