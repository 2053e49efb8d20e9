"""The view in the URL in a real browser: a reload keeps the page, the split, the sidebar's settings,
a page's picker and an upload; the sidebar's link opens the same view in a fresh browser (the
server, browser and helpers of test_browser.py)."""

from __future__ import annotations

import numpy as np
import pytest

from .test_browser import (  # noqa: F401
    STEP,
    _choose,
    _data_input,
    _no_exception,
    _settle,
    _shot,
    _wait_text,
    browser,
    playwright,
    server,
)

pytestmark = [pytest.mark.e2e, pytest.mark.browser]


def _tags(pg, label: str) -> list[str]:
    """The chosen options of the multiselect labelled ``label``."""
    box = pg.locator("[data-testid='stMultiSelect']").filter(has_text=label).first
    return [t.strip() for t in box.locator(".react-aria-ComboBox [data-tag] span[title]").all_inner_texts()]


def _add(pg, label: str, option: str) -> None:
    """Add ``option`` to the multiselect labelled ``label``: done when the box shows it among its
    chosen options once the page has run. Retried: a rerun under way during the click (a loaded
    machine) may redraw the list or put the old choice back."""
    box = pg.locator("[data-testid='stMultiSelect']").filter(has_text=label).first
    for attempt in range(3):
        if option not in _tags(pg, label):
            try:
                box.locator("input").first.click()
                pg.get_by_role("option", name=option, exact=True).click(timeout=30_000)
            except playwright.TimeoutError:
                if attempt == 2:
                    raise
            pg.keyboard.press("Escape")
        _settle(pg)
        if option in _tags(pg, label):
            return
    raise AssertionError(f"{option!r} is not among the chosen options of {label!r}: {_tags(pg, label)}")


def _view(pg) -> dict:
    """What the page shows of the view: the page title, the split, α, the cutoffs, the PR bands'
    classes."""
    split = pg.get_by_role("combobox", name="Split").input_value()
    alpha = pg.locator("[data-testid='stSlider']").filter(has_text="Significance level").first
    return {"title": pg.locator("h1").first.inner_text(), "split": split,
            "alpha": alpha.get_by_role("slider").get_attribute("aria-valuetext"),
            "ks": _tags(pg, "Cutoffs K"), "classes": _tags(pg, "Classes")}


def _link(pg) -> str:
    pg.get_by_text("Link to this view").click()
    code = pg.locator("[data-testid='stSidebar'] [data-testid='stCode'] code").first
    code.wait_for()
    return code.inner_text().strip()


def test_a_reload_and_the_copied_link_keep_the_view_and_an_upload(server, browser, tmp_path):  # noqa: F811
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = ctx.new_page()
    pg.goto(server)
    _wait_text(pg, "Summary (CSV)")
    pg.get_by_role("link", name="PR bands").click()
    _wait_text(pg, "Precision-recall bands")
    _choose(pg, "Split", "split: test")
    _add(pg, "Cutoffs K", "16")
    _add(pg, "Classes", "3")
    pg.locator("[data-testid='stSlider']").filter(has_text="Significance level").get_by_role("slider").press(
        "ArrowRight")
    _settle(pg)
    _wait_text(pg, "Precision-recall bands")
    before = _view(pg)
    assert before == {"title": "Precision-recall bands", "split": "split: test", "alpha": "0.1",
                      "ks": ["1", "2", "4", "8", "16"], "classes": ["3"]}, before
    url = pg.url
    for part in ("pr_bands", "split=test", "ks=16", "alpha=0.1", "bands_classes=3"):
        assert part in url, url

    pg.reload()
    _wait_text(pg, "Precision-recall bands")
    assert pg.url == url
    assert _view(pg) == before
    link = _link(pg)
    assert link.startswith(server) and "split=test" in link and "bands_classes=3" in link, link
    _no_exception(pg)
    _shot(pg, "url_state_reloaded")

    other = browser.new_context(viewport={"width": 1400, "height": 1000})  # a colleague opening the link
    pg2 = other.new_page()
    pg2.goto(link)
    _wait_text(pg2, "Precision-recall bands")
    assert _view(pg2) == before
    _no_exception(pg2)
    other.close()

    # an upload: after a reload the same files are shown, restored from the server's memory
    rng = np.random.default_rng(0)
    path = tmp_path / "tiny_upload.npz"
    np.savez(path, embeddings=rng.standard_normal((40, 4)).astype(np.float32), labels=np.repeat(np.arange(4), 10))
    pg.get_by_text("Upload files").click()
    _data_input(pg).set_input_files([str(path)])
    _wait_text(pg, "Precision-recall bands")
    pg.wait_for_function("() => location.search.includes('upload=')", timeout=STEP)
    uploaded = pg.url
    pg.reload()
    _wait_text(pg, "Restored from this server's memory")
    assert pg.url == uploaded and "pr_bands" in uploaded
    assert pg.get_by_text("tiny_upload.npz").count() >= 1
    _wait_text(pg, "Precision-recall bands")
    _no_exception(pg)
    _shot(pg, "url_state_upload_restored")
    ctx.close()
