"""Every figure kind of ``report`` (and the dashboard's own kinds) at single-column width, to look
at: PDFs exported as a paper would use them, rendered to PNG with ``pdftoppm -r 150``.

Data: the training demo (10 checkpoints, 3 splits, confidences; ``--training``, minutes) and
synthetic sets with 1, 2, 5 and 10 methods named as checkpoints of long-named families
(24 classes, 3 splits, confidences), so that every kind is drawn, including the class-count
sweep (20 classes or more) and the checkpoint figures.

Not part of CI. Usage::

    python benchmarks/figure_gallery.py OUT [--training] [--methods 1,2,5,10] [--style single]

writes ``OUT/<set>/figures/*.pdf`` (the report) and ``OUT/png/<set>/*.png``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ["resnet50_triplet", "vit_b16_supcon", "clip_finetuned", "arcface_margin", "proxy_anchor"]


def method_names(k: int) -> list[str]:
    """``k`` checkpoint names: families of two steps (e3, e10), one checkpoint when k is 1."""
    if k == 1:
        return [f"{FAMILIES[0]}_e10"]
    return [f"{FAMILIES[i // 2]}_e{(3, 10)[i % 2]}" for i in range(k)]


def synthetic(path: Path, k: int, n_classes: int = 24, per_class: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(n_classes), per_class)
    split = np.where(labels >= n_classes - 6, "test_unseen",
                     np.where(np.arange(labels.size) % per_class < 2, "test_seen", "train"))
    centres = rng.standard_normal((n_classes, 16))
    arrays = {"labels": labels, "split": split}
    for i, m in enumerate(method_names(k)):
        quality = 0.5 + 0.15 * i
        emb = centres[labels] * quality + rng.standard_normal((labels.size, 16))
        arrays[f"embeddings_{m}"] = emb.astype(np.float32)
        arrays[f"confidence_{m}"] = 1 / (1 + np.exp(-(quality + 0.5 * rng.standard_normal(labels.size))))
    np.savez(path, **arrays)
    return path


def report(data: Path, out: Path, style: str, extra: tuple[str, ...] = ()) -> None:
    cmd = [sys.executable, "-m", "analysis_core", "report", str(data), "--out", str(out), "--format", "pdf",
           "--style", style, "--quiet", *extra]
    subprocess.run(cmd, check=True, cwd=ROOT)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out", type=Path)
    p.add_argument("--training", action="store_true", help="also the training demo with --by-split (minutes)")
    p.add_argument("--methods", default="1,2,5,10")
    p.add_argument("--style", default="single")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    sets = []
    for k in (int(x) for x in args.methods.split(",") if x):
        name = f"methods_{k}"
        report(synthetic(args.out / f"{name}.npz", k), args.out / name, args.style, ("--sweep-repeats", "3"))
        sets.append(name)
    if args.training:
        report(ROOT / "demo_data" / "training.npz", args.out / "training", args.style, ("--by-split",))
        sets.append("training")
    for name in sets:
        png = args.out / "png" / name
        png.mkdir(parents=True, exist_ok=True)
        for pdf in sorted((args.out / name / "figures").glob("*.pdf")):
            subprocess.run(["pdftoppm", "-r", "150", "-png", "-singlefile", str(pdf), str(png / pdf.stem)], check=True)
        print(f"{name}: {len(list(png.glob('*.png')))} PNG in {png}")


if __name__ == "__main__":
    main()
