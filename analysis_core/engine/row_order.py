"""Rows put in the canonical order in place (compiled; see :mod:`.layout`): the vectors the
pass multiplies are a private copy (:func:`~.layout.prepare_vectors`), so when no two rows merge
they are permuted where they are instead of gathered into a second array of the same size — one
copy of the data less at the pass's peak (307 MB for 100 000 x 768 float32), and no fresh block of
memory to fault in. Imported after the set-up's NumPy work (see :mod:`.compiled`)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def permute_rows(X, order):
    """``X[i] <- X[order[i]]`` for every row at once (``order`` a permutation of the rows), in
    place: each cycle of the permutation is followed once with one row held aside."""
    n = X.shape[0]
    done = np.zeros(n, np.bool_)
    held = np.empty(X.shape[1], X.dtype)
    for i in range(n):
        if done[i]:
            continue
        done[i] = True
        if order[i] == i:
            continue
        held[:] = X[i]
        j = i
        while True:
            k = order[j]
            if k == i:
                X[j] = held
                break
            X[j] = X[k]
            done[k] = True
            j = k


def rows_in_order(Xf: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``Xf[order]`` as a C-contiguous array: ``Xf`` itself, permuted in place, when ``order`` is a
    permutation of all of its rows (``Xf`` must then be the caller's to change); a gathered copy
    otherwise (merged duplicate rows: fewer rows)."""
    if order.shape[0] == Xf.shape[0] and Xf.flags.c_contiguous and Xf.flags.writeable:
        permute_rows(Xf, order.astype(np.int64, copy=False))
        return Xf
    return np.ascontiguousarray(Xf[order])
