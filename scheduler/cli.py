"""The `caldera-scheduler` console script."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("caldera")
    except PackageNotFoundError:
        return "0.0.0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="caldera-scheduler", description="Volcano-compatible batch scheduler"
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.version:
        print(f"caldera-scheduler {package_version()}")
        return 0
    print("caldera-scheduler: running against a cluster is not built yet (issue 4)", file=sys.stderr)
    return 2
