"""Package list for setuptools (metadata lives in pyproject.toml). Only here because pyproject's
``packages.find`` cannot add one mapped package: the bundled demo data (repository folder
``demo_data/``) installs as ``dashboard/demo_data/`` so an installed dashboard opens on it."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["analysis_core*", "dashboard*"]), "dashboard.demo_data"],
    package_dir={"dashboard.demo_data": "demo_data"},
    package_data={"dashboard.demo_data": ["*.npz"], "dashboard": ["icon.svg"], "analysis_core": ["py.typed"]},
)
