"""Fixtures shared by the AppTest files."""

from __future__ import annotations

import time

import pytest
from streamlit.runtime.media_file_manager import MediaFileManager

from analysis_core_dashboard import cache, state


def settle(at, timeout: float = 600.0):
    """What a user sees once the page's background work has finished: wait for what the page
    started without waiting (the Class count sweep, :meth:`analysis_core_dashboard.jobs.Store.start`), then
    rerun it as its polling fragment does. Unchanged (no rerun) when nothing was started or shown
    as running."""
    pending = any(c.value == "The controls above stay usable meanwhile." for c in at.main.caption)
    if not pending and not cache.STORE.background_running():
        return at
    deadline = time.monotonic() + timeout
    while cache.STORE.background_running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not cache.STORE.background_running(), f"the page's background work ran over {timeout} s"
    return at.run()


def spy_downloads(mp: pytest.MonkeyPatch) -> tuple[dict, dict]:
    """(files, deferred): every download the pages register from now on, by file name — its bytes,
    or for one built on click the function that builds it."""
    files, deferred = {}, {}
    add, add_deferred = MediaFileManager.add, MediaFileManager.add_deferred

    def spy_add(self, data, mimetype, coordinates, file_name=None, is_for_static_download=False):
        if file_name:
            files[file_name] = data
        return add(self, data, mimetype, coordinates, file_name, is_for_static_download)

    def spy_deferred(self, fn, mimetype, coordinates, file_name=None, **kw):
        if file_name:
            deferred[file_name] = fn
        return add_deferred(self, fn, mimetype, coordinates, file_name, **kw)

    mp.setattr(MediaFileManager, "add", spy_add)
    mp.setattr(MediaFileManager, "add_deferred", spy_deferred)
    return files, deferred


@pytest.fixture()
def offered_files(monkeypatch):
    """A function that offers a set of files as an extra sidebar data source, name -> [(file
    name, bytes)]: AppTest cannot drive the file uploader, and the sidebar reads both through the
    same loader (``cache.dataset`` -> ``load_bytes``) as an upload of those files."""
    sets: dict[str, list[tuple[str, bytes]]] = {}
    demo = cache.demo_files
    monkeypatch.setattr(state, "DEMO_SETS", dict(state.DEMO_SETS))
    monkeypatch.setattr(cache, "demo_files", lambda name: sets[name] if name in sets else demo(name))

    def offer(name: str, files: list[tuple[str, bytes]]) -> None:
        sets[name] = files
        state.DEMO_SETS[name] = name

    return offer
