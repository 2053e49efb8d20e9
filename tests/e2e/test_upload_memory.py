"""Uploads in a real browser against the server's memory: what is refused or deleted is given back
whatever the upload pattern, a zip bomb is refused from what it declares, and sessions together
stay under the server's upload budget (``DASHBOARD_UPLOAD_MB``). Memory is the server process's
resident set, read from /proc/<pid>/status."""

from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

from ..helpers import zip_bomb
from .test_browser import ARGS, CHROMIUM, STEP, _rss_mb, _settle, _wait_text, playwright, serve

pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.slow]

MB = 2**20
BUDGET_MB = 400  # the small server's upload budget


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _open(browser, url: str):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.goto(url)
    _wait_text(pg, "Summary (CSV)")
    pg.get_by_text("Upload files").click()
    _settle(pg)
    return pg


def _npz(compressed: bool = True, **arrays) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _payload(name: str, data: bytes) -> dict:
    return {"name": name, "mimeType": "application/octet-stream", "buffer": data}


def _listed(pg) -> int:
    return pg.locator("[data-testid='stFileUploader'] button[aria-label^='Remove ']").count()


def _wait_alert(pg, text: str, timeout: float = 600_000) -> None:
    pg.wait_for_function("t => [...document.querySelectorAll(\"[data-testid='stAlert']\")]"
                         ".some(e => e.innerText.includes(t))", arg=text, timeout=timeout)
    _settle(pg, timeout)


def _alert(pg) -> str:
    alerts = pg.locator("[data-testid='stAlert']")
    return "\n".join(alerts.nth(i).inner_text() for i in range(alerts.count()))


class _Peak:
    """The highest resident set of a process, sampled every 50 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.mb, self._stop = pid, _rss_mb(pid), threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.mb = max(self.mb, _rss_mb(self.pid))

    def __enter__(self) -> _Peak:
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


def _settled_rss(pid: int) -> float:
    """The resident set once it stopped falling (freed pages are returned within a second or two)."""
    last = _rss_mb(pid)
    for _ in range(20):
        time.sleep(0.5)
        now = _rss_mb(pid)
        if abs(now - last) < 5:
            return now
        last = now
    return last


def test_accumulated_uploads_then_deleted_release_their_memory(browser):
    """Three npz files of 1 GB of zeros each (~1 MB on the wire) added one after another to the
    same uploader (so the server reads 1, 2, then 3 GB, refused: all-zero vectors have no cosine),
    then removed one by one: the resident set ends within 300 MB of where it started."""
    zeros = _npz(embeddings=np.zeros((250_000, 1000), np.float32), labels=np.arange(250_000) % 2)
    assert len(zeros) < 2 * MB
    with serve() as (url, pid):
        pg = _open(browser, url)
        start = _settled_rss(pid)
        with _Peak(pid) as peak:
            for i in range(3):
                pg.locator("input[type='file']").set_input_files([_payload(f"zeros_{i}.npz", zeros)])
                _wait_alert(pg, f"zeros_{i}.npz [")  # the message names every file read
                assert "all-zero vectors" in _alert(pg), _alert(pg)
            while _listed(pg):
                pg.locator("[data-testid='stFileUploader'] button[aria-label^='Remove ']").first.click()
                _settle(pg, 600_000)
        end = _settled_rss(pid)
        print(f"\naccumulated: server RSS start {start:.0f} MB, peak {peak.mb:.0f} MB, end {end:.0f} MB")
        assert end - start < 300, (start, peak.mb, end)


def test_a_zip_bomb_is_refused_before_it_is_inflated(browser):
    """A 2 MB archive that inflates to 2 GB, on a server whose upload budget is 400 MB: refused
    from its declared size, naming the budget and how to raise it; the resident set grows by less
    than 200 MB (inflating it would take 2 GB)."""
    bomb = zip_bomb(2 * 10**9)
    assert len(bomb) < 3 * MB
    with serve(DASHBOARD_UPLOAD_MB=str(BUDGET_MB)) as (url, pid):
        pg = _open(browser, url)
        start = _settled_rss(pid)
        with _Peak(pid) as peak:
            pg.locator("input[type='file']").set_input_files([_payload("bomb.npz", bomb)])
            pg.get_by_text("This input can't be used.").first.wait_for(timeout=STEP)
            _settle(pg)
        alert = _alert(pg)
        print(f"\nzip bomb: server RSS start {start:.0f} MB, peak {peak.mb:.0f} MB")
        assert "(500000, 1000)" in alert and "400 MiB" in alert and "DASHBOARD_UPLOAD_MB" in alert, alert
        assert peak.mb - start < 200, (start, peak.mb)


def test_concurrent_sessions_stay_under_the_server_budget(browser, tmp_path):
    """Two sessions upload 240 MB each (uncompressed npz, sparse vectors that evaluate quickly), both
    in flight at once, to a server whose budget holds both files and one evaluation's working copies
    (2 x 240 MB) but not two: one is evaluated, the other refused with the budget's message, and its
    file's bytes are given back though it stays listed. Settled, the server holds the accepted data
    and nothing of the refused file; at its peak, Streamlit's receipt of both files, the accepted
    data and its evaluation's copies."""
    rng = np.random.default_rng(0)
    n, d = 120, 500_000  # 240 MB of float32
    data_mb = n * d * 4 / MB
    budget_mb = 1000  # >= 2 files + 2 working copies (916 MiB); < 2 files + 4 copies (1373 MiB)
    y = np.arange(n) % 4
    files = []
    for _ in range(2):
        X = np.zeros((n, d), np.float32)
        X[np.arange(n)[:, None], rng.integers(0, d, (n, 50))] = rng.standard_normal((n, 50))
        X[:, :4] += 3 * np.eye(4, dtype=np.float32)[y]
        files.append(tmp_path / f"session{len(files)}.npz")  # over 50 MB: handed to the browser as a file
        np.savez(files[-1], embeddings=X, labels=y)
    with serve(DASHBOARD_UPLOAD_MB=str(budget_mb)) as (url, pid):
        pages = [_open(browser, url) for _ in range(2)]
        start = _settled_rss(pid)
        with _Peak(pid) as peak:
            for i, pg in enumerate(pages):
                pg.locator("input[type='file']").set_input_files([str(files[i])])
            for i, pg in enumerate(pages):  # evaluated (its source shown) or refused
                pg.wait_for_function("n => document.body.innerText.includes('Source: ' + n) || "
                                     "document.body.innerText.includes('upload budget')", arg=f"session{i}.npz",
                                     timeout=600_000)
                _settle(pg, 600_000)
        settled = _settled_rss(pid)
        texts = [_alert(pg) for pg in pages]
        accepted = [i for i, pg in enumerate(pages) if pg.get_by_text(f"Source: session{i}.npz").count()]
        refused = [i for i, t in enumerate(texts) if "upload budget" in t]
        print(f"\nconcurrent: server RSS start {start:.0f} MB, peak {peak.mb:.0f} MB (+{peak.mb - start:.0f}), "
              f"settled {settled:.0f} MB (+{settled - start:.0f}); data {data_mb:.0f} MB each, budget {budget_mb} "
              f"MiB; accepted {accepted}, refused {refused}")
        assert len(accepted) == 1 and len(refused) == 1 and accepted != refused, texts
        assert f"{budget_mb:,} MiB" in texts[refused[0]] and "DASHBOARD_UPLOAD_MB" in texts[refused[0]]
        assert _listed(pages[refused[0]]) == 1  # still listed, so the user sees what was refused
        # Settled: the accepted data, plus 250 MB the allocator keeps after the evaluation (measured:
        # +120 to +250 MB after a first evaluation of these data in a bare process, none after a
        # second one); the refused file (240 MB more) must be gone.
        assert settled - start <= data_mb + 250 <= budget_mb, (start, settled)
        # Peak (measured +1 180 MB): Streamlit's receipt of both bodies before the budget sees them
        # (+430 MB measured with both refused on receipt), the deep copy of the uploader's value it
        # hands each script run (closed at once: analysis_core_dashboard/uploads.stored), and the accepted data
        # with its evaluation's two working copies (3 x 240 MB; the load itself adds nothing, its
        # arrays view the file's bytes): within 6 x the data.
        assert peak.mb - start <= 6 * data_mb, (start, peak.mb)
        for pg in pages:
            pg.context.close()
