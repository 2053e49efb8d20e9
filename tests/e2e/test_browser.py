"""The dashboard in a real browser: `streamlit run` driven by Playwright with Debian's chromium."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ART = ROOT / "tests" / "e2e" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]

pytestmark = pytest.mark.e2e
playwright = pytest.importorskip("playwright.sync_api")
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (make test installs it as root)", allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "dashboard" / "app.py"),
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.3)
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture()
def page(server):
    ART.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        pg = browser.new_page(viewport={"width": 1400, "height": 1000})
        pg.goto(server)
        yield pg
        browser.close()


def _wait_ready(pg, text: str, timeout: float = 120_000) -> None:
    pg.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def test_opens_on_demo_data_without_errors(page):
    _wait_ready(page, "Summary (CSV)")
    page.locator("[data-testid='stDataFrame'] canvas").first.wait_for()
    page.wait_for_timeout(1500)  # let the canvas grid paint before the screenshot
    assert page.locator("[data-testid='stException']").count() == 0
    page.screenshot(path=str(ART / "overview_demo.png"), full_page=True)


def test_upload_shows_the_clis_map_and_a_bad_file_shows_its_message(page, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 8)).astype(np.float32)
    y = rng.integers(0, 6, 300)
    good = tmp_path / "upload_me.npz"
    np.savez(good, embeddings=X, labels=y)
    out = subprocess.run([sys.executable, "-m", "analysis_core", "evaluate", str(good), "--quiet"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    expected = json.loads(out.stdout)["methods"]["upload_me"]["map"]["expected"]

    _wait_ready(page, "Summary")
    page.get_by_text("Upload files").click()
    page.locator("input[type='file']").set_input_files(str(good))
    _wait_ready(page, "upload_me")
    page.get_by_text("Summary").first.wait_for()
    grid = page.locator("[data-testid='stDataFrame']").first
    grid.wait_for()
    page.screenshot(path=str(ART / "overview_upload.png"), full_page=True)
    # the summary table's CSV download holds the exact numbers shown
    with page.expect_download() as dl:
        page.get_by_role("button", name="Summary (CSV)").click()
    csv = Path(dl.value.path()).read_text().splitlines()
    header, row = csv[0].split(","), csv[1].split(",")
    assert row[0] == "upload_me"
    assert float(row[header.index("mAP")]) == pytest.approx(expected, abs=1e-12)

    bad = tmp_path / "broken.npz"
    Xb = X.copy()
    Xb[5, 1] = np.nan
    np.savez(bad, embeddings=Xb, labels=y)
    page.locator("input[type='file']").set_input_files(str(bad))
    page.get_by_text("NaN or infinite values").first.wait_for(timeout=60_000)
    page.screenshot(path=str(ART / "overview_bad_upload.png"), full_page=True)
    # the session keeps working: back to a demo set
    page.get_by_text("Demo: handwritten digits").click()
    _wait_ready(page, "Source: digits.npz")
    assert page.locator("[data-testid='stException']").count() == 0
