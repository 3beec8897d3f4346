"""Nodes' real load, as the conf's ``metrics:`` source reports it: what the ``usage`` plugin reads.

Volcano keeps one ``NodeUsage`` per node (pkg/scheduler/api/node_info.go: ``MetricsTime`` and the
cpu and memory usage averaged over ``source.NODE_METRICS_PERIOD``, in percent), refreshed by the
cache's ``GetMetricsData`` (pkg/scheduler/cache/cache.go) every ``metrics.interval``. Here the cache
keeps one immutable mapping of them and a snapshot carries it as a :class:`UsageView`: the mapping
(shared, never changed once made), the snapshot's clock reading (so every plugin of a session judges
freshness at one time) and a revision that moves only when a value a decision reads changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: ``MetricsActiveTime`` (pkg/scheduler/plugins/usage/usage.go): data older than this is not used
METRICS_ACTIVE_SECONDS = 300.0
#: ``source.NODE_METRICS_PERIOD`` (pkg/scheduler/metrics/source/metrics_client.go): the window the
#: usage is averaged over, and the key Volcano stores it under
NODE_METRICS_PERIOD = "10m"
NODE_METRICS_PERIOD_SECONDS = 600.0
#: ``defaultMetricsInternal`` (pkg/scheduler/cache/cache.go) and the usage plugin's
#: ``defaultMetricsInterval``: the poll interval when the conf gives none (or an unusable one)
DEFAULT_METRICS_INTERVAL = 30.0


@dataclass(frozen=True, slots=True)
class NodeUsage:
    """One node's load: cpu and memory in percent (0-100) and when it was measured (epoch seconds;
    0: never, Volcano's zero ``MetricsTime``)."""

    cpu: float
    memory: float
    time: float


@dataclass(frozen=True, slots=True)
class UsageView:
    """The nodes' usage as one snapshot sees it. ``nodes`` is never changed once made (the cache makes
    a new mapping when any value changes); ``at`` is when the snapshot was taken; ``revision`` moves
    whenever a node's cpu or memory changes; ``interval`` is the conf's ``metrics.interval`` in
    seconds (the usage plugin's window for pods whose load is not yet in the metrics)."""

    nodes: Mapping[str, NodeUsage]
    at: float
    revision: int = 0
    interval: float = DEFAULT_METRICS_INTERVAL

    def fresh(self, name: str) -> NodeUsage | None:
        """The node's usage when it is recent enough to use (``isMetricsAvailable``: measured at
        most ``MetricsActiveTime`` before ``at``), else None."""
        usage = self.nodes.get(name)
        if usage is None or self.at - usage.time > METRICS_ACTIVE_SECONDS:
            return None
        return usage

    def token(self) -> tuple[int, int]:
        """What a decision read of this view, as a value to compare across cycles: the revision and
        how many nodes are fresh. For one revision the fresh nodes only ever fall away as time
        passes, so the count names the set."""
        return self.revision, sum(1 for name in self.nodes if self.fresh(name) is not None)
