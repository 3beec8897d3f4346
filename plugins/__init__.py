"""Plugins: scheduling policy registered on a session. ``ALL`` lists the built-ins for the registry.

Plugins never touch the API; what the binary should publish they leave in ``ssn.data``:

- ``events``: list of ``(kind, "namespace/name" or name, reason, message)`` to publish as Kubernetes
  events (e.g. ``("Queue", "team-a", "GuaranteeScaled", "...")`` from proportion and capacity).
- ``queue_guarantee_scaled``: ``{queue: {resource: factor}}`` for the queues whose guarantee was
  scaled down this cycle because all guarantees exceed the cluster (empty when none): a metric.
- ``proportion_cluster_empty``: True when the cluster's total was zero or unknown, so no queue had
  a deserved share this cycle.
- ``queue_shares``: ``{queue: {"deserved": {...}, "allocated": {...}, "share": float}}`` at session
  close (proportion), for queue status and metrics.
- keys starting with ``_`` are private per-session caches (``_node_index``, ...).

Actions add: ``enqueue_ran`` (bool), ``allocate_stats`` (``{"tasks": n, "placed": n,
"pipelined": n, "seconds": s}``).
"""

from caldera.framework.plugin import Plugin
from caldera.plugins.binpack import BinpackPlugin
from caldera.plugins.capacity import CapacityPlugin
from caldera.plugins.conformance import ConformancePlugin
from caldera.plugins.deviceshare import DeviceSharePlugin
from caldera.plugins.drf import DrfPlugin
from caldera.plugins.gang import GangPlugin
from caldera.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from caldera.plugins.nodeorder import NodeOrderPlugin
from caldera.plugins.overcommit import OvercommitPlugin
from caldera.plugins.predicates import PredicatesPlugin
from caldera.plugins.priority import PriorityPlugin
from caldera.plugins.proportion import ProportionPlugin
from caldera.plugins.sla import SlaPlugin

ALL: list[type[Plugin]] = [
    PriorityPlugin,
    GangPlugin,
    ConformancePlugin,
    DrfPlugin,
    ProportionPlugin,
    PredicatesPlugin,
    NodeOrderPlugin,
    BinpackPlugin,
    OvercommitPlugin,
    CapacityPlugin,
    SlaPlugin,
    DeviceSharePlugin,
    NetworkTopologyAwarePlugin,
]
