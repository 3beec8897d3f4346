"""The distribution installs one import name, ``caldera``, and nothing generic beside it."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("scheduler", "cache", "framework", "plugins", "actions", "metrics", "config", "hack")


def test_every_subpackage_of_the_folders_is_packaged() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        "caldera." + ".".join(init.parent.relative_to(ROOT).parts)
        for folder in FOLDERS
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk
    assert setuptools["package-dir"] == {f"caldera.{f}": f for f in FOLDERS}


def test_the_wheel_holds_a_single_top_level_package(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes build/ and *.egg-info beside the sources it builds.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for folder in FOLDERS:
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = tmp_path / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "--wheel-dir",
            str(wheels),
            str(source),
        ],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("caldera-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {name.split("/", 1)[0] for name in names if not name.split("/", 1)[0].endswith(".dist-info")}
    assert top_level == {"caldera"}
    assert "caldera/framework/session.py" in names
    assert "caldera/scheduler/ui/static/index.html" in names
    dist_info = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    entry_points = zipfile.ZipFile(wheel).read(dist_info).decode()
    assert "caldera-scheduler = caldera.scheduler.cli:main" in entry_points
    assert "caldera-sim = caldera.hack.cli:main" in entry_points


def test_the_console_scripts_run_from_the_install() -> None:
    bin_dir = Path(sys.executable).parent
    for script in ("caldera-scheduler", "caldera-sim"):
        out = subprocess.run([str(bin_dir / script), "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "0.1.0" in out.stdout


def test_the_checkout_launchers_run_without_installing() -> None:
    out = subprocess.run(
        [sys.executable, "-S", str(ROOT / "cmd" / "caldera-scheduler" / "main.py"), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    # -S leaves site-packages (and so the editable install) out: only the launcher's mapping can help.
    assert "No module named 'caldera" not in out.stderr, out.stderr
