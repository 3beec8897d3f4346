"""The one percentile rule of the figures hack/ prints: nearest rank."""

from __future__ import annotations

import math

import pytest

from caldera.hack.stats import percentile


@pytest.mark.parametrize(("p", "expected"), [(5, 15), (30, 20), (40, 20), (50, 35), (100, 50), (0, 15)])
def test_nearest_rank_of_five_samples(p: float, expected: float) -> None:
    # The worked example of the nearest-rank method: the ceil(p/100 * 5)-th smallest of 15, 20, 35, 40, 50.
    assert percentile([40, 15, 50, 35, 20], p) == expected


def test_p99_of_a_hundred_samples_is_the_99th_not_the_largest() -> None:
    assert percentile(range(1, 101), 99) == 99
    assert percentile(range(1, 1001), 99.9) == 999


def test_no_samples_is_nan_and_a_bad_rank_is_refused() -> None:
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile([1.0], 101)
