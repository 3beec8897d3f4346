"""The `caldera-sim` console script: simulated cluster, workload generators, soak and benchmarks."""

from __future__ import annotations

import argparse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="caldera-sim")
    parser.add_subparsers(dest="command", required=True)
    parser.parse_args(argv)
    return 0
