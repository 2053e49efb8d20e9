"""Package list and long description for setuptools (metadata lives in pyproject.toml). Only here
because pyproject cannot say two things:

* one mapped package: the bundled demo data (repository folder ``demo_data/``) installs as
  ``analysis_core/demo_data/`` (data files only, not the scripts that make them), where
  ``analysis-core demo`` and the dashboard find it (:mod:`analysis_core.demo`);
* the README as the long description with its relative links (``docs/…``, ``LICENSE``) made
  absolute under the project's "Repository" URL: a package index resolves no relative link."""

import re
import tomllib
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
DEMO = "analysis_core.demo_data"


class BuildPy(build_py):
    """The demo folder's data files, without its scripts (they need scikit-learn or PyTorch)."""

    def find_package_modules(self, package, package_dir):
        return [] if package == DEMO else super().find_package_modules(package, package_dir)


def long_description() -> str:
    repository = tomllib.loads((HERE / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    # ](path) and ](path#anchor) -> ](<repository>/blob/main/path...); absolute and in-page links stay
    return re.sub(r"\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s]+)\)", rf"]({repository}/blob/main/\1)", readme)


setup(
    packages=[*find_packages(include=["analysis_core*", "analysis_core_dashboard*"]), DEMO],
    package_dir={DEMO: "demo_data"},
    package_data={DEMO: ["*.npz", "*.csv"], "analysis_core_dashboard": ["icon.svg"], "analysis_core": ["py.typed"]},
    cmdclass={"build_py": BuildPy},
    long_description=long_description(),
    long_description_content_type="text/markdown",
)
