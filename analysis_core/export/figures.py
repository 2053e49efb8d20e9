"""Figures to PDF / SVG / PNG bytes: the one export path of the ``report`` command, the
dashboard's buttons and its export-all archive.

The page is exactly the style's width (CSS pixels at 96 per inch, which Chromium prints at
72 pt per inch), the height follows the figure kind's aspect ratio, fonts are set in points,
and PNGs are rendered at the style's dpi. One Chromium (driven by kaleido) stays open for the
whole process: launching it costs seconds, a figure on an open one well under a second. Every
export goes through one lock, so concurrent callers (dashboard sessions) never interleave on it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from ..errors import InputError
from ..extras import require
from ..figures.style import legend_entries, page_layout
from .physical_size import PX_PER_IN, sized
from .tables import file_stem

FORMATS = ("pdf", "svg", "png")
PRESET_WIDTHS = {"single": 3.5, "double": 7.2}
INSTALL_COMMAND = "apt-get install -y chromium fonts-liberation"
RENDER_TIMEOUT_S = 120.0
RENDER_TABS = 2  # pages of the one Chromium rendering at once (the machine's 2 cores: 1.6x a single page)
BATCH = 8  # figures rendered per hold of the lock: a dashboard download waits for at most one batch
MAX_BOX_POINTS = 300  # a box trace with more points is exported with its outliers only
_LOCK = threading.Lock()


@dataclass(frozen=True)
class FigureStyle:
    """Paper presets: width in inches (single column 3.5, double column 7.2, or any), font
    family and size in points, line width, PNG resolution. ``height_in`` None: the height
    follows the figure kind's aspect ratio (set by its builder)."""

    width_in: float = 7.2
    font_family: str = "Liberation Sans, Arial, sans-serif"
    font_size: float = 9.0
    line_width: float = 1.5
    dpi: int = 300
    height_in: float | None = None

    def __post_init__(self) -> None:
        if not (1.0 <= self.width_in <= 20.0):
            raise InputError("figure style", f"width {self.width_in} in is outside 1-20 in.",
                             "use a column width such as 3.5 (single) or 7.2 (double).")
        if not (4.0 <= self.font_size <= 30.0):
            raise InputError("figure style", f"font size {self.font_size} pt is outside 4-30 pt.",
                             "use 7-10 pt for a paper.")
        if not (50 <= self.dpi <= 1200):
            raise InputError("figure style", f"{self.dpi} dpi is outside 50-1200.", "use 300 (the default).")

    @classmethod
    def preset(cls, name: str, width_in: float | None = None, **kw) -> FigureStyle:
        """``single`` (3.5 in), ``double`` (7.2 in) or ``custom`` (``width_in``)."""
        if name == "custom":
            if width_in is None:
                raise ValueError("the custom preset needs width_in")
            return cls(width_in=float(width_in), **kw)
        if name not in PRESET_WIDTHS:
            raise ValueError(f"unknown style preset {name!r}; use one of {sorted(PRESET_WIDTHS)} or custom")
        return cls(width_in=PRESET_WIDTHS[name], **({"font_size": 8.0} if name == "single" else {}) | kw)


def chromium_path() -> str | None:
    """The Chromium kaleido will drive, or None. ``BROWSER_PATH`` (kaleido's own override)
    wins; otherwise the PATH and the usual install locations, as kaleido searches them. Without the
    ``export`` extra (kaleido and its choreographer): :class:`InputError` with the pip command."""
    require("export")
    from choreographer.browsers.chromium import Chromium

    path = os.environ.get("BROWSER_PATH") or Chromium.find_browser(skip_local=False)
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def require_chromium() -> None:
    """Raise :class:`InputError` with the install command when no Chromium can be found."""
    if chromium_path() is None:
        raise InputError("figure export", "needs Chromium, which is not installed (or BROWSER_PATH points nowhere).",
                         f"install it with `{INSTALL_COMMAND}` (as root), or export no figures "
                         "(report --format '').")


def _page(fig: go.Figure, style: FigureStyle) -> dict:
    """``fig`` laid out for the page as plotly JSON: the style's width, fonts in points, legend
    and title clear of each other and of the data, height from the figure's aspect ratio.

    Only the layout is copied and laid out (plotly's validation of a whole figure, data
    included, cost more than rendering it); the traces are shallow copies that share the data
    arrays, with what the page changes (line widths, box points) replaced, never mutated."""
    # the layout as JSON (its template aside, kept as it is), laid out as plain dicts
    layout = getattr(fig, "_layout", None)
    if not isinstance(layout, dict):
        layout = fig.layout.to_plotly_json()
    template = layout.get("template")
    layout = page_layout({k: v for k, v in layout.items() if k != "template"}, legend_entries(fig),
                         width_px=style.width_in * PX_PER_IN, font_family=style.font_family,
                         font_px=style.font_size * PX_PER_IN / 72,
                         height_px=None if style.height_in is None else style.height_in * PX_PER_IN)
    if template is not None:
        layout["template"] = template
    traces = getattr(fig, "_data", None)
    if traces is None or len(traces) != len(fig.data):
        traces = fig.to_plotly_json()["data"]
    data = []
    for tr in traces:
        tr = dict(tr)
        kind = tr.get("type", "scatter")
        y = tr.get("y")
        if kind == "box" and tr.get("boxpoints") == "all" and y is not None and len(y) > MAX_BOX_POINTS:
            tr["boxpoints"] = "outliers"  # thousands of jittered points: a blot at column width, seconds to render
        line = tr.get("line") or {}
        if kind == "scatter" and tr.get("fill") is None and line.get("width") != 0:
            tr["line"] = {**line, "width": style.line_width * (line.get("width") or 2) / 2}
        data.append(tr)
    return {"data": data, "layout": layout}


RELOAD_EVERY = 50  # renders between two reloads of kaleido's page


def _kaleido_class():
    """kaleido's ``Kaleido`` that reloads its page (plotly.js, ~0.4 s on a busy machine) every
    :data:`RELOAD_EVERY` figures instead of after each one. Nothing of a figure stays on the page
    between renders: each is drawn in a new detached element, and the page's image and its print
    size are replaced by the next render: PDF and PNG bytes are the same, SVG up to plotly's
    random ids and the order of two attributes (tested)."""
    (kaleido, _) = require("export")
    base: Any = kaleido.Kaleido  # kaleido ships no types

    class _Kaleido(base):
        _renders = 0

        async def _return_kaleido_tab(self, tab) -> None:
            self._renders += 1
            if self._renders % RELOAD_EVERY == 0:
                await tab.reload()
            await self.tabs_ready.put(tab)

    if not hasattr(kaleido.Kaleido, "_return_kaleido_tab"):
        return kaleido.Kaleido  # another kaleido: its own behaviour
    return _Kaleido


class _Renderer:
    """One kaleido (one headless Chromium) on its own event-loop thread, opened on first use
    and reopened after a failure; callers hold ``_LOCK``."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kaleido: Any = None  # a kaleido.Kaleido once open

    def _open(self) -> None:
        require_chromium()
        loop = asyncio.new_event_loop()
        threading.Thread(target=loop.run_forever, name="kaleido", daemon=True).start()
        # mathjax False: figures have no LaTeX, and MathJax would be fetched from the network
        k = _kaleido_class()(n=RENDER_TABS, timeout=RENDER_TIMEOUT_S, mathjax=False)
        try:
            asyncio.run_coroutine_threadsafe(k.open(), loop).result(timeout=RENDER_TIMEOUT_S)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            raise
        self._loop, self._kaleido = loop, k

    def close(self) -> None:
        loop, k = self._loop, self._kaleido
        self._loop = self._kaleido = None
        if loop is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(k.close(), loop).result(timeout=30)
        except Exception:  # noqa: BLE001 - closing a browser that already died
            pass
        loop.call_soon_threadsafe(loop.stop)

    def submit(self, fig: dict, opts: dict) -> concurrent.futures.Future:
        """Start rendering a figure and return at once (its bytes: the future's result); it is
        rendered on the first free page, while the caller goes on."""
        if self._kaleido is None:
            self._open()
        assert self._loop is not None  # open
        return asyncio.run_coroutine_threadsafe(self._kaleido.calc_fig(fig, opts=opts), self._loop)

    def render_many(self, items: list[tuple[dict, dict]]) -> list[bytes]:
        """Every (figure, options), on all pages at once (each figure on whichever page is free:
        the same bytes, up to the PDF dates and SVG ids, as one after the other, tested)."""
        try:
            futures = [self.submit(fig, opts) for fig, opts in items]
            return [f.result(timeout=RENDER_TIMEOUT_S * len(items)) for f in futures]
        except BaseException:
            self.close()  # a fresh browser for the next call
            raise


_RENDERER = _Renderer()
atexit.register(lambda: _RENDERER.close())


def start_renderer() -> None:
    """Start Chromium in the background (3-6 s) so that it is up when the first figure is
    exported: a caller that computes before it exports (``report``) calls this first. A failure
    here is left to that first export, which opens Chromium again and says why it cannot."""
    def run() -> None:
        with _LOCK:
            if _RENDERER._kaleido is None:
                try:
                    _RENDERER._open()
                except Exception:  # noqa: BLE001 - reported by the first export
                    pass

    threading.Thread(target=run, name="kaleido-start", daemon=True).start()


class Prerender:
    """Figures rendered in the background while the caller computes the rest of its report:
    call it with each figure as soon as the figure is final (``build_report``'s ``on_figure``),
    then hand it to :func:`write_figures`, which takes the bytes from it. Chromium renders in its
    own processes, so on a second core the rendering overlaps the computing instead of following
    it. The bytes are those :func:`figures_bytes` gives; a figure whose background render failed
    is rendered again by :func:`write_figures` (which then reports a failure that persists)."""

    def __init__(self, formats: tuple[str, ...], style: FigureStyle | None = None) -> None:
        bad = [f for f in formats if f not in FORMATS]
        if bad:
            raise ValueError(f"format must be one of {FORMATS}, not {bad}")
        self.formats = tuple(formats)
        self.style = style or FigureStyle()
        self._jobs: dict[tuple[str, str], tuple[go.Figure, concurrent.futures.Future, float, float]] = {}

    def __call__(self, name: str, fig: go.Figure) -> None:
        if not self.formats:
            return
        page = _page(fig, self.style)
        w, h = page["layout"]["width"], page["layout"]["height"]
        with _LOCK:
            try:
                for fmt in self.formats:
                    self._jobs[name, fmt] = (fig, _RENDERER.submit(page, _opts(w, h, fmt, self.style)), w, h)
            except Exception:  # noqa: BLE001 - no Chromium: write_figures renders it, and says why it cannot
                return

    def take(self, name: str, fig: go.Figure, fmt: str) -> bytes | None:
        """The bytes of ``fig`` as ``name`` in ``fmt``, or None (not submitted, or a failed render)."""
        job = self._jobs.pop((name, fmt), None)
        if job is None or job[0] is not fig:
            return None
        _, future, w, h = job
        try:
            data = future.result(timeout=RENDER_TIMEOUT_S * (1 + len(self._jobs)))
        except BaseException:  # noqa: BLE001 - rendered again by the caller, on a fresh browser
            with _LOCK:
                _RENDERER.close()
            return None
        return sized(data, fmt, w, h, self.style.dpi)


def _opts(w: float, h: float, fmt: str, style: FigureStyle) -> dict:
    # PNG: scale so the pixel width is width_in x dpi exactly; vector formats at scale 1 so the
    # page is width_in wide
    scale = round(style.width_in * style.dpi) / w if fmt == "png" else 1
    return {"format": fmt, "width": w, "height": h, "scale": scale}


def figure_bytes(fig: go.Figure, fmt: str, style: FigureStyle | None = None) -> bytes:
    """The figure as ``pdf`` (vector, embedded fonts), ``svg`` or ``png`` bytes."""
    return figures_bytes([(fig, fmt)], style)[0]


def figures_bytes(items: list[tuple[go.Figure, str]], style: FigureStyle | None = None) -> list[bytes]:
    """:func:`figure_bytes` of every (figure, format), :data:`RENDER_TABS` at a time."""
    bad = sorted({fmt for _, fmt in items if fmt not in FORMATS})
    if bad:
        raise ValueError(f"format must be one of {FORMATS}, not {bad[0]!r}")
    style = style or FigureStyle()
    pages: dict[int, dict] = {}  # a figure's page is the same in every format
    jobs = []
    for fig, fmt in items:
        page = pages.get(id(fig)) or pages.setdefault(id(fig), _page(fig, style))
        w, h = page["layout"]["width"], page["layout"]["height"]
        jobs.append((page, _opts(w, h, fmt, style), fmt, w, h))
    out = []
    for i in range(0, len(jobs), BATCH):
        batch = jobs[i:i + BATCH]
        with _LOCK:
            data = _RENDERER.render_many([(page, opts) for page, opts, *_ in batch])
        out += [sized(d, fmt, w, h, style.dpi)
                for d, (_, _, fmt, w, h) in zip(data, batch, strict=True)]
    return out


def write_figures(figs: dict[str, go.Figure], out: Path, formats: tuple[str, ...],
                  style: FigureStyle | None = None, prerendered: Prerender | None = None) -> list[Path]:
    """Write ``out/<name>.<fmt>`` for every figure and format; ``prerendered``: figures already
    rendered in the background (with the same style), taken from it."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ValueError(f"format must be one of {FORMATS}, not {bad}")
    out.mkdir(parents=True, exist_ok=True)
    if prerendered is not None and prerendered.style != (style or FigureStyle()):
        prerendered = None  # rendered for another page
    items = [(name, fig, fmt) for name, fig in figs.items() for fmt in formats]
    paths = [out / f"{file_stem(name)}.{fmt}" for name, _, fmt in items]
    rest = []
    for p, (name, fig, fmt) in zip(paths, items, strict=True):
        data = prerendered.take(name, fig, fmt) if prerendered is not None else None
        if data is None:
            rest.append((p, fig, fmt))
        else:
            p.write_bytes(data)
    for (p, _, _), data in zip(rest, figures_bytes([(fig, fmt) for _, fig, fmt in rest], style), strict=True):
        p.write_bytes(data)
    return paths
