"""Loading and evaluation, cached by a digest of the data's bytes (never by Streamlit's sampled
hashing of large arrays): arguments with a leading underscore are not hashed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import streamlit as st

from analysis_core import Dataset, Evaluation, evaluate, load_bytes

DEMO_DIR = Path(__file__).resolve().parents[1] / "demo_data"


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


@st.cache_resource(show_spinner=False, max_entries=16)
def evaluation(key: str, similarity: str, ks: tuple[int, ...], _ds: Dataset) -> Evaluation:
    bar = st.progress(0.0, text="Evaluating…")

    def progress(done: int, total: int, stage: str) -> None:
        bar.progress(min(done / max(total, 1), 1.0), text=f"Evaluating {stage}")

    ev = evaluate(_ds, similarity=similarity, ks=ks, progress=progress)
    bar.empty()
    return ev
