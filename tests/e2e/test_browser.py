"""The dashboard in a real browser: `streamlit run` driven by Playwright with Debian's chromium."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ..helpers import ROOT, free_port

ART = ROOT / "tests" / "e2e" / "artifacts"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
PAGES = ["Overview", "Per query & class", "PR bands", "Statistics", "Similarity histograms",
         "Class count & group size", "Ties", "Embedding map", "Confidence", "Generalization"]

pytestmark = [pytest.mark.e2e, pytest.mark.browser]
playwright = pytest.importorskip("playwright.sync_api")
expect = playwright.expect
if not Path(CHROMIUM).exists():
    pytest.skip("Debian's chromium is not installed (make test installs it as root)", allow_module_level=True)


#: ms a step of the app may take before a wait gives up: what 2 cores shared with other test workers
#: need (a step that takes 10 s on a quiet machine took over 60 s in a loaded suite)
STEP = 180_000
SERVER_PID: dict[str, int] = {}  # the running server's process id, for memory checks


@contextlib.contextmanager
def serve(**env: str) -> Iterator[tuple[str, int]]:
    """``streamlit run`` the dashboard on a free port with ``env`` added: (its URL, its process id)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "analysis_core_dashboard" / "app.py"),
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--server.headless", "true", "--browser.gatherUsageStats", "false"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + STEP / 1000
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            time.sleep(0.3)
    try:
        yield f"http://127.0.0.1:{port}", proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.fixture(scope="module")
def server():
    with serve() as (url, pid):
        SERVER_PID["pid"] = pid
        yield url


@pytest.fixture(scope="module")
def browser():
    ART.mkdir(parents=True, exist_ok=True)
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture()
def page(server, browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    pg = ctx.new_page()
    pg.goto(server)
    yield pg
    ctx.close()


def _settle(pg, timeout: float = STEP) -> None:
    """Wait until the app has finished running (no 'running' status widget)."""
    pg.wait_for_timeout(300)
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def _wait_text(pg, text: str, timeout: float = STEP) -> None:
    pg.get_by_text(text, exact=False).first.wait_for(timeout=timeout)
    _settle(pg, timeout)


def _no_exception(pg) -> None:
    assert pg.locator("[data-testid='stException']").count() == 0


def _shot(pg, name: str) -> None:
    if pg.locator("[data-testid='stDataFrame'] canvas").count():
        pg.wait_for_timeout(1200)  # let canvas grids paint
    pg.screenshot(path=str(ART / f"{name}.png"), full_page=True)


def _metric_changes(pg, index: int, before: str, timeout: float = STEP) -> None:
    """Wait until the index-th metric shows something other than ``before`` and the run ends."""
    pg.wait_for_function("([i, b]) => { const m = document.querySelectorAll('[data-testid=\"stMetricValue\"]');"
                         " return m.length > i && m[i].innerText !== b; }", arg=[index, before], timeout=timeout)
    _settle(pg)


def _summary_csv(pg) -> pd.DataFrame:
    with pg.expect_download() as dl:
        pg.get_by_role("button", name="Summary (CSV)").click()
    return pd.read_csv(dl.value.path())


def _data_input(pg):
    """The embeddings uploader's file input (the sidebar's Design expander holds another)."""
    return pg.locator("[data-testid='stFileUploader']").filter(has_text="Embeddings").locator("input[type='file']")


def _upload(pg, *paths: Path) -> None:
    pg.get_by_text("Upload files").click()
    _data_input(pg).set_input_files([str(p) for p in paths])


def _replace_uploads(pg, *paths: Path) -> None:
    """Remove the uploaded files (the uploader appends), then upload ``paths``."""
    delete = pg.locator("[data-testid='stFileUploader'] button[aria-label^='Remove ']")
    while delete.count():
        delete.first.click()
        _settle(pg)
    _data_input(pg).set_input_files([str(p) for p in paths])


def _cli_map(path_args: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-m", "analysis_core", "evaluate", *path_args, "--quiet"],
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
    return {m: v["map"]["expected"] for m, v in json.loads(out.stdout)["methods"].items()}


def test_every_page_renders_on_demo_data(page):
    page.get_by_text("Demo: 600 classes").click()
    _wait_text(page, "Summary (CSV)")
    for name in PAGES:
        page.get_by_role("link", name=name).click()
        _settle(page)
        page.get_by_role("heading").first.wait_for()
        _no_exception(page)
        _shot(page, "page_" + name.lower().replace(" & ", "_").replace(" ", "_"))


def test_sliders_move_and_a_pdf_export_downloads(page):
    page.get_by_text("Demo: 600 classes").click()
    _wait_text(page, "Summary (CSV)")
    page.get_by_role("link", name="Class count & group size").click()
    _wait_text(page, "Grouped R@1")
    items_before = page.locator("[data-testid='stMetricValue']").first.inner_text()
    grouped_before = page.locator("[data-testid='stMetricValue']").nth(3).inner_text()
    def slider(label: str):
        return page.locator(f"[aria-label='{label}'] input[type='range']").first

    slider("Number of classes C").focus()
    for _ in range(5):
        page.keyboard.press("PageDown")  # fewer classes
    _metric_changes(page, 0, items_before)
    grouped_mid = page.locator("[data-testid='stMetricValue']").nth(3).inner_text()
    slider("Group size S").focus()
    page.keyboard.press("ArrowRight")  # larger groups
    page.keyboard.press("ArrowRight")
    _metric_changes(page, 3, grouped_mid)
    assert page.locator("[data-testid='stMetricValue']").nth(3).inner_text() not in (grouped_before, grouped_mid)
    _no_exception(page)
    _shot(page, "class_count_after_sliders")
    with page.expect_download(timeout=STEP) as dl:
        page.get_by_role("button", name="PDF").first.click()
    pdf = Path(dl.value.path()).read_bytes()
    assert pdf.startswith(b"%PDF") and b"/Font" in pdf


def test_uploads_show_the_clis_map_and_a_bad_file_shows_its_message(page, tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((300, 8)).astype(np.float32)
    y = rng.integers(0, 6, 300)
    npz = tmp_path / "upload_me.npz"
    np.savez(npz, embeddings=X, labels=y)
    csv = tmp_path / "table_upload.csv"
    pd.DataFrame({"label": y, **{f"f{i}": X[:, i] for i in range(8)}}).to_csv(csv, index=False)
    second = tmp_path / "second.npz"
    np.savez(second, embeddings=X[:, :4] + 0.1 * rng.standard_normal((300, 4)).astype(np.float32), labels=y)

    _wait_text(page, "Summary (CSV)")
    _upload(page, npz)
    _wait_text(page, "Source: upload_me.npz")
    got = _summary_csv(page).set_index("method")["mAP"]
    assert got["upload_me"] == pytest.approx(_cli_map([str(npz)])["upload_me"], abs=1e-12)
    _shot(page, "overview_upload")

    _replace_uploads(page, csv)
    _wait_text(page, "Source: table_upload.csv")
    got = _summary_csv(page).set_index("method")["mAP"]
    assert got["table_upload"] == pytest.approx(_cli_map([str(csv)])["table_upload"], abs=1e-12)

    _replace_uploads(page, npz, second)
    _wait_text(page, "Source: upload_me.npz, second.npz")
    got = _summary_csv(page).set_index("method")["mAP"]
    ref = _cli_map([str(npz), str(second)])
    assert set(got.index) == {"upload_me", "second"}
    for m, v in ref.items():
        assert got[m] == pytest.approx(v, abs=1e-12)

    bad = tmp_path / "broken.npz"
    Xb = X.copy()
    Xb[5, 1] = np.nan
    np.savez(bad, embeddings=Xb, labels=y)
    _replace_uploads(page, bad)
    page.get_by_text("NaN or infinite values").first.wait_for(timeout=STEP)
    _shot(page, "overview_bad_upload")
    page.get_by_text("Demo: handwritten digits").click()  # the session keeps working
    _wait_text(page, "Source: digits.npz")
    _no_exception(page)


def test_two_sessions_uploading_at_once_each_see_their_own_numbers(server, browser, tmp_path):
    files, expected = [], []
    for i in range(2):
        rng = np.random.default_rng(100 + i)
        p = tmp_path / f"session{i}.npz"
        np.savez(p, embeddings=rng.standard_normal((400, 6 + i)).astype(np.float32),
                 labels=rng.integers(0, 5 + i, 400))
        files.append(p)
        expected.append(_cli_map([str(p)])[f"session{i}"])
    pages = []
    for _ in range(2):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
        pg = ctx.new_page()
        pg.goto(server)
        _wait_text(pg, "Summary (CSV)")
        pages.append(pg)
    for pg, f in zip(pages, files, strict=True):  # both uploads in flight before either is read
        _upload(pg, f)
    for i, pg in enumerate(pages):
        _wait_text(pg, f"Source: session{i}.npz")
        got = _summary_csv(pg).set_index("method")["mAP"]
        assert list(got.index) == [f"session{i}"]
        assert got.iloc[0] == pytest.approx(expected[i], abs=1e-12)
        pg.context.close()


def test_export_all_zip_contains_every_figure_and_table(page):
    _wait_text(page, "Summary (CSV)")
    page.get_by_role("button", name="Prepare the archive").click()
    page.get_by_role("button", name="Download all (ZIP)").wait_for(timeout=300_000)
    with page.expect_download(timeout=STEP) as dl:
        page.get_by_role("button", name="Download all (ZIP)").click()
    names = set(zipfile.ZipFile(io.BytesIO(Path(dl.value.path()).read_bytes())).namelist())
    for t in ("pr_band", "anova", "tukey_hsd", "games_howell", "two_way_anova", "mixed_model", "paired_tests",
              "grouped_recall", "histograms", "generalization", "summary"):
        assert f"tables/{t}.csv" in names and f"tables/{t}.tex" in names, t
    for f in ("pr_bands", "ap_by_class", "tukey_hsd", "paired_differences"):
        for fmt in ("pdf", "svg", "png"):
            assert f"figures/{f}.{fmt}" in names, (f, fmt)
    assert {"summary.json", "per_query.csv"} <= names
    # the digits demo's methods (lda9, pca16, pixels) encode no step: no training curve is drawn
    assert not [n for n in names if "checkpoint" in n]



@pytest.mark.dask
def test_local_dask_cluster_and_query_sample_in_the_browser(page):
    """The sidebar's compute setting: a local Dask cluster gives the same summary as this process;
    a query sample shows its intervals next to the core's numbers."""
    pytest.importorskip("distributed")
    from analysis_core import evaluate, load_files

    _wait_text(page, "Summary")
    exact = _summary_csv(page).set_index("method")["mAP"]
    page.get_by_text("Compute (large data)").click()
    page.get_by_text("local Dask cluster").click()
    _settle(page)
    box = page.get_by_role("spinbutton", name="Query sample (0 = every query)")
    box.fill("300")
    box.press("Enter")
    _wait_text(page, "Intervals from the query sample")
    _no_exception(page)
    shown = _summary_csv(page).set_index("method")["mAP"]
    ref = evaluate(load_files([ROOT / "demo_data" / "digits.npz"]), query_sample=300, seed=0).summary()
    assert set(shown.index) == set(exact.index) == set(ref["methods"])
    for m, v in ref["methods"].items():
        assert shown[m] == pytest.approx(v["map"]["expected"], abs=1e-12)
    assert page.get_by_text("Intervals from the query sample (300 of 1,797 queries, seed 0)").count() == 1
    _shot(page, "query_sample")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _npz_bytes(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def test_file_names_with_markdown_and_html_show_literally_and_request_nothing(page):
    """A file named like a Markdown image or an HTML tag: shown as written (backslashes too),
    and the browser requests nothing for it."""
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    name = "![x](http://127.0.0.1:9/x.png) a\\b <img src=http://127.0.0.1:9/y.png> **bold** $x$.npz"
    rng = np.random.default_rng(3)
    data = _npz_bytes(embeddings=rng.standard_normal((40, 4)).astype(np.float32), labels=np.repeat([0, 1], 20))
    _wait_text(page, "Summary (CSV)")
    page.get_by_text("Upload files").click()
    _data_input(page).set_input_files([{"name": name, "mimeType": "application/octet-stream", "buffer": data}])
    _wait_text(page, "Source: ")
    caption = page.get_by_text("Source: ").first.inner_text()
    assert caption.startswith(f"Source: {name} ·"), caption
    _no_exception(page)
    bad = (_npz_bytes(embeddings=np.zeros((6, 3), np.float32), labels=np.repeat([0, 1], 3)))
    _replace_uploads_payload(page, [{"name": "<b>z</b> [a](http://127.0.0.1:9/z) \\.npz",
                                     "mimeType": "application/octet-stream", "buffer": bad}])
    page.get_by_text("This input can't be used.").first.wait_for(timeout=STEP)
    _settle(page)
    alert = page.locator("[data-testid='stAlert']").first.inner_text()
    assert "<b>z</b> [a](http://127.0.0.1:9/z) \\.npz" in alert, alert
    _shot(page, "literal_file_names")
    links = page.locator("img[src*='127.0.0.1:9'], a[href*='127.0.0.1:9']")
    assert links.count() == 0, [links.nth(i).evaluate("e => e.outerHTML") for i in range(links.count())]
    assert not [u for u in requests if "127.0.0.1:9/" in u], requests


def _refusal_of(pg, name: str, timeout: float = STEP) -> str:
    """The text of the refusal of the uploaded file ``name``, once the page has run: a refusal
    names its file, so this is never the previous upload's message still on the page."""
    alert = pg.locator("[data-testid='stAlert']").filter(has_text="This input can't be used.").filter(has_text=name)
    try:
        alert.first.wait_for(timeout=timeout)
    except playwright.TimeoutError:
        shown = pg.locator("[data-testid='stAlert']").all_inner_texts()
        raise AssertionError(f"no refusal naming {name} within {timeout / 1000:.0f} s; alerts shown: {shown}") from None
    _settle(pg, timeout)
    return alert.first.inner_text()


def _replace_uploads_payload(pg, payloads: list[dict]) -> None:
    delete = pg.locator("[data-testid='stFileUploader'] button[aria-label^='Remove ']")
    while delete.count():
        delete.first.click()
        _settle(pg)
    _data_input(pg).set_input_files(payloads)


def test_refused_uploads_release_their_memory(page):
    """Three uploads of npz files each holding 2 GB of zeros (2 MB compressed), refused (all-zero
    vectors under cosine, or a size limit): the server's resident memory ends within 300 MB of
    where it started (one upload kept would be 2 GB)."""
    pid = SERVER_PID["pid"]
    buf = io.BytesIO()
    np.savez_compressed(buf, embeddings=np.zeros((500_000, 1000), np.float32), labels=np.arange(500_000) % 2)
    zeros = buf.getvalue()
    assert len(zeros) < 10 * 2**20
    _wait_text(page, "Summary (CSV)")
    page.get_by_text("Upload files").click()
    _settle(page)
    start = _rss_mb(pid)
    peak = start
    for i in range(3):
        _replace_uploads_payload(page, [{"name": f"zeros_{i}.npz", "mimeType": "application/octet-stream",
                                         "buffer": zeros}])
        _refusal_of(page, f"zeros_{i}.npz", 300_000)
        peak = max(peak, _rss_mb(pid))
        _no_exception(page)
    _replace_uploads_payload(page, [])
    _settle(page)
    time.sleep(2)
    end = _rss_mb(pid)
    print(f"server RSS: start {start:.0f} MB, end {end:.0f} MB, highest seen after a refusal {peak:.0f} MB")
    assert end - start < 300, (start, end, peak)


def test_split_selector_and_training_page_on_the_training_demo(page):
    """Training demo, split test_unseen chosen in the sidebar: the Overview counts the split's items
    (the command line's --split), and the Training page draws the checkpoints."""
    _wait_text(page, "Summary (CSV)")
    page.get_by_text("Demo: a training run", exact=False).first.click()
    _choose(page, "Split", "split: test_unseen")  # the box appears once the training demo is loaded
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stMetricValue\"]')]"
                           ".some(e => e.textContent.trim() === '533')", timeout=STEP)
    _no_exception(page)
    _shot(page, "overview_training_test_unseen")
    # the pages follow the split: each opens on the split's 533 items without an error
    for link, text in (("Statistics", "One-way tests"), ("Confidence", "Reject the least confident queries first"),
                       ("Class count & group size", "Sweep over the number of classes")):
        page.get_by_role("link", name=link).click()
        _wait_text(page, text)
        _no_exception(page)
        assert page.locator("[data-testid='stAlert']").filter(has_text="can't").count() == 0
        _shot(page, f"{link.split()[0].lower()}_training_test_unseen")
    page.wait_for_function("() => [...document.querySelectorAll('[data-testid=\"stMetricValue\"]')]"
                           ".some(e => e.textContent.trim() === '533')", timeout=STEP)
    page.get_by_role("link", name="Training").click()
    _wait_text(page, "Best against last checkpoint")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2",
                           timeout=STEP)
    page.wait_for_timeout(1500)  # let plotly finish drawing
    _no_exception(page)
    assert page.get_by_text("Checkpoints over training").count() >= 1
    _shot(page, "training_page")


def test_a_png_renamed_npz_and_a_huge_header_get_their_own_messages(page):
    """Refusals say what the file is: a PNG image; an archive whose header declares an array it
    does not hold (its declared shape named) — never 'object arrays', never a traceback."""
    import zipfile

    hdr = io.BytesIO()
    np.lib.format.write_array_header_1_0(hdr, {"descr": "<f4", "fortran_order": False, "shape": (10**7, 10**4)})
    labels = io.BytesIO()
    np.save(labels, np.arange(3))
    huge = io.BytesIO()
    with zipfile.ZipFile(huge, "w") as z:
        z.writestr("embeddings.npy", hdr.getvalue())
        z.writestr("labels.npy", labels.getvalue())
    _wait_text(page, "Summary (CSV)")
    page.get_by_text("Upload files").click()
    for name, data, expected in (("photo.npz", b"\x89PNG\r\n\x1a\n" + bytes(200), "PNG image"),
                                 ("huge.npz", huge.getvalue(), "(10000000, 10000)")):
        _replace_uploads_payload(page, [{"name": name, "mimeType": "application/octet-stream", "buffer": data}])
        alert = _refusal_of(page, name)
        assert expected in alert and "object array" not in alert, alert
        _no_exception(page)


def test_page_loads_request_nothing_but_this_server(server, browser):
    """The server is meant to work offline: loading the Overview and two other pages (each
    rendered, a figure drawn) requests nothing from any host but the one it runs on (no favicon,
    font or script from a CDN)."""
    from urllib.parse import urlsplit

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    requests: list[str] = []
    ctx.on("request", lambda r: requests.append(r.url))
    try:
        pg = ctx.new_page()
        pg.goto(server)
        _wait_text(pg, "Summary (CSV)")
        for link, text in (("PR bands", "Precision-recall bands"),
                           ("Similarity histograms", "Positive and negative pair similarities")):
            pg.get_by_role("link", name=link).click()
            _wait_text(pg, text)
            pg.locator(".js-plotly-plot .main-svg").first.wait_for(timeout=STEP)
            _no_exception(pg)
        pg.reload()  # a fresh load of a page other than the first: its favicon and fonts again
        _wait_text(pg, "Positive and negative pair similarities")
        pg.wait_for_timeout(1500)  # late requests (the favicon, fonts a stylesheet names)
        icons = pg.locator("link[rel~='icon']")
        hrefs = [icons.nth(i).get_attribute("href") or "" for i in range(icons.count())]
    finally:
        ctx.close()
    assert len(requests) > 10, requests  # the listener saw the page load
    outside = [u for u in requests if urlsplit(u).scheme not in ("data", "blob", "about")
               and urlsplit(u).hostname not in ("127.0.0.1", "localhost")]
    assert not outside, outside
    assert any(h.startswith("data:image/svg+xml") for h in hrefs), hrefs  # the app's own icon, inline


def test_an_npy_uploaded_with_its_labels_file_evaluates(page, tmp_path):
    """``d_100k.npy`` + ``d_100k_labels.npy`` uploaded together: one method, the command line's
    mAP, and the sidebar says which labels file was paired; two .npy files with one unnamed labels
    file are a message, not a guess."""
    rng = np.random.default_rng(30)
    y = rng.integers(0, 5, 200)
    X = (rng.standard_normal((5, 6))[y] + rng.standard_normal((200, 6))).astype(np.float32)
    np.save(tmp_path / "d_100k.npy", X)
    np.save(tmp_path / "d_100k_labels.npy", y)
    (tmp_path / "labels.txt").write_text("\n".join(map(str, y)) + "\n")
    _wait_text(page, "Summary (CSV)")
    _upload(page, tmp_path / "d_100k.npy", tmp_path / "d_100k_labels.npy")
    _wait_text(page, "Source: d_100k.npy ·")
    _no_exception(page)
    page.get_by_text("labels of d_100k.npy: d_100k_labels.npy (paired by name)").first.wait_for(timeout=STEP)
    got = _summary_csv(page).set_index("method")["mAP"]
    ref = _cli_map([str(tmp_path / "d_100k.npy"), "--labels", str(tmp_path / "labels.txt")])  # explicit labels
    assert list(got.index) == ["d_100k"] and got["d_100k"] == pytest.approx(ref["d_100k"], abs=1e-12)
    _shot(page, "upload_npy_with_labels")
    np.save(tmp_path / "other.npy", X[:, :3])
    np.save(tmp_path / "y.npy", y)
    _replace_uploads(page, tmp_path / "d_100k.npy", tmp_path / "other.npy", tmp_path / "y.npy")
    page.get_by_text("could be the labels of").first.wait_for(timeout=STEP)
    _settle(page)
    _no_exception(page)


def _figure_drawn(pg, title_start: str, timeout: float = 300_000) -> None:
    """Wait until a plotly figure whose title starts so has drawn its svg."""
    pg.wait_for_function("(t) => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                         "p.querySelector('.main-svg') && [...p.querySelectorAll('.gtitle')]"
                         ".some(g => g.textContent.startsWith(t)))", arg=title_start, timeout=timeout)
    pg.wait_for_timeout(1500)  # let plotly finish drawing


def _shot_from(pg, text: str, name: str) -> None:
    """A screenshot of the view with the element showing ``text`` at its top (the page scrolls
    inside its own container, so a full-page screenshot holds only the first screen)."""
    pg.get_by_text(text, exact=False).first.evaluate("e => e.scrollIntoView({block: 'start'})")
    pg.wait_for_timeout(800)
    _shot(pg, name)


def _choose(pg, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label``, done when the box shows it once the page
    has run. Retried: the list may close again if the page reruns as it opens, and a rerun that was
    under way when the option was clicked (a loading data set) may put the old value back."""
    box = pg.locator("[data-testid='stSelectbox']").filter(has_text=label)
    combo = box.locator("input[role='combobox']")
    combo.wait_for(timeout=STEP)
    for attempt in range(3):
        try:
            combo.click()
            pg.get_by_role("option", name=option).click(timeout=15_000)
            _settle(pg)
            expect(combo).to_have_value(option, timeout=15_000)
            return
        except (playwright.TimeoutError, AssertionError):
            if attempt == 2:
                raise
            _settle(pg)


def test_runs_demo_shows_the_design_the_runs_the_family_tests_and_the_seed_bands(server, browser):
    """The digits_runs demo (3 losses x 3 seeds x 4 epochs, three splits): the sidebar's design
    table, Overview's mean ± sd over runs with the run dots, Statistics' family tests (unit: run),
    Training's mean over runs with a band over runs; screenshots in tests/e2e/artifacts/runs_*."""
    ctx = browser.new_context(viewport={"width": 1400, "height": 1500})
    page = ctx.new_page()
    page.goto(server)
    _wait_text(page, "Summary (CSV)")
    page.get_by_text("Demo: 3 losses x 3 seeds", exact=False).first.click()
    _wait_text(page, "Runs — unit: run (3 families, 3 runs each)", 900_000)
    _figure_drawn(page, "Runs per family (all)")
    _no_exception(page)
    assert page.get_by_text("generalises to new trainings (runs) of each family").count() == 1
    _shot_from(page, "Runs — unit: run", "runs_overview")
    page.get_by_text("Design (family, run, step)").click()
    _settle(page)
    sidebar = page.locator("[data-testid='stSidebar']")
    assert sidebar.locator("[data-testid='stDataFrame']").count() == 1  # the design table, a canvas grid
    assert sidebar.get_by_text("3 runs (seed0, seed1, seed2), steps 0, 1, 3, 10").count() == 3
    sidebar.locator("[data-testid='stDataFrame']").evaluate("e => e.scrollIntoView({block: 'center'})")
    # the sidebar scrolls in its own container: bring the table to the middle of it
    sidebar.evaluate("s => { const c = [s, ...s.querySelectorAll('*')].find(e => e.scrollHeight > e.clientHeight "
                     "+ 4 && getComputedStyle(e).overflowY !== 'visible'); if (c) c.scrollTop = c.scrollHeight; }")
    page.wait_for_timeout(1200)
    _shot(page, "runs_design_table")
    page.locator("[data-testid='stExpander']").filter(has_text="Design (family, run, step)").locator(
        "summary").click()  # closed again
    page.get_by_role("link", name="Statistics").click()
    _wait_text(page, "Families (unit: run) — 3 families, 3 runs each")
    _wait_text(page, "One-way tests")
    assert page.get_by_text("for these trained models").count() >= 1
    assert page.get_by_text("Choose each run's checkpoint on").count() == 1
    _no_exception(page)
    _shot_from(page, "Families (unit: run)", "runs_statistics")
    _choose(page, "Choose each run's checkpoint on", "split: test_seen")
    _choose(page, "Report it on", "split: test_unseen")
    _wait_text(page, "The checkpoint chosen per run")
    assert page.get_by_text("each run at the checkpoint with the best mAP on split 'test_seen', reported on "
                            "'test_unseen'", exact=False).count() == 1
    _no_exception(page)
    _shot_from(page, "Families (unit: run)", "runs_statistics_selected")
    _choose(page, "Report it on", "split: test_seen")
    _wait_text(page, "selection on the reported split")
    _shot_from(page, "Families (unit: run)", "runs_statistics_same_split")
    page.get_by_role("link", name="Training").click()
    _wait_text(page, "Mean over runs — unit: run (3 families, 3 runs each)")
    for sp in ("all", "test_seen", "test_unseen", "train"):
        _figure_drawn(page, f"Metrics over training, mean over runs with a band over runs ({sp})")
    _wait_text(page, "Every run's curve")
    _no_exception(page)
    _shot_from(page, "Mean over runs — unit: run", "runs_training")
    ctx.close()
