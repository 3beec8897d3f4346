"""The `caldera-sim` console script: simulated cluster, workload generators, soak and benchmarks.

Each subcommand lives in its own module exposing `register(subparsers)`, which adds an argparse
subparser and sets `func=run` where `run(args) -> int`. A module listed below that does not exist
yet is skipped, so adding a subcommand is adding its module.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from importlib import metadata

SUBCOMMAND_MODULES = (
    "caldera.hack.sim.cli",  # serve
    "caldera.hack.bench_sim",  # bench-sim
    "caldera.hack.demo",
    "caldera.hack.workload.cli",
    "caldera.hack.soak.cli",
    "caldera.hack.bench",
)


def _version() -> str:
    try:
        return metadata.version("caldera")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="caldera-sim", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"caldera-sim {_version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and name.startswith(exc.name):
                continue  # not written yet
            raise
        register = getattr(module, "register", None)
        if register is not None:
            register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
