"""Modules say what they share: no module of analysis_core imports another module's private
(underscore) names, neither by ``from x import _name`` nor as ``module._name``."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "analysis_core"


def _private_uses(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    internal_aliases: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            internal = node.level > 0 or (node.module or "").startswith("analysis_core")
            if not internal:
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
                internal_aliases.add(alias.asname or alias.name)  # may be a module: checked below
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("analysis_core"):
                    internal_aliases.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in internal_aliases
                and node.attr.startswith("_") and not node.attr.startswith("__")):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_imports_another_modules_private_names():
    offenders = {str(p.relative_to(PACKAGE)): uses for p in sorted(PACKAGE.rglob("*.py")) if (uses := _private_uses(p))}
    assert offenders == {}


def test_the_checker_sees_both_forms(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from .core import _hidden, shown\nfrom . import kernels as K\nK._bump(1)\n"
                 "import numpy as np\nnp._x\n")
    assert _private_uses(f) == ["line 1: from .core import _hidden", "line 3: K._bump"]
