"""The cache's state, declared once: every field the rooms of ``cache/`` read and write, with its type
and what it holds. ``CacheState`` is the base of the rooms (``ingest``, ``indexes``, ``snapshot``,
``assumptions``, each a mixin over it); ``store.ClusterCache`` composes them and sets the fields in
its ``__init__``. ``CacheStats`` counts the cache's work (skipped objects, snapshots, copies).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from caldera.cache.indexes import CacheProblems, GroupConflict, UnreadablePod
    from caldera.cache.lag import WatchLag
    from caldera.cache.snapshot import _Slot
    from caldera.framework.dra.allocator import DeviceID, Inventory
    from caldera.framework.dra.objects import DeviceClass, ResourceClaim, ResourceSlice
    from caldera.framework.dra.view import DraView
    from caldera.framework.model import JobInfo, NodeInfo, QueueInfo, TaskInfo
    from caldera.framework.nodetable import NodeTable
    from caldera.framework.numa import NumaInfo, NumaView, PodMeta, ResNumaSets
    from caldera.framework.objects import (
        CSINode,
        HyperNode,
        NativePodGroup,
        PersistentVolume,
        PersistentVolumeClaim,
        PodDisruptionBudget,
        PodGroup,
        ResourceQuota,
        StorageClass,
        Workload,
    )
    from caldera.framework.snapshot import Snapshot
    from caldera.framework.usage import NodeUsage


@dataclass
class CacheStats:
    skipped_objects: int = 0
    snapshots: int = 0
    reused_jobs: int = 0
    copied_jobs: int = 0
    reused_nodes: int = 0
    copied_nodes: int = 0
    errors: list[str] = field(default_factory=list)


class CacheState:
    """Every field of the cache (set by ``ClusterCache.__init__``). Thread-safe through ``_lock``:
    watches write from the event loop while a session may be built from a snapshot."""

    scheduler_names: frozenset[str]
    default_queue: str
    _lock: threading.RLock
    table: NodeTable
    nodes: dict[str, NodeInfo]
    _free_rows: list[int]
    jobs: dict[str, JobInfo]
    podgroups: dict[str, PodGroup]
    #: ``scheduling.k8s.io/v1alpha2`` PodGroups by job key (``model.native_job_key``)
    native_podgroups: dict[str, NativePodGroup]
    #: ``scheduling.k8s.io/v1alpha2`` Workloads by namespace/name (their PodGroup templates)
    workloads: dict[str, Workload]
    #: our pods that name both a native group (``spec.schedulingGroup``) and a Volcano PodGroup
    #: (the group-name annotation), by pod uid: the native group wins, the conflict is reported
    group_conflicts: dict[str, GroupConflict]
    #: whether ``scheduling.k8s.io/v1alpha2`` PodGroups are watched (the server serves them)
    native_gang_api: bool
    queues: dict[str, QueueInfo]
    priority_classes: dict[str, int]
    default_priority: int
    _priority_revision: int
    #: snapshots taken so far, and the jobs changed (added, removed) since the last one: a
    #: session's plugins redo only those (``Snapshot.changed_jobs``)
    _snapshot_seq: int
    #: the last generation stamped on a job (``JobInfo.generation``, ``framework.carry``)
    _generation: int
    #: the snapshot the last ``_snapshot_steps`` made
    _made: Snapshot | None
    _jobs_changed: set[str] | None
    _changed_priority_revision: int
    hypernodes: dict[str, HyperNode]
    #: bumped whenever a HyperNode comes, changes or goes (``Snapshot.hypernodes_revision``)
    _hypernodes_revision: int
    #: policy/v1 PodDisruptionBudgets by namespace/name (read by the pdb plugin)
    pdbs: dict[str, PodDisruptionBudget]
    #: v1 ResourceQuotas by namespace/name (read by the resourcequota plugin)
    resource_quotas: dict[str, ResourceQuota]
    #: nodeinfo.volcano.sh/v1alpha1 Numatopologies, read once into their lean value, by node name
    #: (cache/numa.py; read by the numa-aware plugin)
    numatopologies: dict[str, NumaInfo]
    #: node -> pod -> the NUMA sets a committed placement took there, until the exporter reports the
    #: pod (Volcano's NodeInfo.UnassignedNumaPods)
    numa_assumed: dict[str, dict[PodMeta, ResNumaSets]]
    #: the snapshot's NumaView, until a Numatopology or an assumption changes
    _numa_made: NumaView | None
    #: storage objects (the volume predicates and the binder's volume step read them)
    pvcs: dict[str, PersistentVolumeClaim]
    pvs: dict[str, PersistentVolume]
    storage_classes: dict[str, StorageClass]
    csinodes: dict[str, CSINode]
    #: resource.k8s.io/v1 objects (cache/dra.py): classes and slices by name, claims by namespace/name
    device_classes: dict[str, DeviceClass]
    resource_slices: dict[str, ResourceSlice]
    resource_claims: dict[str, ResourceClaim]
    #: claims as the binder will write them (allocated, reserved), by namespace/name, until the watch
    #: shows our write or the placement is given up; which pod's placement assumed which (with the
    #: uid it reserved them for: the pod's, or its PodGroup's); per claim, how many of those
    #: placements are still with the binder, and the resourceVersion its write of the claim returned
    #: (``cache/dra.py``, ``upsert_resource_claim``)
    _assumed_claims: dict[str, ResourceClaim]
    _claims_assumed_by: dict[str, list[tuple[str, str]]]
    _claims_in_flight: dict[str, int]
    _claims_written_at: dict[str, int]
    #: bumped whenever a class, slice, claim or assumed claim changes; the slices' own revision
    _dra_revision: int
    _dra_slices_revision: int
    #: claims (watched or assumed) changed since the last view, and what the views' holders are
    #: kept from (``_holders_now``): the devices each claim holds, the claims holding each device
    _claims_changed: set[str]
    _claim_holds: dict[str, list[DeviceID]]
    _device_keys: dict[DeviceID, dict[str, None]]
    _holders: dict[DeviceID, str]
    #: the last view made (``dra_view``), and the inventory with the slices revision it was built at
    _dra_made: DraView | None
    _dra_inventory: Inventory | None
    _dra_inventory_revision: int
    #: our pods that use ResourceClaims, by uid (for ``problems()``: those whose claims are missing)
    _claim_pods: set[str]
    #: every task the cache knows, ours or not, by pod uid
    tasks: dict[str, TaskInfo]
    #: our pods whose PodGroup does not exist (yet), by job key
    waiting: dict[str, dict[str, TaskInfo]]
    #: when each key of ``waiting`` started waiting (monotonic seconds)
    _waiting_since: dict[str, float]
    #: our pods that cannot be read, by pod uid
    unreadable: dict[str, UnreadablePod]
    #: bumped whenever ``waiting`` or ``unreadable`` changes, so ``problems()`` is rebuilt only then
    _problems_revision: int
    _problems: tuple[int, float, CacheProblems]
    #: our pods with no group annotation at all (for the PodGroup controller)
    ungrouped: dict[str, TaskInfo]
    #: when each pod of ``ungrouped`` was first seen without a group (monotonic seconds)
    _ungrouped_since: dict[str, float]
    #: tasks whose pods carry inter-pod affinity or anti-affinity terms, by uid (usually few)
    _affinity: dict[str, TaskInfo]
    #: tasks bound to a node the cache has not seen (yet), by node name
    _orphans_by_node: dict[str, dict[str, TaskInfo]]
    #: two sets of session copies handed out in turn (see ``cache/snapshot.py``)
    _slots: tuple[_Slot, _Slot]
    #: the slot of the last session whose result was applied (its readers may still hold it)
    _published: _Slot | None
    _last_slot: _Slot | None
    #: nodes whose usage changed since their table row was last written: the rows are written
    #: once each, before a snapshot copies the table (a cycle's placements and the watch's
    #: updates touch the same nodes many times between two snapshots)
    _unsynced: set[str]
    #: bumped when a node is added or deleted (rows of the snapshot's table move)
    _layout: int
    #: bumped when a node is added or deleted or its labels, taints, readiness, schedulability or
    #: allocatable change: sessions keep what they derive from those while it stands still
    _node_specs: int
    #: bumped whenever a node or a pod on a node changes (with ``_layout``: the snapshot's node_revision)
    _node_revision: int
    revision: int
    #: changes counted in ``revision`` that cannot change a scheduling decision (see
    #: :attr:`decision_revision`)
    _settled_changes: int
    #: keys of the jobs with pending pods or in phase Pending (kept by _job_changed)
    _pending_jobs: set[str]
    stats: CacheStats
    #: how late the pod watch brings this replica's binds back (cache/lag.py)
    watch_lag: WatchLag
    #: nodes' real load from the conf's metrics source (cache/usage.py), a mapping never changed once
    #: made; None while no source is configured
    node_usage: dict[str, NodeUsage] | None
    #: moves when a node's cpu or memory usage changes (``UsageView.revision``)
    _usage_revision: int
    #: the source's poll interval in seconds (``UsageView.interval``)
    _usage_interval: float
    #: how many nodes had fresh usage at the last poll (-1: not counted yet)
    _usage_fresh: int
