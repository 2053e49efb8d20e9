"""The Embedding map page in a real browser: the WebGL map draws, a box selection and a class
pick fill the per-query table (the server, browser and helpers of test_browser.py)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from .test_browser import ART, ROOT, STEP, _no_exception, _settle, _shot, _wait_text, browser, page, server  # noqa: F401

pytestmark = pytest.mark.e2e

PLOT = ".js-plotly-plot"


def _map_drawn(pg, timeout: float = STEP) -> None:
    """Wait until plotly has drawn the WebGL points (a gl canvas with a non-zero size)."""
    pg.wait_for_function(f"() => [...document.querySelectorAll('{PLOT} canvas')]"
                         ".some(c => c.width > 0 && c.height > 0)", timeout=timeout)
    pg.wait_for_timeout(500)


def _lit_pixels(pg) -> int:
    """Non-white pixels of the plot area in a screenshot: points were painted."""
    import io

    from PIL import Image

    png = pg.locator(f"{PLOT} .nsewdrag").first.screenshot()
    px = np.asarray(Image.open(io.BytesIO(png)).convert("L"))
    return int((px < 200).sum())


def _lit_pixels_once_painted(pg, at_least: int, timeout: float = 60.0) -> int:
    """:func:`_lit_pixels` once it exceeds ``at_least``, or after ``timeout`` seconds (WebGL paints
    after the canvas has its size; a loaded machine paints late)."""
    deadline = time.monotonic() + timeout
    while (lit := _lit_pixels(pg)) <= at_least and time.monotonic() < deadline:
        pg.wait_for_timeout(250)
    return lit


def _shot_at(pg, text: str, name: str) -> None:
    """A screenshot scrolled to ``text`` (the page scrolls inside Streamlit's main block, which a
    full-page screenshot does not unroll)."""
    pg.get_by_text(text).first.scroll_into_view_if_needed()
    pg.wait_for_timeout(1200)  # let canvas grids paint
    pg.screenshot(path=str(ART / f"{name}.png"))


def test_the_map_draws_and_a_box_selection_or_a_class_fills_the_table(page):  # noqa: F811
    _wait_text(page, "Summary (CSV)")
    t0 = time.perf_counter()
    page.get_by_role("link", name="Embedding map").click()
    _settle(page)
    _map_drawn(page)
    drawn_s = time.perf_counter() - t0
    _no_exception(page)
    assert _lit_pixels_once_painted(page, 2_000) > 2_000  # 1 797 points of 5-6 px
    _shot(page, "embedding_map_class")
    print(f"digits map drawn in {drawn_s:.2f} s after the click")

    # a box over the middle of the plot area
    page.locator(f"{PLOT} .modebar-btn[data-title='Box Select']").first.click()
    box = page.locator(f"{PLOT} .nsewdrag").first.bounding_box()
    x0, y0 = box["x"] + 0.35 * box["width"], box["y"] + 0.35 * box["height"]
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 + 0.15 * box["width"], y0 + 0.15 * box["height"], steps=8)
    page.mouse.move(x0 + 0.3 * box["width"], y0 + 0.3 * box["height"], steps=8)
    page.mouse.up()
    _wait_text(page, "Per-query metrics of the ")
    _no_exception(page)
    heading = page.get_by_text("Per-query metrics of the ").first.inner_text()
    n = int(heading.split("the ")[1].split(" selected")[0].replace(",", ""))
    # the points plotly drew inside the box the browser recorded (data coordinates): the table's
    inside = page.evaluate(f"""() => {{
        const gd = document.querySelector('{PLOT}');
        const s = gd.layout.selections[0];
        const [x0, x1] = [Math.min(s.x0, s.x1), Math.max(s.x0, s.x1)];
        const [y0, y1] = [Math.min(s.y0, s.y1), Math.max(s.y0, s.y1)];
        let n = 0;
        for (const t of gd._fullData) for (let i = 0; i < t._length; i++) {{
            const x = t.x[i], y = t.y[i];
            if (x >= x0 && x <= x1 && y >= y0 && y <= y1) n++;
        }}
        return n;
    }}""")
    assert n == inside > 0
    assert page.get_by_text(f"{n:,} items, ").count() >= 1
    page.get_by_text("Nearest neighbours").first.wait_for()
    _shot(page, "embedding_map_box_selection")
    _shot_at(page, "Per-query metrics of the ", "embedding_map_box_selection_table")

    page.get_by_text("per-query AP").first.click()
    _settle(page)
    _map_drawn(page)
    _no_exception(page)
    _shot(page, "embedding_map_ap")

    page.locator("[data-testid='stSelectbox']").filter(has_text="Class").first.click()
    page.get_by_role("option", name="7", exact=True).click()
    _wait_text(page, "Per-query metrics of class")
    _no_exception(page)
    n7 = int((np.load(ROOT / "demo_data" / "digits.npz")["labels"] == 7).sum())
    assert page.get_by_text(f"{n7} items, {n7} of them scored queries").count() == 1
    _shot(page, "embedding_map_class_7")
    _shot_at(page, "Nearest neighbours", "embedding_map_class_7_table")
