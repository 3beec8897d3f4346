"""What a session reads: one consistent, private view of the cluster taken at the start of a cycle."""

from __future__ import annotations

from dataclasses import dataclass, field

from caldera.framework.model import JobInfo, NodeInfo, QueueInfo
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import (
    CSINode,
    HyperNode,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    StorageClass,
)


@dataclass
class Snapshot:
    jobs: dict[str, JobInfo]
    nodes: dict[str, NodeInfo]
    table: NodeTable
    queues: dict[str, QueueInfo]
    priority_classes: dict[str, int] = field(default_factory=dict)
    hypernodes: dict[str, HyperNode] = field(default_factory=dict)
    revision: int = 0
    #: policy/v1 PodDisruptionBudgets by namespace/name (immutable objects, shared)
    pdbs: dict[str, PodDisruptionBudget] = field(default_factory=dict)
    #: storage, for the volume predicates: claims by namespace/name, volumes, classes and CSI nodes by name
    pvcs: dict[str, PersistentVolumeClaim] = field(default_factory=dict)
    pvs: dict[str, PersistentVolume] = field(default_factory=dict)
    storage_classes: dict[str, StorageClass] = field(default_factory=dict)
    csinodes: dict[str, CSINode] = field(default_factory=dict)
    #: the nodes in row order, when the builder has them at hand (else derived from ``nodes``)
    rows: list[NodeInfo] | None = None
    #: names of the nodes holding a pod with required pod anti-affinity terms (None: not known, look
    #: at every node); lets the predicates find existing anti-affinity without reading every pod
    anti_affinity_nodes: frozenset[str] | None = None

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
