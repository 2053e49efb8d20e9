"""Loading and analyses, cached by a digest of the data's bytes (never by Streamlit's sampled
hashing of large arrays): arguments with a leading underscore are not hashed, and every cached
function takes the digest ``key`` instead. Results are immutable and shared across sessions only
when the bytes are identical."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import streamlit as st

from analysis_core import Dataset, Evaluation, evaluate, load_bytes
from analysis_core.stats.bands import pr_bands
from analysis_core.stats.class_count import class_count_sweep

# the repository's demo_data/, or its installed copy inside the package (see setup.py)
_REPO_DEMO = Path(__file__).resolve().parents[1] / "demo_data"
DEMO_DIR = _REPO_DEMO if (_REPO_DEMO / "digits.npz").is_file() else Path(__file__).resolve().parent / "demo_data"


def digest(files: list[tuple[str, bytes]]) -> str:
    h = hashlib.blake2b(digest_size=16)
    for name, data in files:
        h.update(name.encode() + b"\0" + len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def demo_files(name: str) -> list[tuple[str, bytes]]:
    path = DEMO_DIR / f"{name}.npz"
    return [(path.name, path.read_bytes())]


@st.cache_resource(show_spinner=False, max_entries=16)
def load(key: str, _files: tuple[tuple[str, bytes], ...]) -> Dataset:
    return load_bytes(list(_files))


def _progress_bar(label: str):
    bar = st.progress(0.0, text=label)

    def progress(done: int, total: int, stage: str) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"{label}: {stage}")

    return bar, progress


@st.cache_resource(show_spinner="Starting the Dask cluster…", max_entries=2)
def compute(mode: str, workers: int, address: str):
    """A started :class:`DaskCompute`, shared by the sessions that chose the same cluster."""
    from analysis_core.engine.distributed import DaskCompute

    if mode == "local":
        return DaskCompute(workers=workers).start()
    return DaskCompute(scheduler=address).start()


@st.cache_resource(show_spinner=False, max_entries=16)
def evaluation(key: str, similarity: str, ks: tuple[int, ...], n_recall: int, query_sample: int | None = None,
               seed: int = 0, alpha: float = 0.05, *, _ds: Dataset, _compute=None) -> Evaluation:
    """The sidebar's evaluation. Where it ran (``_compute``) is not part of the key: same results."""
    bar, progress = _progress_bar("Evaluating")
    ev = evaluate(_ds, similarity=similarity, ks=ks, n_recall=n_recall, query_sample=query_sample, seed=seed,
                  alpha=alpha, compute=_compute, progress=progress)
    bar.empty()
    return ev


@st.cache_resource(show_spinner=False, max_entries=32)
def split_evaluation(key: str, similarity: str, ks: tuple[int, ...], split: str, group_size: int, seed: int,
                     alpha: float, _ds: Dataset) -> Evaluation:
    return evaluate(_ds, similarity=similarity, ks=ks, split=split, group_size=group_size, seed=seed, alpha=alpha)


@st.cache_resource(show_spinner=False, max_entries=64)
def subset_evaluation(key: str, similarity: str, method: str, n_classes: int, group_size: int, seed: int,
                      alpha: float, _ds: Dataset) -> Evaluation:
    return evaluate(_ds, similarity=similarity, ks=(1,), methods=[method], max_classes=n_classes,
                    group_size=group_size, seed=seed, alpha=alpha)


@st.cache_data(show_spinner="Sweeping class counts…", max_entries=16)
def sweep(key: str, similarity: str, method: str, group_size: int, repeats: int, _ds: Dataset) -> pd.DataFrame:
    return class_count_sweep(_ds.embeddings[method], _ds.label_codes, repeats=repeats, group_size=group_size,
                             similarity=similarity)


@st.cache_data(show_spinner=False, max_entries=32)
def bands(key: str, similarity: str, ks: tuple[int, ...], n_recall: int, alpha: float, kind: str,
          _ev: Evaluation) -> pd.DataFrame:
    return pr_bands(_ev, alpha=alpha, kind=kind)
