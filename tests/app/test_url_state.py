"""The view in the URL (analysis_core_dashboard/url_state.py, kept.py, server_files.py): the link's texts map
back to the values they were made from, a link's bad values are left out with a note and never a
traceback, an upload kept for a reload counts in the server's upload budget and goes when it
expires or room is needed, and a data directory's files open by name only from inside it."""

from __future__ import annotations

import os
import re
import string
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streamlit.testing.v1 import AppTest

from analysis_core_dashboard import cache, kept, server_files, state, uploads, url_state

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "analysis_core_dashboard" / "app.py")

# --------------------------------------------------------------------------- the mapping


option_sets = st.lists(st.one_of(st.integers(-10**6, 10**6), st.text(min_size=1, max_size=12),
                                 st.sampled_from([0.001, 0.01, 0.05, 0.1])),
                       min_size=1, max_size=12, unique_by=str).filter(lambda o: all(str(x) for x in o))


@given(option_sets, st.data())
def test_a_pickers_value_comes_back_from_its_link_texts(options, data):
    multi = data.draw(st.booleans())
    if multi:
        value = data.draw(st.lists(st.sampled_from(options), unique_by=str, max_size=len(options)))
    else:
        value = data.draw(st.sampled_from(options))
    texts = url_state.to_link(value, multi)
    assert all(isinstance(t, str) for t in texts)
    back = url_state.from_link(texts, options, multi)
    assert back == value and [type(v) for v in (back if multi else [back])] == \
        [type(v) for v in (value if multi else [value])]


@given(option_sets, st.lists(st.text(max_size=30), max_size=8), st.booleans(), st.integers(1, 8))
def test_any_link_texts_give_options_or_nothing_and_never_raise(options, raw, multi, most):
    got = url_state.from_link(raw, options, multi, most)
    named = [o for o in options if str(o) in raw]
    if multi:
        assert got is None or (set(map(str, got)) <= set(map(str, named)) and len(got) <= most
                               and len(set(map(str, got))) == len(got))
        assert (got is None) == (not named and any(r != "" for r in raw))
    else:
        assert got is None if not named else str(got) in raw


def test_an_empty_multiselect_is_written_as_an_empty_value_and_read_back_as_nothing_chosen():
    assert url_state.to_link([], True) == [""]
    assert url_state.from_link([""], ["a", "b"], True) == []
    assert url_state.from_link(["nope"], ["a", "b"], True) is None  # a value not among the options: dropped
    assert url_state.from_link(["b", "a", "b"], ["a", "b"], True, 1) == ["b"]  # order kept, repeats and excess go


# --------------------------------------------------------------------------- kept uploads


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _store(budget: int, ttl: float = 100.0):
    clock = Clock()
    ledger = uploads.Ledger(budget)
    return kept.KeptUploads(ledger, ttl=ttl, clock=clock), ledger, clock


def test_a_kept_upload_comes_back_by_its_token_and_the_token_is_not_guessable():
    store, ledger, _ = _store(10_000)
    files = [("a.npz", b"x" * 100), ("b.npz", b"y" * 50)]
    tokens = {store.keep(files, f"d{i}") for i in range(50)}
    assert len(tokens) == 50 and None not in tokens
    # token_urlsafe(16): 16 random bytes = 128 bits, 22 URL-safe characters
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{22}", t) for t in tokens)
    token = next(iter(tokens))
    assert store.get(token).files == files
    assert store.get("A" * 22) is None and store.get("") is None
    assert ledger.held == 50 * 150  # every kept upload counted in the budget


def test_an_unused_upload_expires_and_gives_its_bytes_back():
    store, ledger, clock = _store(10_000, ttl=60)
    a = store.keep([("a.npz", b"1" * 300)], "a")
    clock.now = 50
    b = store.keep([("b.npz", b"2" * 200)], "b")
    clock.now = 59
    assert store.get(a) is not None  # used at 59: its hour starts again
    clock.now = 115  # b unused since 50 (> 60 s), a since 59 (56 s)
    assert store.get(b) is None and store.get(a) is not None
    assert ledger.held == 300
    clock.now = 1_000
    assert len(store) == 0 and ledger.held == 0


def test_an_upload_over_the_budget_is_not_kept_and_older_ones_make_room():
    store, ledger, clock = _store(1_000)
    first = store.keep([("a", b"a" * 400)], "a")
    clock.now = 1
    second = store.keep([("b", b"b" * 400)], "b")
    clock.now = 2
    store.get(first)  # first used last: second is the least recently used
    third = store.keep([("c", b"c" * 400)], "c")
    assert store.get(second) is None and store.get(first) is not None and store.get(third) is not None
    assert ledger.held == 800
    assert store.keep([("huge", b"h" * 1_001)], "h") is None  # larger than the whole budget
    assert ledger.held == 0 and len(store) == 0  # it dropped the others trying: they are forgotten, not leaked


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["keep", "get", "forget", "tick", "evict"]), st.integers(0, 600)),
                max_size=40))
def test_the_budget_counts_exactly_what_is_kept_whatever_the_sequence(ops):
    """A reference model (an ordered dict of sizes and last uses) against the store: the same
    uploads alive, the ledger holding exactly their bytes, never more than the budget."""
    budget, ttl = 1_000, 100
    store, ledger, clock = _store(budget, ttl)
    model: OrderedDict[str, list] = OrderedDict()  # token -> [size, last use]

    def expire() -> None:
        for t in [t for t, (_, used) in model.items() if used < clock.now - ttl]:
            del model[t]

    for op, n in ops:
        if op == "tick":
            clock.now += n / 3
        elif op == "keep":
            expire()
            while sum(s for s, _ in model.values()) + n > budget and model:
                model.popitem(last=False)
            token = store.keep([("f", b"z" * n)], "d")
            if sum(s for s, _ in model.values()) + n <= budget:
                assert token is not None
                model[token] = [n, clock.now]
            else:
                assert token is None
        elif op in ("get", "forget") and model:
            expire()
            token = list(model)[n % len(model)] if model else None
            if token is None:
                continue
            if op == "get":
                assert store.get(token) is not None
                model[token][1] = clock.now
                model.move_to_end(token)
            else:
                store.forget(token)
                del model[token]
        elif op == "evict":
            assert store.drop_oldest() == bool(model)
            if model:
                model.popitem(last=False)
        expire()
        assert len(store) == len(model)
        assert ledger.held == sum(s for s, _ in model.values()) <= budget


def test_the_upload_budget_makes_room_by_dropping_kept_uploads_after_stored_datasets(monkeypatch):
    monkeypatch.setattr(kept, "KEPT", kept.KeptUploads(uploads.Ledger(10**9)))  # nothing else kept
    token = kept.KEPT.keep([("a.npz", b"a" * 10)], "a")
    monkeypatch.setattr(cache.STORE, "drop_oldest_data", lambda: False)  # no stored dataset left to drop
    assert uploads.LEDGER.evict() is True and kept.KEPT.get(token) is None
    assert uploads.LEDGER.evict() is False


# --------------------------------------------------------------------------- the data directory


def _npz(path: Path, n: int = 30, classes: int = 3) -> Path:
    rng = np.random.default_rng(1)
    np.savez(path, embeddings=rng.standard_normal((n, 4)).astype(np.float32), labels=np.arange(n) % classes)
    return path


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> Path:
    """A data directory: two loadable files (one in a subdirectory), a file of another type, a
    hidden one, a symbolic link to a file outside it; beside it, that outside file."""
    top = tmp_path_factory.mktemp("served")
    base = top / "data"
    (base / "sub").mkdir(parents=True)
    _npz(base / "a.npz")
    _npz(base / "sub" / "b.npz")
    (base / "notes.md").write_text("not data")
    (base / ".hidden.npz").write_bytes(b"")
    os.symlink(_npz(top / "secret.npz"), base / "link.npz")
    return base.resolve()


@pytest.fixture()
def data_dir(directory, monkeypatch) -> Path:
    monkeypatch.setenv(server_files.ENV, str(directory))
    return directory


def test_the_data_directory_lists_its_loadable_files_only(data_dir):
    assert server_files.listing(data_dir) == ["a.npz", "sub/b.npz"]


names = st.one_of(st.text(alphabet=string.printable + "é\0", max_size=40),
                  st.lists(st.sampled_from(["a.npz", "sub", "b.npz", "..", ".", "", "link.npz", "secret.npz",
                                            "data", ".hidden.npz"]), min_size=1, max_size=5).map("/".join))


@settings(max_examples=400, deadline=None)
@given(names)
def test_a_name_is_valid_only_when_the_listing_holds_it(directory, name):
    """The listing (os.walk of the directory) is the oracle: a link opens those files only."""
    assert server_files.valid(directory, name) == (name in {"a.npz", "sub/b.npz"})


def test_traversal_absolute_and_outside_names_are_refused(data_dir):
    for name in ["../secret.npz", "/etc/passwd", "sub/../../secret.npz", "link.npz", "sub/../a.npz", "./a.npz",
                 "a.npz\0", "sub\\b.npz", ".hidden.npz", "notes.md", "missing.npz", ""]:
        assert not server_files.valid(data_dir, name), name
    assert server_files.valid(data_dir, "sub/b.npz")


# --------------------------------------------------------------------------- the app


def _open(params: dict, page: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params.update(params)
    if page:
        at.switch_page(page)
    return at.run()


def _texts(at) -> str:
    return "\n".join([c.value for c in at.caption] + [w.value for w in at.warning])


def _link_query(at) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    link = at.sidebar.code[-1].value
    return parse_qs(link.split("?", 1)[1], keep_blank_values=True)


def test_a_link_of_settings_and_a_split_opens_that_view_and_its_own_link_is_the_same():
    params = {"similarity": "dot", "ks": ["1", "16"], "alpha": "0.01", "unit": "query", "split": "test"}
    at = _open(params)
    assert not at.exception
    ss = at.session_state
    assert (ss[state.SIMILARITY], ss[state.KS], ss[state.ALPHA], ss[state.UNIT], ss[state.SPLIT]) == \
        ("dot", [1, 16], 0.01, "query", "test")
    assert "From the link" not in _texts(at)
    query = _link_query(at)
    assert query == {k: v if isinstance(v, list) else [v] for k, v in params.items()}
    again = _open(query)  # the link opened in a new session
    assert (again.session_state[state.KS], again.session_state[state.SPLIT]) == ([1, 16], "test")
    assert _link_query(again) == query


def test_a_links_bad_values_are_left_out_with_one_note_and_no_traceback():
    at = _open({"ks": ["3", "8"], "alpha": "abc", "bogus": "<b>x</b>", "split": "nope", "similarity": "cosine;drop",
                "stats_methods": "pixels"})
    assert not at.exception and not at.error
    ss = at.session_state
    assert (ss[state.KS], ss[state.ALPHA], ss[state.SIMILARITY], ss[state.SPLIT]) == ([8], 0.05, "cosine", "")
    text = _texts(at)
    for dropped in ("` 3 `", "` abc `", "` bogus ` (not a setting)", "split=` nope `", "` cosine;drop `",
                    "` stats_methods ` (not on this page)"):
        assert dropped in text, (dropped, text)
    query = _link_query(at)
    assert query.get("ks") == ["8"] and not {"bogus", "alpha", "split", "stats_methods"} & set(query)


def test_a_pages_pickers_come_from_the_link_and_leave_with_the_page():
    at = _open({"bands_classes": ["3", "x", "5"], "bands_methods": "pca16", "np": "21"}, "views/pr_bands.py")
    assert not at.exception
    ss = at.session_state
    assert (ss["bands_classes"], ss["bands_methods"], ss["np"]) == (["3", "5"], ["pca16"], 21)
    assert "` x `" in _texts(at)
    assert _link_query(at) == {"bands_classes": ["3", "5"], "bands_methods": ["pca16"], "np": ["21"]}
    at.switch_page("views/overview.py").run()
    assert not {"bands_classes", "bands_methods"} & set(_link_query(at))
    assert "From the link" not in _texts(at)  # the note stays with the page the link opened


def test_a_kept_upload_is_restored_and_an_unknown_token_falls_back_to_the_demo(tmp_path):
    files = [("restored_one.npz", _npz(tmp_path / "r.npz").read_bytes())]
    token = kept.KEPT.keep(files, cache.files_digest(files))
    try:
        at = _open({"upload": token})
        assert not at.exception
        assert at.session_state[state.SOURCE] == "upload"
        assert at.session_state[state.DATASET][0] == cache.files_digest(files)
        assert "Restored from this server's memory: ` restored_one.npz `" in _texts(at)
        assert _link_query(at) == {"upload": [token]}
    finally:
        kept.KEPT.forget(token)
    gone = _open({"upload": token})  # forgotten (or from another server): the demo, saying so
    assert not gone.exception
    assert gone.session_state[state.SOURCE] == url_state.default_source()
    assert gone.session_state[state.DATASET] is not None
    assert "no longer kept" in _texts(gone) and "upload" not in _link_query(gone)


def test_files_of_the_data_directory_open_by_name_and_nothing_else(data_dir):
    at = _open({"files": "a.npz,sub/b.npz,../secret.npz"})
    assert not at.exception
    assert at.session_state[state.SOURCE] == url_state.SERVER
    assert at.session_state[state.SERVER_FILES] == ["a.npz", "sub/b.npz"]
    assert at.session_state[state.DATASET] is not None and len(at.session_state[state.DATASET][1].methods) == 2
    assert "left out: ` ../secret.npz `" in _texts(at)
    assert _link_query(at) == {"files": ["a.npz,sub/b.npz"]}


def test_a_server_started_with_files_opens_on_them_unless_the_link_names_other_data(data_dir, monkeypatch):
    """``analysis-core dashboard a.npz sub/b.npz`` (analysis_core.serve) sets the data directory and
    the files a session opens on."""
    monkeypatch.setenv(server_files.OPEN_ENV, "a.npz,sub/b.npz")
    at = _open({})
    assert not at.exception
    assert at.session_state[state.SOURCE] == url_state.SERVER
    assert at.session_state[state.SERVER_FILES] == ["a.npz", "sub/b.npz"]
    assert len(at.session_state[state.DATASET][1].methods) == 2
    demo = _open({"data": "training"})  # a link's data wins
    assert demo.session_state[state.SOURCE] == "training"


def test_a_files_link_on_a_server_without_a_data_directory_says_so(monkeypatch):
    monkeypatch.delenv(server_files.ENV, raising=False)
    at = _open({"files": "a.npz"})
    assert not at.exception
    assert at.session_state[state.SOURCE] == url_state.default_source()
    assert server_files.ENV in _texts(at) and "Files on this server" not in str(at.sidebar.radio[0].options)


def test_files_over_the_upload_budget_are_refused_before_they_are_read(data_dir, monkeypatch):
    monkeypatch.setattr(uploads.LEDGER, "budget", 100)
    with pytest.raises(Exception) as err:
        server_files.read(data_dir, ["a.npz"])
    assert "upload budget" in str(err.value) and type(err.value).__name__ == "InputError"

