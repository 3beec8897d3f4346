"""Rewrite pyproject.toml for the production image: the scheduler only.

The development package also installs ``caldera.hack`` (the simulator, workload generators, soak and
benchmarks) and the ``caldera-sim`` command; the image must hold neither. deploy/Dockerfile copies
the product's folders without hack/ and runs this on its copy of pyproject.toml before building the
wheel. It drops exactly the lines that name hack and then checks, with tomllib, that nothing else
does: a change of pyproject.toml's layout fails the build here (and in test/scheduler/test_deploy.py)
instead of building an image with the simulator in it.

Usage: python deploy/product_pyproject.py PATH/TO/pyproject.toml   (rewritten in place)
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path


def without_hack(text: str) -> str:
    out = re.sub(r',\s*"caldera\.hack"\s*=\s*"hack"', "", text)  # package-dir entry
    out = re.sub(r'^[ \t]*"caldera\.hack(\.[a-z_]+)*",[ \t]*\n', "", out, flags=re.M)  # packages
    out = re.sub(r'^"caldera\.hack(\.[a-z_]+)*"\s*=\s*\[.*\]\s*\n', "", out, flags=re.M)  # package-data
    out = re.sub(r"^caldera-sim\s*=.*\n", "", out, flags=re.M)  # console script
    return out


def check(text: str) -> None:
    data = tomllib.loads(text)
    tool = data["tool"]["setuptools"]
    named = [
        *tool.get("package-dir", {}),
        *tool.get("packages", []),
        *tool.get("package-data", {}),
        *data["project"].get("scripts", {}).values(),
    ]
    left = [name for name in named if "hack" in name]
    if left:
        raise SystemExit(f"product_pyproject: pyproject.toml still names {left}; update this script")
    if "caldera-scheduler" not in data["project"].get("scripts", {}):
        raise SystemExit("product_pyproject: the caldera-scheduler console script is gone")


def main(argv: list[str]) -> int:
    path = Path(argv[1] if len(argv) > 1 else "pyproject.toml")
    text = without_hack(path.read_text())
    check(text)
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
