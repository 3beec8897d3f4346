"""What a session reads: one consistent, private view of the cluster taken at the start of a cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from caldera.framework.dra.view import DraView
from caldera.framework.model import JobInfo, NodeInfo, QueueInfo
from caldera.framework.nodetable import NodeTable
from caldera.framework.numa import NumaView
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    ResourceQuota,
    StorageClass,
)
from caldera.framework.usage import UsageView


@dataclass
class Snapshot:
    jobs: dict[str, JobInfo]
    nodes: dict[str, NodeInfo]
    table: NodeTable
    queues: dict[str, QueueInfo]
    priority_classes: dict[str, int] = field(default_factory=dict)
    hypernodes: dict[str, HyperNode] = field(default_factory=dict)
    #: moves whenever a HyperNode comes, changes or goes (0: not known; a topology built from them
    #: is kept across cycles only while this and the node specs stand still)
    hypernodes_revision: int = 0
    revision: int = 0
    #: the source's revision without changes that cannot change a decision (None: not known)
    decision_revision: int | None = None
    #: changes whenever a node or a pod on a node changed in the source since another snapshot with
    #: the same value (None: not known, e.g. a snapshot built by hand): lets a cycle tell that what
    #: a job found on the nodes last cycle still holds
    node_revision: object = None
    #: the builder's count of snapshots, this one included (0: built by hand)
    seq: int = 0
    #: the uids of the jobs changed, added or removed in the source since its snapshot ``seq - 1``
    #: (None: not known). Any other job's copy here holds what that snapshot's copy held when it
    #: was handed out: a session may redo only these (``Session.jobs_changed_since``).
    changed_jobs: set[str] | None = None
    #: the uids of the jobs with a pending task or in phase Pending (None: not known, look at every
    #: job): every action starts from these (``Session.pending_candidates``)
    pending_jobs: set[str] | None = None
    #: policy/v1 PodDisruptionBudgets by namespace/name (immutable objects, shared)
    pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    #: v1 ResourceQuotas by namespace/name (immutable objects, shared; read by resourcequota)
    resource_quotas: dict[str, ResourceQuota] = field(default_factory=dict)
    #: storage, for the volume predicates: claims by namespace/name, volumes, classes and CSI nodes by name
    pvcs: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    pvs: dict[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csinodes: dict[str, CSINode] = field(default_factory=dict)
    #: Dynamic Resource Allocation: classes, claims, the devices in use and the inventory (an
    #: immutable value shared between snapshots; None: the cluster has no DRA object)
    dra: DraView | None = None
    #: nodes' real load from the conf's metrics source, as of the snapshot's time (an immutable
    #: value; None: no source configured). Read by the usage and rescheduling plugins.
    node_usage: UsageView | None = None
    #: Volcano's Numatopologies by node name, with what the cache assumes taken (an immutable value
    #: shared between snapshots, made anew when any changes; None: the cluster has none)
    numa: NumaView | None = None
    #: the nodes in row order, when the builder has them at hand (else derived from ``nodes``)
    rows: list[NodeInfo] | None = None
    #: how many pods of the cluster carry inter-pod affinity or anti-affinity terms, and the names of
    #: the nodes holding such pods (None: not known, look at every pod). Lets plugins find existing
    #: pods with such terms without reading every pod of every node each cycle.
    affinity_pods: int | None = None
    affinity_nodes: frozenset[str] | None = None
    #: the source's generation of the node specs (names and rows, labels, taints, readiness,
    #: schedulability, allocatable): moves whenever any of those changes (0: not known). What a
    #: session derives from them is kept for the next cycle while it stands (Session.node_memo).
    node_specs: int = 0
    #: the names of the nodes whose tasks the session loaded (their copies hold the session's task
    #: copies): the session's own list, reported in its result (``SessionResult.touched_nodes``)
    loaded_nodes: list[str] = field(default_factory=list)

    def nodes_with_affinity_pods(self, every: list[NodeInfo]) -> list[NodeInfo]:
        """The nodes that may hold pods with inter-pod (anti-)affinity terms, in row order: those the
        builder named, else ``every``."""
        names = self.affinity_nodes
        if names is None:
            return every
        return sorted((self.nodes[n] for n in names if n in self.nodes), key=lambda n: n.row)

    @property
    def node_list(self) -> list[NodeInfo]:
        """Nodes in row order (row i of the table is node_list[i])."""
        if self.rows is not None:
            return self.rows
        out: list[NodeInfo] = [None] * self.table.rows  # type: ignore[list-item]
        for node in self.nodes.values():
            out[node.row] = node
        return out

    @classmethod
    def build(
        cls,
        nodes: list[NodeInfo] | None = None,
        jobs: list[JobInfo] | None = None,
        queues: list[QueueInfo] | None = None,
        priority_classes: dict[str, int] | None = None,
    ) -> Snapshot:
        """A snapshot straight from model objects (tests, benchmarks, tools). The nodes must share one table."""
        node_list = nodes or []
        table = node_list[0].table if node_list else NodeTable()
        snap = cls(
            jobs={j.uid: j for j in jobs or []},
            nodes={n.name: n for n in node_list},
            table=table,
            queues={q.name: q for q in queues or []},
            priority_classes=dict(priority_classes or {}),
        )
        for job in snap.jobs.values():
            for task in job.tasks.values():
                if task.node_name and task.node_name in snap.nodes:
                    snap.nodes[task.node_name].add_task(task)
        return snap
