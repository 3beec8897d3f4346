"""What a closed session hands back: its placements and evictions (``Placement``, ``Eviction``), the
report for the binary (``SessionReport``: explanations, shares, events, timings, with ``QueueShare``)
and the whole result (``SessionResult``), which the loop applies to the cache and gives to the binder,
the evictor, the status updater, the metrics and /debug. ``Event`` is what allocate and deallocate
handlers receive while a session runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caldera.framework.dra.view import ClaimAllocation, DraView
from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
from caldera.framework.topology import Topology, TopologySettings


@dataclass
class Event:
    task: TaskInfo
    #: set by an allocate handler that may refuse (``EventHandler.can_fail``): why the allocation or
    #: pipeline is refused; the statement then undoes it (Volcano's ``Event.Err``,
    #: pkg/scheduler/framework/event.go). Ignored on every other event, as Volcano ignores it there.
    err: str | None = None


@dataclass
class Placement:
    task: TaskInfo
    node: str
    #: annotations to write on the pod before it is bound (device assignments and the like)
    annotations: dict[str, str] = field(default_factory=dict)
    #: the pod's ResourceClaims, each with the allocation it must hold, written (allocation and
    #: reservation) before the binding; None: the session allocated no claims for the pod
    claims: list[ClaimAllocation] | None = None
    #: the NUMA resource sets (resource name -> ids) the numa-aware plugin assigned the pod on its
    #: node, which the cache keeps taken until the node's Numatopology reports the pod; None: none
    numa: dict[str, frozenset[int]] | None = None


@dataclass
class Eviction:
    task: TaskInfo
    reason: str


@dataclass
class QueueShare:
    """A queue's figures at session close (proportion or capacity); resources as ``Resource.to_dict``
    gives them. The queue metrics are set from them (metrics/cycle.py)."""

    deserved: dict[str, float] = field(default_factory=dict)
    allocated: dict[str, float] = field(default_factory=dict)
    request: dict[str, float] = field(default_factory=dict)
    inqueue: dict[str, float] = field(default_factory=dict)
    real_capability: dict[str, float] = field(default_factory=dict)
    share: float = 0.0
    weight: float = 0.0
    overused: bool = False
    #: the capability exported (``volcano_queue_capacity_*``) as the plugin computes it (capacity);
    #: None: the queue's spec.capability, where it has one
    capability: dict[str, float] | None = None
    #: the real capability exported (``volcano_queue_real_capacity_*``; capacity): None, none is.
    #: Volcano's capacity plugin sets these gauges, its proportion plugin does not
    real_capacity: dict[str, float] | None = None


@dataclass
class SessionReport:
    """What a session tells the binary besides placements and evictions: explanations, shares,
    timings and events to publish. Every field has one writer, named in its comment."""

    #: job uid → explanation document (scheduler/explain.py)
    explanations: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: job uid → the topology decision that left it pending (actions/topology.py; read by explain)
    topology_failures: dict[str, Any] = field(default_factory=dict)
    #: job uid → the state of its sub-groups, for jobs with sub-group policies (scheduler/explain.py)
    sub_groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the topology the session placed against (plugins/network_topology_aware.py or actions/topology.py)
    topology: tuple[Topology, TopologySettings] | None = None
    #: queue → share at session close (proportion, capacity; the one later in the conf when both run)
    queue_shares: dict[str, QueueShare] = field(default_factory=dict)
    #: job uid → dominant share (drf)
    job_shares: dict[str, float] = field(default_factory=dict)
    #: namespace → dominant share (drf)
    namespace_shares: dict[str, float] = field(default_factory=dict)
    #: queue → resource → factor, for queues whose guarantee was scaled down because all guarantees
    #: exceed the cluster (proportion, capacity)
    queue_guarantee_scaled: dict[str, dict[str, float]] = field(default_factory=dict)
    #: the cluster's total was zero or unknown, so no queue had a deserved share (proportion)
    cluster_empty: bool = False
    #: Kubernetes events to publish: (kind, "namespace/name" or name, reason, message) (plugins)
    events: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: preemption attempts this cycle (preempt)
    preempt_attempts: int = 0
    #: allocate's counts: tasks tried, placed, pipelined, jobs whose last vain try was taken over
    #: (replayed, actions/helpers.FailureMemo), and its seconds
    allocate_stats: dict[str, float] = field(default_factory=dict)
    #: uids of the jobs allocate did not take this cycle: those it did not reach before the cycle's
    #: budget ran out, and those it had taken earlier in the pass it went on with (allocate)
    unreached: set[str] = field(default_factory=set)
    #: the jobs taken so far in a pass the budget cut short, which the next cycle goes on with
    #: (``Session.pass_taken``); None when the pass ended (or no allocate ran): the next cycle begins one
    pass_taken: frozenset[str] | None = None
    #: seconds to snapshot and open the session (the binary's loop)
    open_session_seconds: float | None = None
    #: action → seconds (the binary's loop)
    action_seconds: dict[str, float] = field(default_factory=dict)
    #: (plugin, "OnSessionOpen" | "OnSessionClose", seconds)
    plugin_seconds: list[tuple[str, str, float]] = field(default_factory=list)
    #: the session's view of the nodes, for /debug/nodes
    node_list: list[NodeInfo] = field(default_factory=list)
    #: the session's view of DRA devices and claims, for /debug/nodes' devices per node (the binary's loop)
    dra: DraView | None = None


@dataclass
class SessionResult:
    """What a closed session hands back to the cache and the binder."""

    placements: list[Placement] = field(default_factory=list)
    #: how many of ``placements`` (the first ones) the session handed over while it ran
    #: (``Session.dispatch``): assumed and given to the binder already
    dispatched: int = 0
    evictions: list[Eviction] = field(default_factory=list)
    jobs: dict[str, JobInfo] = field(default_factory=dict)
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    node_count: int = 0
    duration: float = 0.0
    report: SessionReport = field(default_factory=SessionReport)
    #: the snapshot's ``seq`` and ``changed_jobs``: an observer of the results of consecutive
    #: snapshots (``seq`` one up) may look again only at the jobs named, plus those the sessions
    #: changed (0 and None: not known, look at every job)
    seq: int = 0
    changed_jobs: set[str] | None = None
    #: what the session kept for the next cycle (``framework.carry``): the loop offers it to the
    #: next session once this result has been applied
    kept: dict[object, Any] = field(default_factory=dict)
    #: what the session changed of its snapshot's copies, for the cache to copy afresh: jobs whose
    #: task statuses it changed, nodes whose table rows it wrote or whose tasks it loaded
    touched_jobs: list[str] = field(default_factory=list)
    touched_nodes: list[str] = field(default_factory=list)

    @property
    def undispatched(self) -> list[Placement]:
        """The placements the session did not hand over while it ran: for the loop to assume and bind."""
        return self.placements[self.dispatched :] if self.dispatched else self.placements
