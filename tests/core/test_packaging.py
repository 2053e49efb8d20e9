"""What the distribution declares: every required dependency is imported by the package's code,
the version is defined once, and the licence, citation and changelog are there and well formed."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

import analysis_core

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# distribution -> import name, where they differ and the distribution may not be installed here
IMPORT_NAMES = {"faiss-cpu": "faiss", "scikit-learn": "sklearn", "pillow": "PIL", "pyyaml": "yaml",
                "pytrec-eval-terrier": "pytrec_eval", "dask": "dask"}


def _distribution(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9._-]+", requirement).group(0).lower().replace("_", "-")


def _import_names(dist: str) -> set[str]:
    """The top-level modules ``dist`` installs (from its installed metadata, the outside oracle),
    else the known or normalised name."""
    installed = {mod for mod, dists in metadata.packages_distributions().items()
                 if dist in {d.lower().replace("_", "-") for d in dists}}
    return installed or {IMPORT_NAMES.get(dist, dist.replace("-", "_"))}


def _imported_modules(folders: list[Path]) -> dict[str, list[str]]:
    """Top-level module -> files importing it (absolute imports anywhere in a file: at the top or
    inside a function, as the lazily imported statistics stack is)."""
    found: dict[str, list[str]] = {}
    for folder in folders:
        for path in folder.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                for n in names:
                    found.setdefault(n.split(".")[0], []).append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.slow
def test_every_required_dependency_is_imported_by_the_package_or_the_dashboard():
    imported = _imported_modules([ROOT / "analysis_core", ROOT / "analysis_core_dashboard"])
    required = [_distribution(r) for r in PYPROJECT["project"]["dependencies"]]
    assert required, "no required dependencies parsed"
    unused = {d: sorted(_import_names(d)) for d in required if not _import_names(d) & set(imported)}
    assert not unused, f"required but imported by no module of analysis_core/ or analysis_core_dashboard/: {unused}"


def test_the_import_scan_sees_lazy_imports():
    """The scan counts an import inside a function (kaleido is imported only when exporting)."""
    imported = _imported_modules([ROOT / "analysis_core"])
    assert "numpy" in imported and "pyarrow" in imported and "choreographer" in imported


def test_every_dependency_line_says_why():
    """Each required dependency's line carries its reason as a comment."""
    text = (ROOT / "pyproject.toml").read_text()
    block = text[text.index("dependencies = ["):text.index("]\n", text.index("dependencies = ["))]
    lines = [ln for ln in block.splitlines()[1:] if ln.strip().startswith('"')]
    assert lines and all("#" in ln for ln in lines), [ln for ln in lines if "#" not in ln]


def test_the_version_is_defined_once_and_printed_by_the_command_line():
    project = PYPROJECT["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "analysis_core.__version__"}
    out = subprocess.run([sys.executable, "-m", "analysis_core", "--version"], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 0
    assert out.stdout.strip() == f"embedding-retrieval-eval {analysis_core.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.dev\d+)?", analysis_core.__version__)


def test_licence_citation_changelog_and_metadata():
    licence = (ROOT / "LICENSE").read_text()
    assert "BSD 3-Clause License" in licence and "The embedding-retrieval-eval developers" in licence
    assert "Neither the name of the copyright holder" in licence  # the third clause
    project = PYPROJECT["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]
    assert any(c.startswith("Intended Audience :: Science/Research") for c in project["classifiers"])
    assert not any(c.startswith("License ::") for c in project["classifiers"])  # PEP 639: the SPDX field only
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in changelog
    assert re.search(r"^## \[0\.2\.0\] - Unreleased$", changelog, re.M)
    assert re.search(r"^## \[0\.1\.0\] - \d{4}-\d{2}-\d{2}$", changelog, re.M)
    yaml = pytest.importorskip("yaml")
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0"
    assert {"message", "title", "authors"} <= set(cff) and cff["license"] == "BSD-3-Clause"
    assert all("name" in a or "family-names" in a for a in cff["authors"])


def test_project_urls_and_a_long_description_without_relative_links():
    """A package index shows the README with no base URL: every link in the long description is
    absolute (setup.py makes the README's relative links point into the repository)."""
    urls = PYPROJECT["project"]["urls"]
    assert {"Homepage", "Repository", "Documentation", "Issues", "Changelog"} <= set(urls)
    assert all(u.startswith("https://") for u in urls.values())
    assert "readme" in PYPROJECT["project"]["dynamic"] and "readme" not in PYPROJECT["project"]
    namespace = {"__file__": str(ROOT / "setup.py")}
    exec((ROOT / "setup.py").read_text().split("\nsetup(\n")[0], namespace)  # its definitions, not setup()
    text = namespace["long_description"]()
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links and all(link.startswith(("https://", "#")) for link in links), links
    assert f"]({urls['Repository']}/blob/main/docs/user-guide.md#dashboard)" in text
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(re.findall(r"\]\(([^)\s]+)\)", readme)) == len(links)  # no link lost
