"""The packages type-check (mypy, configured in pyproject.toml), under their installed names."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_errors(package_tree: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-error-summary",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
        ],
        cwd=package_tree,
        env={**os.environ, "PYTHONPATH": str(package_tree)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-5000:] + result.stderr[-2000:]
