"""The one percentile rule of every figure the tools in hack/ print (soak, benchmarks, demo)."""

from __future__ import annotations

import math
from collections.abc import Iterable


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank percentile: the smallest sample such that at least `p` percent of the samples are
    at or below it, i.e. the ceil(p/100 * n)-th smallest of n (the smallest for p = 0, the largest for
    p = 100). Always one of the samples, never an interpolation; NaN when there are none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    if not 0 <= p <= 100:
        raise ValueError(f"percentile {p} is outside [0, 100]")
    # Rounded first so that float noise (99.9 * 1000 / 100 = 999.0000000000001) does not move a whole rank.
    rank = math.ceil(round(p * len(ordered) / 100, 9))
    return ordered[max(rank, 1) - 1]
