"""The checkout laid out as the installed package, for tools that cannot follow setuptools' editable finder.

pyproject.toml maps each top-level folder to ``caldera.<folder>`` with ``package-dir``; an editable install
resolves those names through an import hook that mypy and import-linter (grimp) do not run. These tools
are given a copy of the product's sources under ``caldera/`` instead: the same files, the installed names.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("scheduler", "cache", "framework", "plugins", "actions", "metrics", "config", "hack")


def lay_out_package(destination: Path) -> Path:
    """Copy every folder's Python sources to ``destination/caldera/<folder>``; return ``destination``."""
    package = destination / "caldera"
    package.mkdir(parents=True)
    for folder in FOLDERS:
        shutil.copytree(
            ROOT / folder,
            package / folder,
            ignore=lambda _dir, names: [
                n for n in names if n == "__pycache__" or n.endswith((".pyc", ".html", ".js", ".css", ".png"))
            ],
        )
    return destination


@pytest.fixture
def package_tree(tmp_path: Path) -> Path:
    return lay_out_package(tmp_path / "tree")
