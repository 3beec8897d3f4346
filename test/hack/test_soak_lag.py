"""The soak's lag note reads a replica's histograms from its /metrics (hack/soak/scrape.py)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from caldera.hack.soak.scrape import histogram_figures, parse_metrics


def test_whole_life_figures_come_from_the_cumulative_buckets() -> None:
    registry = CollectorRegistry()
    h = Histogram("x_delay_seconds", "delays", buckets=(0.005, 0.1, 0.5, 1, 5), registry=registry)
    for _ in range(98):
        h.observe(0.003)
    h.observe(0.3)
    h.observe(3.0)
    m = parse_metrics(generate_latest(registry).decode())
    assert histogram_figures(m, "x_delay_seconds") == {
        "count": 100.0,
        "p50_le": 0.005,
        "p99_le": 0.5,
        "max_le": 5.0,
        "over_1s": 1.0,
    }


def test_a_histogram_without_observations_gives_nothing() -> None:
    registry = CollectorRegistry()
    Histogram("x_delay_seconds", "delays", registry=registry)
    m = parse_metrics(generate_latest(registry).decode())
    assert histogram_figures(m, "x_delay_seconds") is None
    assert histogram_figures(m, "not_exported") is None
