"""How deep a pass keeps its queries' leading tie blocks for new cutoffs (:mod:`.cutoffs`): the
rank, the memory budget and the integer width, decided before the pass from what it will rank (the
pass's setup reads this module; :mod:`.cutoffs` recomputes the metrics from the kept blocks)."""

from __future__ import annotations

import numpy as np

#: the deepest cutoff ``evaluate``'s passes keep blocks for (P@100 is commonly reported; deeper
#: cutoffs run a pass)
CUTOFF_RANKS = 128
#: the memory an evaluation may spend on them, over all its methods, beyond CUTOFF_FLOOR's
CUTOFF_MB = 64.0
#: the rank every pass keeps blocks for, whatever the budget (the dashboard's largest K)
CUTOFF_FLOOR = 32
#: the tie-block kernels whose value at cutoff k reads only the blocks with T < k
PREFIX_KERNELS = ("expected_precision_at", "expected_hit_at")


def block_dtype(n: int) -> np.dtype:
    """Integers wide enough for ranks and block sizes among ``n`` items."""
    return np.dtype(np.int32 if n < 2**31 - 1 else np.int64)


def kept_ranks(n_entries: np.ndarray, n_queries: int, ranks: int, budget_bytes: float, itemsize: int,
               floor: int = 0) -> int:
    """The largest ``max_rank <= ranks`` whose blocks surely fit ``budget_bytes``, or ``floor`` if
    larger (but not above ``ranks``): a query keeps at most min(max_rank, its positive entries)
    blocks of ``3 * itemsize`` bytes (``n_entries``: per ranked query), and every query
    (``n_queries``) two offsets. 0: nothing kept."""
    room = (budget_bytes - 16 * n_queries) // (3 * itemsize)
    entries = np.asarray(n_entries, np.int64)
    lo, hi = min(max(floor, 0), max(int(ranks), 0)), max(int(ranks), 0)
    while lo < hi:  # the blocks kept grow with max_rank: bisect
        mid = (lo + hi + 1) // 2
        if int(np.minimum(entries, mid).sum()) <= room:
            lo = mid
        else:
            hi = mid - 1
    return lo
