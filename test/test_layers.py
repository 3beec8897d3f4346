"""The layers of the design are enforced by import-linter contracts kept in pyproject.toml."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_contracts_hold(package_tree: Path) -> None:
    tree = package_tree
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    result = subprocess.run(
        [lint_imports, "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_cmd_does_not_shadow_the_standard_library() -> None:
    assert not (ROOT / "cmd" / "__init__.py").exists()
    import cmd

    assert Path(cmd.__file__).parent != ROOT / "cmd"
