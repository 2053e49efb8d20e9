"""Layers run one way: the import graph of analysis_core, read from the source with ``ast``, has no
circle, and no module imports from a layer above its own.

What counts as an import: every ``import`` / ``from … import`` anywhere in a module (module level
and inside functions: a function-level import is a dependency that merely runs later), relative
imports resolved, ``from package import submodule`` read as an import of the submodule. Not
counted:

- imports under ``if TYPE_CHECKING:`` — annotations only, never executed;
- a package ``__init__``'s lazy re-exports (PEP 562 ``__getattr__`` + ``importlib``): the package
  imports nothing when it loads, so it is no edge. A module that imports such a re-exported name
  (``from analysis_core import evaluate``) is charged with an import of the module defining it
  (read from the ``__init__``'s ``TYPE_CHECKING`` block, which lists every re-export), so the
  facade cannot hide an upward import;
- the implicit import of a submodule's parent packages: their ``__init__``s are in the same layer.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "analysis_core"

#: lowest first; a module may import from its own layer and every layer before it. A name ending
#: in "." is every module under that package (a longer match wins).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundation", ("analysis_core", "analysis_core.errors", "analysis_core.options", "analysis_core.extras",
                    "analysis_core.methods", "analysis_core.provenance", "analysis_core.numerics",
                    "analysis_core.number_format", "analysis_core.demo", "analysis_core.design")),
    ("io", ("analysis_core.io", "analysis_core.io.")),
    ("metrics", ("analysis_core.metrics", "analysis_core.metrics.")),
    ("engine", ("analysis_core.engine", "analysis_core.engine.")),
    # arithmetic of statistics that knows nothing of evaluations: quantiles, resampling, permutation,
    # multiple-testing corrections, the studentized range, the query sample's design
    ("statistical primitives", ("analysis_core.stats.quantiles", "analysis_core.stats.resampling",
                                "analysis_core.stats.permutation", "analysis_core.stats.multiplicity",
                                "analysis_core.stats.studentized_range", "analysis_core.stats.sampling")),
    # measurements that run passes of the engine (or read a pass's histograms, or the summaries of
    # replicate runs): Evaluation calls them
    ("measurements", ("analysis_core.stats.histograms", "analysis_core.stats.grouped_recall",
                      "analysis_core.stats.class_sweep", "analysis_core.stats.class_jackknife",
                      "analysis_core.stats.runs")),
    ("evaluation", ("analysis_core.evaluation",)),
    # each split of an evaluation as its own retrieval problem (the report's and the dashboard's)
    ("orchestration", ("analysis_core.splits",)),
    # inference over an evaluation's tables
    ("inference", ("analysis_core.stats", "analysis_core.stats.")),
    ("figures", ("analysis_core.figures", "analysis_core.figures.")),
    ("export", ("analysis_core.export", "analysis_core.export.")),
    ("report", ("analysis_core.report",)),
    ("front ends", ("analysis_core.api", "analysis_core.serve", "analysis_core.cli", "analysis_core.__main__")),
]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of every node under an ``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) body."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
            if name == "TYPE_CHECKING":
                skip.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skip


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _lazy_exports(tree: ast.AST, module: str) -> dict[str, str]:
    """A package ``__init__``'s re-exported name -> the module defining it (its TYPE_CHECKING block)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    for alias in stmt.names:
                        out[alias.asname or alias.name] = _resolve(module, True, stmt)
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the analysis_core modules it imports (as described in this file's docstring)."""
    paths = {module_name(p, package): p for p in sorted(package.rglob("*.py"))}
    trees = {m: ast.parse(p.read_text(), filename=str(p)) for m, p in paths.items()}
    lazy = {m: _lazy_exports(t, m) for m, t in trees.items() if paths[m].name == "__init__.py"}
    top = package.name
    graph: dict[str, set[str]] = {}
    for m, tree in trees.items():
        skip = _type_checking_nodes(tree)
        edges: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name == top or a.name.startswith(top + "."))
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(m, paths[m].name == "__init__.py", node)
                if target != top and not target.startswith(top + "."):
                    continue
                for alias in node.names:
                    if f"{target}.{alias.name}" in paths:
                        edges.add(f"{target}.{alias.name}")
                    else:
                        edges.add(lazy.get(target, {}).get(alias.name, target))
        edges.discard(m)
        graph[m] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle (its modules in order, the first repeated at the end), or [] if none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str]:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        path.pop()
        state[m] = 2
        return []

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return []


def layer_of(module: str) -> int | None:
    best, best_len = None, -1
    for i, (_, names) in enumerate(LAYERS):
        for name in names:
            hit = module.startswith(name) if name.endswith(".") else module == name
            if hit and len(name) > best_len:
                best, best_len = i, len(name)
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for m, targets in sorted(graph.items()):
        for t in sorted(targets):
            lm, lt = layer_of(m), layer_of(t)
            if lm is not None and lt is not None and lt > lm:
                out.append(f"{m} ({LAYERS[lm][0]}) imports {t} ({LAYERS[lt][0]})")
    return out


@functools.cache
def _graph() -> dict[str, set[str]]:
    return import_graph()


def test_every_module_has_a_layer():
    assert [m for m in _graph() if layer_of(m) is None] == []


def test_no_import_circle():
    assert find_cycle(_graph()) == []


def test_no_module_imports_from_a_layer_above():
    assert upward_imports(_graph()) == []


def test_layers_name_existing_modules():
    """A layer that names a module which no longer exists would silently stop checking it."""
    modules = set(_graph())
    stale = [n for _, names in LAYERS for n in names
             if not (any(m.startswith(n) for m in modules) if n.endswith(".") else n in modules)]
    assert stale == []


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "analysis_core"
    for rel, text in files.items():
        f = pkg / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return pkg


def test_the_graph_sees_every_form_of_import(tmp_path):
    pkg = _package(tmp_path, {
        "__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .api import evaluate\n",
        "api.py": "",
        "errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .api import evaluate\n",
        "stats/__init__.py": "",
        "stats/a.py": ("from . import b\nfrom ..errors import X\nimport analysis_core.api\n"
                       "def f():\n    from .. import evaluate\n"),
        "stats/b.py": "from .a import f\n",
    })
    graph = import_graph(pkg)
    assert graph["analysis_core.stats.a"] == {"analysis_core.stats.b", "analysis_core.errors", "analysis_core.api"}
    assert graph["analysis_core.errors"] == set()  # TYPE_CHECKING only
    assert graph["analysis_core"] == set()  # lazy re-exports are no edge of the package itself
    assert find_cycle(graph) == ["analysis_core.stats.a", "analysis_core.stats.b", "analysis_core.stats.a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_an_upward_import_is_named():
    graph = {"analysis_core.stats.class_sweep": {"analysis_core.evaluation", "analysis_core.engine.core"},
             "analysis_core.figures.variability": {"analysis_core.export.tables"}}
    assert upward_imports(graph) == [
        "analysis_core.figures.variability (figures) imports analysis_core.export.tables (export)",
        "analysis_core.stats.class_sweep (measurements) imports analysis_core.evaluation (evaluation)"]


def test_the_core_imports_neither_streamlit_nor_the_app():
    """The app sits on the core, never under it: ``analysis-core dashboard`` finds the app with
    ``importlib.util.find_spec`` and runs it in another program (analysis_core/serve.py)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names
                      if n.split(".")[0] in ("streamlit", "analysis_core_dashboard")]
    assert found == []
