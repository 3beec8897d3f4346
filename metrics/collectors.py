"""Metrics read at scrape time from the running binary's own state (watches, caches), so they are
exact without touching the hot path."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

log = logging.getLogger("caldera.metrics")


@dataclass
class WatchState:
    kind: str
    synced: bool
    lists: int
    watches: int
    expired: int
    errors: int


class WatchCollector(Collector):
    """``caldera_cache_kind_synced{kind}``, ``caldera_watch_restarts_total{kind}`` (watch streams
    opened again after the first), ``caldera_watch_relists_total{kind}`` (re-lists after a 410
    Expired) and ``caldera_watch_errors_total{kind}``."""

    def __init__(self, source: Callable[[], Iterable[WatchState]]) -> None:
        self.source = source
        self.failures = 0

    def describe(self) -> Iterator[object]:
        return iter(())  # collected lazily: no names are reserved at registration

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        synced = GaugeMetricFamily(
            "caldera_cache_kind_synced", "1 once this watched kind has been listed.", labels=["kind"]
        )
        restarts = CounterMetricFamily(
            "caldera_watch_restarts", "Watch streams reopened after the first, by kind.", labels=["kind"]
        )
        relists = CounterMetricFamily(
            "caldera_watch_relists", "Re-lists after a watch answered 410 Expired, by kind.", labels=["kind"]
        )
        errors = CounterMetricFamily("caldera_watch_errors", "Watch errors, by kind.", labels=["kind"])
        try:
            states = list(self.source())
        except Exception:
            # A scrape must still answer; the failure is reported, with its traceback, never hidden.
            self.failures += 1
            log.exception("reading the watch states for /metrics failed (%d times so far)", self.failures)
            states = []
        for s in states:
            synced.add_metric([s.kind], 1.0 if s.synced else 0.0)
            restarts.add_metric([s.kind], float(max(0, s.watches - 1)))
            relists.add_metric([s.kind], float(s.expired))
            errors.add_metric([s.kind], float(s.errors))
        yield synced
        yield restarts
        yield relists
        yield errors
        yield CounterMetricFamily(
            "caldera_metrics_collection_errors",
            "Scrapes whose reading of the binary's own state failed (logged with the traceback).",
            value=float(self.failures),
        )


class RememberedCollector(Collector):
    """``caldera_remembered_objects{owner,map}``: how many entries each map the binary keeps per object
    holds now (the cache's pods, PodGroups and nodes; the binder's, the evictor's and the status
    updater's memory of what they sent), read at scrape time. Each follows the live objects: an entry
    goes when its object goes, so a count that keeps growing while the cluster does not is a leak."""

    def __init__(self, source: Callable[[], Iterable[tuple[str, str, int]]]) -> None:
        self.source = source

    def describe(self) -> Iterator[object]:
        return iter(())

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "caldera_remembered_objects",
            "Entries of the maps kept per object, by owner and map (they follow the live objects).",
            labels=["owner", "map"],
        )
        try:
            rows = list(self.source())
        except Exception:
            log.exception("reading the remembered objects for /metrics failed")
            rows = []
        for owner, name, n in rows:
            family.add_metric([owner, name], float(n))
        yield family
