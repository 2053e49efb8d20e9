"""Every LaTeX table of ``report --by-split`` on the whole training demo (10 checkpoints, 3 splits,
confidences), compiled with pdflatex in a two-column article (booktabs, longtable where used):
no error, no "Overfull \\hbox", no float too large for the page, and ``summary.tex`` with bold
best values and significance marks. Not part of CI (the report takes minutes on 2 cores); the
test ``test_training_demo_by_split_tables_compile_in_two_columns_with_bold_best_and_marks`` runs
the same check on a reduced copy of the demo.

Usage: ``python benchmarks/check_paper_tables.py [OUT] [--reuse]`` (``--reuse``: compile the
tables already in OUT/tables)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("out", nargs="?", type=Path, default=Path(tempfile.gettempdir()) / "training_report")
    p.add_argument("--reuse", action="store_true")
    args = p.parse_args()
    if not args.reuse:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "analysis_core", "report", str(ROOT / "demo_data" / "training.npz"),
                        "--by-split", "--out", str(args.out), "--format", "", "--quiet"], check=True, cwd=ROOT)
        print(f"report: {time.perf_counter() - t:.0f} s (load average {os.getloadavg()[0]:.1f})")
    texs = sorted((args.out / "tables").glob("*.tex"))
    packages = ["booktabs"] + (["longtable"] if any(r"\begin{longtable}" in t.read_text() for t in texs) else [])
    with tempfile.TemporaryDirectory() as tmp:
        doc = Path(tmp) / "doc.tex"
        doc.write_text("\\documentclass[twocolumn]{article}\n" + "".join(f"\\usepackage{{{q}}}\n" for q in packages)
                       + "\\begin{document}\n"
                       + "\n".join(f"\\input{{{t.with_suffix('')}}}\n\\clearpage" for t in texs)
                       + "\n\\end{document}\n")
        r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp,
                           capture_output=True, text=True, timeout=600)
        log = (Path(tmp) / "doc.log").read_text(errors="replace")
    summary = (args.out / "tables" / "summary.tex").read_text()
    checks = {
        "pdflatex exit 0": r.returncode == 0,
        "no Overfull \\hbox": "Overfull \\hbox" not in log,
        "no float too large": "Float too large" not in log,
        "summary: bold best": r"\textbf{" in summary,
        "summary: significance marks": r"$^\dagger$" in summary,
    }
    print(f"{len(texs)} tables ({', '.join(t.stem for t in texs)}), packages {', '.join(packages)}")
    for name, ok in checks.items():
        print(f"  {'ok  ' if ok else 'FAIL'} {name}")
    for line in re.findall(r"(Overfull \\hbox.*|LaTeX Warning: Float too large.*)", log):
        print("   ", line)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
