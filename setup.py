"""Package list for setuptools (metadata lives in pyproject.toml). Only here because pyproject's
``packages.find`` cannot add one mapped package: the bundled demo data (repository folder
``demo_data/``) installs as ``analysis_core/demo_data/`` (data files only, not the scripts that
make them), where ``analysis-core demo`` and the dashboard find it (:mod:`analysis_core.demo`)."""

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

DEMO = "analysis_core.demo_data"


class BuildPy(build_py):
    """The demo folder's data files, without its scripts (they need scikit-learn or PyTorch)."""

    def find_package_modules(self, package, package_dir):
        return [] if package == DEMO else super().find_package_modules(package, package_dir)


setup(
    packages=[*find_packages(include=["analysis_core*", "analysis_core_dashboard*"]), DEMO],
    package_dir={DEMO: "demo_data"},
    package_data={DEMO: ["*.npz", "*.csv"], "analysis_core_dashboard": ["icon.svg"], "analysis_core": ["py.typed"]},
    cmdclass={"build_py": BuildPy},
)
