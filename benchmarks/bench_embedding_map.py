"""Embedding map at scale: 100 000 x 768 float32, 1 000 Gaussian classes (random but clustered,
centres with a power-law spectrum).

In process: the PCA projection of the drawn items (the class-stratified sample of
analysis_core.stats.projection.PCA_BUDGET points), the exact PCA of all 100 000 for comparison, the
map's table and figure, and the figure's JSON (what the browser receives). With ``--browser``: the
dashboard (``streamlit run``, Playwright + Debian's chromium) opened on the Embedding map page, the
file uploaded, and the wall time until the WebGL points are painted; then a switch to the second
method (a new projection) and back (the kept one). No evaluation runs: colouring by class needs none.

Usage: ``python benchmarks/bench_embedding_map.py [--browser] [--n 100000] [--dim 768]``.
The load average is printed: on a shared machine absolute times are inflated."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis_core.figures.embedding_map import embedding_map_figure  # noqa: E402
from analysis_core.stats.projection import map_frame, pca_2d, project  # noqa: E402


def data(n: int, dim: int, classes: int = 1_000, seed: int = 0) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Two methods of ``n`` x ``dim`` float32 Gaussian clusters (spread 1 and 2) around class
    centres whose spread decays along the dimensions as ``3 / sqrt(j)`` (a power-law spectrum, as
    trained embeddings have: the leading axes stand out), labels 0..classes-1."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, classes, n)
    centres = (rng.standard_normal((classes, dim)) * 3.0 / np.sqrt(np.arange(1, dim + 1))).astype(np.float32)
    methods = {}
    for name, spread in (("a", 1.0), ("b", 2.0)):
        X = rng.standard_normal((n, dim), dtype=np.float32)
        X *= spread
        X += centres[codes]
        methods[name] = X
    return methods, codes


CPU: dict[str, float] = {}  # step -> this process's CPU seconds (all threads): what the step costs on an idle machine


def timed(fn, step: str = ""):
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    CPU[step] = time.process_time() - c
    return out, time.perf_counter() - t


def in_process(methods: dict[str, np.ndarray], codes: np.ndarray) -> None:
    X = methods["a"]
    labels = np.array([f"class {c:03d}" for c in codes])
    proj, t_proj = timed(lambda: project(X, codes, similarity="cosine"), "proj")
    pts, t_frame = timed(lambda: map_frame(proj, labels), "frame")
    fig, t_fig = timed(lambda: embedding_map_figure(pts, "class", axis_titles=proj.axis_titles()), "fig")
    js, t_json = timed(fig.to_json, "json")
    pts_ap = pts.assign(ap=np.random.default_rng(1).uniform(0, 1, len(pts)))
    _, t_fig_ap = timed(lambda: embedding_map_figure(pts_ap, "ap", axis_titles=proj.axis_titles()), "fig_ap")
    Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
    exact, t_full = timed(lambda: pca_2d(Xn, exact_up_to=Xn.size), "full")
    randomized, t_rand = timed(lambda: pca_2d(Xn), "rand")
    gap = np.abs(np.abs(exact[2].T @ randomized[2]) - np.eye(2)).max()
    print(f"{X.shape[0]:,} x {X.shape[1]} float32, {len(np.unique(codes)):,} classes, cosine; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall s / CPU s of this process)")
    rows = [(f"PCA of the drawn sample ({proj.rows.size:,} points; sampling, normalising)", t_proj, "proj"),
            ("map table", t_frame, "frame"), ("figure, by class (21 WebGL traces)", t_fig, "fig"),
            ("figure, by AP", t_fig_ap, "fig_ap"), (f"figure JSON ({len(js) / 1e6:.1f} MB)", t_json, "json")]
    for what, wall, step in rows:
        print(f"  {what:<68} {wall:6.2f} / {CPU[step]:6.2f}")
    print(f"  {'total: projection + table + figure + JSON':<68} {t_proj + t_frame + t_fig + t_json:6.2f} / "
          f"{sum(CPU[s] for s in ('proj', 'frame', 'fig', 'json')):6.2f}")
    print(f"  {f'all {X.shape[0]:,} items: exact PCA (scatter matrix)':<68} {t_full:6.2f} / {CPU['full']:6.2f}")
    print(f"  {f'all {X.shape[0]:,} items: randomized PCA (as used above EXACT_VALUES)':<68} {t_rand:6.2f} / "
          f"{CPU['rand']:6.2f}")
    print(f"  largest |cos| deviation between the exact and randomized axes: {gap:.1e} ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def in_browser(methods: dict[str, np.ndarray], codes: np.ndarray) -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "map_bench.npz"
        np.savez(path, labels=codes, **{f"embeddings_{m}": X for m, X in methods.items()})
        size_mb = path.stat().st_size / 1e6
        port = _free_port()
        app = str(ROOT / "analysis_core_dashboard" / "app.py")
        server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", app,
                                   "--server.port", str(port), "--server.headless", "true"],
                                  cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.3)
            with sync_playwright() as p:
                b = p.chromium.launch(executable_path="/usr/bin/chromium",
                                      args=["--headless", "--no-sandbox", "--disable-gpu"])
                pg = b.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                pg.goto(f"http://127.0.0.1:{port}/embedding_map")
                pg.get_by_text("Embedding map").first.wait_for(timeout=120_000)
                _idle(pg)
                pg.get_by_text("Upload files").click()
                _idle(pg)
                t0 = time.perf_counter()
                pg.locator("input[type='file']").set_input_files(str(path))
                _painted(pg, "Embedding map: a, PCA")
                t_upload = time.perf_counter() - t0
                pg.screenshot(path=str(ROOT / "tests" / "e2e" / "artifacts" / "embedding_map_100k.png"))
                times = []
                for m in ("b", "a", "b"):
                    t0 = time.perf_counter()
                    pg.locator("[data-testid='stSelectbox']").filter(has_text="Method").first.click()
                    pg.get_by_role("option", name=m, exact=True).click()
                    _painted(pg, f"Embedding map: {m}, PCA")
                    times.append(time.perf_counter() - t0)
                b.close()
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"browser (chromium headless, software WebGL), {size_mb:.0f} MB npz, 2 methods:")
    print(f"  upload -> map painted (upload, load, validate, PCA, figure, draw): {t_upload:6.2f} s")
    print(f"  switch to method b (new PCA) -> painted:                         {times[0]:6.2f} s")
    print(f"  back to method a (kept projection) -> painted:                   {times[1]:6.2f} s")
    print(f"  method b again (kept) -> painted:                                {times[2]:6.2f} s")


def _idle(pg, timeout: float = 600_000) -> None:
    pg.wait_for_timeout(200)
    pg.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=timeout)


def _painted(pg, title: str, timeout: float = 600_000) -> None:
    """Wait until the map titled ``title`` is on the page with its WebGL canvas sized."""
    pg.wait_for_function("(t) => [...document.querySelectorAll('.js-plotly-plot')].some(p => "
                         "(p.querySelector('.gtitle')?.textContent || '').startsWith(t) && "
                         "[...p.querySelectorAll('canvas')].some(c => c.width > 0))", arg=title, timeout=timeout)
    _idle(pg, timeout)
    pg.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--browser", action="store_true", help="also time the dashboard page in Chromium")
    args = ap.parse_args()
    methods, codes = data(args.n, args.dim)
    in_process(methods, codes)
    if args.browser:
        in_browser(methods, codes)


if __name__ == "__main__":
    main()
