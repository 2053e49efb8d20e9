"""Uploads kept in this server's memory so that a reload (a new browser session) finds them again.

A browser reload starts a new Streamlit session: the uploader is empty and the session's state is
gone. After an upload has loaded, its files (names and bytes — the very bytes objects the uploader
holds, so nothing is copied while the session lives) are kept under a random token
(:func:`secrets.token_urlsafe`, 128 bits: not guessable) that the page puts in its URL
(``?upload=<token>``); a session opened with that token reads the files from here.

* **Counted in the server's upload budget.** A kept upload reserves its bytes in
  :data:`analysis_core_dashboard.uploads.LEDGER` until it is dropped: it is counted with every session's
  datasets, and an upload that would not fit is not kept (the page says so).
* **Bounded in time and bytes.** An upload is dropped :data:`TTL_SECONDS` after its last use
  (``DASHBOARD_KEEP_MINUTES``, default 60; checked at every use of the store), when its session
  replaces or removes it, and — least recently used first — when the upload budget needs room:
  for another load (after the stored datasets, which can be loaded again; ``analysis_core_dashboard/cache.py``
  chains the two) or for another upload to keep.
* **Only in this process's memory**: never written to disk; another server (or a restarted one)
  knows none of the tokens.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from analysis_core_dashboard import uploads

ENV = "DASHBOARD_KEEP_MINUTES"
TTL_SECONDS = 60 * float(os.environ.get(ENV) or 60)

Files = list[tuple[str, bytes]]


@dataclasses.dataclass
class Kept:
    """One kept upload: its files, their digest (the dataset's cache key) and when it was last used."""

    files: Files
    digest: str
    nbytes: int
    used: float


class KeptUploads:
    """Uploads kept for a reload, by token; each reserves its bytes in ``ledger`` while kept.
    ``clock`` gives seconds (monotonic); ``ttl`` is how long an unused upload is kept."""

    def __init__(self, ledger: uploads.Ledger, ttl: float = TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.ledger, self.ttl, self.clock = ledger, ttl, clock
        self._lock = threading.RLock()
        self._kept: OrderedDict[str, Kept] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._kept)

    def keep(self, files: Files, digest: str) -> str | None:
        """Keep ``files`` and return their new token, or None when their bytes do not fit in the
        upload budget even after dropping older kept uploads (stored datasets are left alone: the
        one just loaded from these files is among them)."""
        nbytes = sum(len(data) for _, data in files)
        with self._lock:
            self._expire()
            while not self.ledger.reserve(nbytes):
                if not self.drop_oldest():
                    return None
            token = secrets.token_urlsafe(16)
            self._kept[token] = Kept(list(files), digest, nbytes, self.clock())
            return token

    def get(self, token: str) -> Kept | None:
        """The upload kept under ``token`` (now counted as used), or None: unknown, expired or
        dropped."""
        with self._lock:
            self._expire()
            kept = self._kept.get(token)
            if kept is not None:
                kept.used = self.clock()
                self._kept.move_to_end(token)
            return kept

    def forget(self, token: str) -> None:
        with self._lock:
            self._drop(token)

    def drop_oldest(self) -> bool:
        """Drop the least recently used kept upload; False when none is kept."""
        with self._lock:
            if not self._kept:
                return False
            self._drop(next(iter(self._kept)))
            return True

    def _drop(self, token: str) -> None:
        kept = self._kept.pop(token, None)
        if kept is not None:
            self.ledger.unreserve(kept.nbytes)

    def _expire(self) -> None:
        limit = self.clock() - self.ttl
        for token in [t for t, k in self._kept.items() if k.used < limit]:
            self._drop(token)


KEPT = KeptUploads(uploads.LEDGER)


def minutes() -> str:
    """How long an unused upload is kept, for the page."""
    m = KEPT.ttl / 60
    return f"{m:g} minute{'s' if m != 1 else ''}"
