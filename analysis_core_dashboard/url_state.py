"""The view in the URL: a reload keeps it, and a link opens it.

* **Page.** Each page has its own path (``st.navigation``).
* **Settings and pickers.** The sidebar's similarity, precision, cutoffs ``ks``, ``alpha`` and
  ``unit``, and the page pickers of :data:`analysis_core_dashboard.state.PAGE_PICKERS`, are in the URL under
  their widget's key; a value equal to the widget's default is left out, and a page's pickers
  leave the URL with the page. Most are Streamlit widgets bound to the URL
  (``bind="query-params"``); a picker inside a fragment is written by :func:`picker` instead,
  because Streamlit 1.67's binding stops writing a fragment's widget to the URL once the page
  around it has rerun (seen in Chromium).
* **Data and split** are set here, by name: ``data=<demo set>`` (left out for the first demo set),
  ``upload=<token>`` (an upload kept in this server's memory, :mod:`analysis_core_dashboard.kept`),
  ``files=a.npz,b.npz`` (files of the server's data directory, :mod:`analysis_core_dashboard.server_files`) and
  ``split=<name>``.

A session opened from a URL takes these values before any widget is made (:func:`restore`); the
values it cannot use — an unknown parameter, a value that is not among the widget's options, a
parameter of another page, an upload no longer kept, a file the server does not have — are left
out, and the page says which (:func:`finish`), never with a traceback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from urllib.parse import urlencode

import streamlit as st

from analysis_core_dashboard import components, kept, server_files, state

DATA, UPLOAD, FILES, SPLIT = "data", "upload", "files", "split"
MANUAL = (DATA, UPLOAD, FILES, SPLIT)  # set by this module, not by a bound widget
SIDEBAR_BOUND = (state.SIMILARITY, state.PRECISION, state.KS, state.ALPHA, state.UNIT)
PICKERS = frozenset(SIDEBAR_BOUND).union(*state.PAGE_PICKERS.values())  # every setting in the URL
STREAMLIT_OWN = ("embed", "embed_options")  # parameters Streamlit itself reads
SERVER = "server"  # the data source "files of the server's data directory"
SHOWN_NAMES = 5  # names listed in a note at most

Files = list[tuple[str, bytes]]


def default_source() -> str:
    return next(iter(state.DEMO_SETS))


def sources() -> dict[str, str]:
    """The sidebar's data sources (value -> label): the demo sets, uploads and, when the server
    has a data directory, its files."""
    extra = {SERVER: "Files on this server"} if server_files.root() is not None else {}
    return {**state.DEMO_SETS, "upload": "Upload files", **extra}


def _names(values: list[str]) -> str:
    shown = ", ".join(components.literal(v) for v in values[:SHOWN_NAMES])
    return shown + (f" and {len(values) - SHOWN_NAMES} more" if len(values) > SHOWN_NAMES else "")


def _note(text: str, warn: bool = False) -> None:
    """Say what the link asked for that this session cannot show: a warning when the data shown
    are not the link's, else a caption."""
    st.session_state.setdefault(state.URL_NOTES, []).append((warn, text))


def restore() -> None:
    """On a session's first run, before the sidebar's widgets: the data source and split the URL
    names (bound widgets seed themselves from the URL)."""
    ss = st.session_state
    if state.URL_START in ss:
        return
    start = {k: st.query_params.get_all(k) for k in st.query_params}
    ss[state.URL_START] = start
    ss[state.URL_NOTES] = []
    fallback = f"showing the demo data ({state.DEMO_SETS[default_source()]}) instead"
    if UPLOAD in start:
        token = start[UPLOAD][-1]
        held = kept.KEPT.get(token) if token else None
        if held is not None:
            ss[state.SOURCE] = "upload"
            ss[state.KEPT_UPLOAD] = (token, False, held.digest)
        else:
            _note(f"The uploaded files of this link are no longer kept: an upload is kept in the memory of the "
                  f"server it was uploaded to, for {kept.minutes()} after its last use. {fallback[0].upper()}"
                  f"{fallback[1:]}; upload the files again to see them.", warn=True)
    elif FILES in start:
        _restore_files(start[FILES], fallback)
    elif DATA in start:
        value = start[DATA][-1]
        if value in sources() and value != SERVER:
            ss[state.SOURCE] = value
        else:
            _note(f"From the link, not used: data={components.literal(value)} (no such data set here).")
    elif server_files.opened():  # the files the server was started with (analysis-core dashboard FILE...)
        _restore_files(server_files.opened(), fallback)
    if SPLIT in start:
        ss[state.URL_SPLIT] = start[SPLIT][-1]


def _restore_files(values: list[str], fallback: str) -> None:
    base = server_files.root()
    if base is None:
        _note(f"This link opens files of the server's data directory, but this server has none "
              f"({server_files.ENV} is not set): {fallback}.", warn=True)
        return
    names = [n for v in values for n in ([v] if server_files.valid(base, v) else v.split(","))]
    good = list(dict.fromkeys(n for n in names if server_files.valid(base, n)))
    bad = [n for n in names if not server_files.valid(base, n)]
    if bad:
        _note(f"Not files of this server's data directory, left out: {_names(bad)}"
              + ("." if good else f"; {fallback}."), warn=not good)
    if good:
        st.session_state[state.SOURCE] = SERVER
        st.session_state[state.SERVER_FILES] = good


def seed_split(splits: list[str]) -> None:
    """The link's split, once the dataset's splits are known (before the split selector)."""
    wanted = st.session_state.pop(state.URL_SPLIT, None)
    if wanted is None:
        return
    if wanted in splits:
        st.session_state[state.SPLIT] = wanted
    elif wanted:
        _note(f"From the link, not used: split={components.literal(wanted)} (no such split in this data).")


# --------------------------------------------------------------------------- data sources


def server_source() -> tuple[str | None, Callable[[], Files]]:
    """The sidebar's picker of the data directory's files: (digest, read) of the files picked, or
    (None, …) when none is."""
    base = server_files.root()
    if base is None:
        return None, list
    names = server_files.listing(base)
    picked = st.session_state.get(state.SERVER_FILES)
    if picked is not None and any(n not in names for n in picked):  # a file removed since it was picked
        st.session_state[state.SERVER_FILES] = [n for n in picked if n in names]
    picked = st.multiselect("Files on this server (several files = several methods)", names, key=state.SERVER_FILES,
                            help=f"The files of the directory {server_files.ENV} names; a link to this view opens "
                                 "them by name on this server.")
    if not picked:
        return None, list
    return server_files.digest(base, picked), lambda: server_files.read(base, picked)


def restored_upload() -> tuple[str | None, Callable[[], Files]]:
    """With an empty uploader: the upload this session was opened with (a reload, a link), kept in
    the server's memory, as (digest, read); (None, …) when there is none — and when the files came
    from this session's uploader and were removed from it, they are forgotten."""
    ss = st.session_state
    held = ss.get(state.KEPT_UPLOAD)
    if held is None:
        return None, list
    token, from_uploader, _ = held
    entry = None if from_uploader else kept.KEPT.get(token)
    if entry is None:
        if from_uploader:
            kept.KEPT.forget(token)
        else:
            st.warning(f"The restored files are no longer kept in this server's memory (kept {kept.minutes()} "
                       "after their last use, or dropped to make room): upload them again.")
        del ss[state.KEPT_UPLOAD]
        return None, list
    st.caption(f"Restored from this server's memory: {_names([n for n, _ in entry.files])}. Kept for "
               f"{kept.minutes()} after their last use, never written to disk; upload files to replace them.")
    if st.button("Forget these files", key="forget-kept-upload"):
        kept.KEPT.forget(token)
        del ss[state.KEPT_UPLOAD]
        return None, list
    return entry.digest, lambda: entry.files


def keep_upload(ups: list, digest: str) -> None:
    """After an upload has loaded: keep its files in the server's memory for a reload (once per
    upload; the session's previous upload is forgotten)."""
    ss = st.session_state
    held = ss.get(state.KEPT_UPLOAD)
    if held is not None and held[2] == digest:
        if kept.KEPT.get(held[0]) is not None:  # used now: its hour starts again
            return
    elif held is not None:
        kept.KEPT.forget(held[0])
    token = kept.KEPT.keep([(u.name, u.getvalue()) for u in ups], digest)
    ss[state.KEPT_UPLOAD] = (token, True, digest) if token else (None, True, digest)


# --------------------------------------------------------------------------- pickers in fragments


def from_link(raw: list[str], options, multi: bool, max_selections: int | None = None):
    """The value a link's ``raw`` texts of a picker over ``options`` stand for: the options whose
    text (``str``) they are, in their order, without repeats, at most ``max_selections`` — a
    list (``multi``; ``[""]`` = nothing chosen) or the last of them; None when they name none."""
    by_text = {str(o): o for o in options}
    texts = [v for v in raw if v != ""]
    chosen = list(dict.fromkeys(by_text[v] for v in texts if v in by_text))[:max_selections or None]
    if multi:
        return chosen if chosen or not texts else None
    return chosen[-1] if chosen else None


def to_link(value, multi: bool) -> list[str]:
    """The texts of a picker's ``value`` in a link (:func:`from_link`'s inverse)."""
    return (_strings(value) or [""]) if multi else [str(value)]


def picker(widget: Callable, label: str, options, *, key: str, default, **kwargs):
    """``widget`` (``st.multiselect``: ``default`` a list; ``st.selectbox``: ``default`` an
    option) with its value in the URL under ``key``: taken from the link on the session's first
    run when it is among ``options`` (by its text), written back when it changes, left out when
    it is ``default``. For pickers inside a fragment (see the module's docstring)."""
    ss = st.session_state
    multi = widget is st.multiselect
    start = ss.get(state.URL_START, {})
    if key in start and state.URL_CHECKED not in ss:  # the link's value, before the widget exists
        value = from_link(start[key], options, multi, kwargs.get("max_selections"))
        if value is not None:
            ss[key] = value
    # the value always comes from the session state (a widget given a default as well would warn),
    # kept among the options when they change (another data set, another split)
    texts = {str(o) for o in options}
    if multi:
        among = [v for v in ss.get(key, default) if str(v) in texts]
        if key not in ss or among != list(ss[key]):
            ss[key] = among
    elif key not in ss or str(ss[key]) not in texts:
        ss[key] = default
    value = widget(label, options, key=key, **kwargs)
    now = to_link(value, multi)
    if now == to_link(default, multi):
        if key in st.query_params:
            del st.query_params[key]
    elif st.query_params.get_all(key) != now:
        st.query_params[key] = now
    return value


def leave_other_pages(path: str) -> None:
    """Before the page ``path`` runs: the pickers of other pages that :func:`picker` wrote leave
    the URL (Streamlit's own binding does this for bound widgets)."""
    mine = set(state.PAGE_PICKERS.get(path, ()))
    for key in state.FRAGMENT_PICKERS:
        if key not in mine and key in st.query_params:
            del st.query_params[key]


# --------------------------------------------------------------------------- writing the URL


def write_source() -> None:
    """The data source and split into the URL (after the sidebar); only what changed is sent."""
    ss = st.session_state
    src = ss.get(state.SOURCE, default_source())
    held = ss.get(state.KEPT_UPLOAD)
    if held is not None and held[1] and src != "upload":  # the uploader (and its files) left the page
        kept.KEPT.forget(held[0])
        del ss[state.KEPT_UPLOAD]
        held = None
    token = held[0] if held is not None and src == "upload" else None
    picked = ss.get(state.SERVER_FILES) or []
    want = {DATA: None if src in (default_source(), SERVER) or (src == "upload" and token) else src,
            UPLOAD: token,
            FILES: ",".join(picked) if src == SERVER and picked else None,
            SPLIT: ss.get(state.SPLIT) or ss.get(state.URL_SPLIT) or None}
    for key, value in want.items():
        if value is None:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get_all(key) != [value]:
            st.query_params[key] = value


def link() -> str:
    """The URL of this view: the page's address and the query parameters (only the query string
    when the address is unknown, e.g. under AppTest)."""
    query = urlencode([(k, v) for k in st.query_params for v in st.query_params.get_all(k)])
    base = st.context.url
    if not base:
        return f"?{query}"
    return f"{base}?{query}" if query else base


def _strings(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]


def _same(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return math.isclose(float(a), float(b))
    except ValueError:
        return False


def _check_page_settings(path: str) -> None:
    """Once, after the session's first complete run (on page ``path``): the URL's settings the
    widgets did not take."""
    ss = st.session_state
    ss[state.URL_CHECKED] = (ss.get(state.SOURCE, default_source()), path)  # the notes hold while both do
    if split := ss.pop(state.URL_SPLIT, None):  # not taken: the data shown have no splits
        _note(f"From the link, not used: split={components.literal(split)} (these data have no splits).")
    dropped = []
    for key, raw in ss.get(state.URL_START, {}).items():
        if key in MANUAL or key.lower() in STREAMLIT_OWN:
            continue
        if key not in PICKERS or key not in ss:  # on the first run only this page's widgets are bound
            dropped.append(f"{components.literal(key)} "
                           f"({'not a setting' if key not in PICKERS else 'not on this page'})")
            if key in st.query_params:
                del st.query_params[key]
            continue
        now = _strings(ss[key])
        lost = [v for v in raw if v != "" and not any(_same(v, c) for c in now)]
        if lost:
            dropped.append(f"{components.literal(key)}={_names(lost)}")
    if dropped:
        _note("From the link, not used (not among the choices here): " + "; ".join(dropped) + ".")


def finish(notices, slot, path: str) -> None:
    """After the page ``path``: the link to this view in the sidebar ``slot``, and in ``notices``
    (above the page) what the link asked for that could not be shown — while the page and the data
    source are the link's."""
    ss = st.session_state
    if state.URL_CHECKED not in ss:
        _check_page_settings(path)
    notes = ss.get(state.URL_NOTES) or []
    if notes and ss[state.URL_CHECKED] == (ss.get(state.SOURCE, default_source()), path):
        with notices.container():
            for warn, text in notes:
                if warn:
                    st.warning(text)
                else:
                    st.caption(text)
    with slot.container(), st.expander("Link to this view"):
        st.code(link(), language=None, wrap_lines=True)
        st.caption(_link_note())


def _link_note() -> str:
    ss = st.session_state
    src = ss.get(state.SOURCE, default_source())
    if src == "upload":
        held = ss.get(state.KEPT_UPLOAD)
        if held is None or held[0] is None:
            return ("The uploaded files are not in this link (they were not kept: the server's upload budget is "
                    "full, or nothing is loaded): it opens the uploader.") if held else "It opens the uploader."
        return (f"The uploaded files are kept in this server's memory for {kept.minutes()} after their last use, "
                "never on disk: until then this link opens them, on this server only (anyone with the link can).")
    if src == SERVER:
        return "It opens these files of this server's data directory, on this server."
    return "It opens this page, data set, settings and pickers."
