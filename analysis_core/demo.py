"""The bundled demo sets: what each is, where its files are, and writing them into a folder
(``analysis-core demo [NAME] [--out DIR]``).

The files are the repository's ``demo_data/`` folder. A wheel installs them as
``analysis_core/demo_data/`` (package data, see setup.py); a clone or an editable install reads the
repository's folder. Nothing here imports more than the standard library: the loaders' "no such
file" message asks :func:`missing_file_fix` how to get a missing demo file.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

COMMAND = "analysis-core demo"


@dataclass(frozen=True)
class DemoSet:
    name: str
    files: tuple[str, ...]  # the data file first, then what goes with it (a design table)
    description: str


#: name -> the demo set, in the order they are listed
DEMOS: dict[str, DemoSet] = {d.name: d for d in (
    DemoSet("digits", ("digits.npz",),
            "scikit-learn's handwritten digits, 3 methods (pixels, PCA-16, LDA-9), train/test split"),
    DemoSet("many_classes", ("many_classes.npz",),
            "600 small classes, 2 checkpoints, splits, confidences and exact duplicates (ties)"),
    DemoSet("training", ("training.npz",),
            "a training run: 2 MLP widths x 5 epochs, zero-shot splits, confidences"),
    DemoSet("digits_runs", ("digits_runs.npz", "digits_runs_design.csv"),
            "replicate runs: 3 losses x 3 seeds x 4 epochs (36 methods), zero-shot splits, design table"),
)}


def data_dir() -> Path:
    """The folder holding the demo files: the installed copy inside the package, else the
    repository's ``demo_data/`` (a clone, an editable install)."""
    here = Path(__file__).resolve().parent
    installed = here / "demo_data"
    return installed if (installed / "digits.npz").is_file() else here.parent / "demo_data"


def path(name: str) -> Path:
    """The data file of demo set ``name`` (its first file)."""
    return data_dir() / get(name).files[0]


def get(name: str) -> DemoSet:
    try:
        return DEMOS[name]
    except KeyError:
        raise InputError(name, "no such demo set.", f"use one of {', '.join(DEMOS)} (list them: {COMMAND}).") from None


def listing() -> str:
    """One line per demo set: name, files, description."""
    width = max(map(len, DEMOS))
    files = max(len(" + ".join(d.files)) for d in DEMOS.values())
    return "\n".join(f"{d.name:<{width}}  {' + '.join(d.files):<{files}}  {d.description}" for d in DEMOS.values())


def write(name: str, out: str | Path = ".") -> list[Path]:
    """Copy demo set ``name``'s files into the folder ``out`` (made if missing); the paths written."""
    demo = get(name)
    source = data_dir()
    missing = [f for f in demo.files if not (source / f).is_file()]
    if missing:
        raise InputError(str(source), f"the demo files {', '.join(missing)} are not in this installation.",
                         "reinstall the package (pip install --force-reinstall embedding-retrieval-eval).")
    folder = Path(out)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        return [Path(shutil.copyfile(source / f, folder / f)) for f in demo.files]
    except OSError as exc:
        raise InputError(str(folder), f"cannot write the demo files there ({exc.strerror or exc}).",
                         "choose a writable --out folder.") from None


def missing_file_fix(missing: str | Path) -> str | None:
    """How to get ``missing`` when its name is a demo file (``digits.npz``, ``demo_data/digits.npz``),
    else None."""
    filename = Path(missing).name
    demo = next((d for d in DEMOS.values() if filename in d.files), None)
    if demo is None:
        return None
    folder = Path(missing).parent
    out = "" if str(folder) == "." else f" --out {folder}"
    return (f"it is a bundled demo file: write it with `{COMMAND} {demo.name}{out}` first (list the demo sets: "
            f"{COMMAND}).")
