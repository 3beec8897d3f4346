"""The cluster cache: one incremental, indexed mirror of pods, nodes, PodGroups, queues, priority
classes, disruption budgets, storage objects and HyperNodes, and the per-cycle snapshot a session
reads. Watches (or tests) feed it object by object; it never rebuilds the world.

``ClusterCache`` is composed of rooms, each a module of ``cache/`` named for what it holds, over one
state (``cache/state.py``, every field with its type):

- ``cache/ingest.py``: the watch event handlers (``upsert_*`` / ``delete_*`` of every kind);
- ``cache/indexes.py``: what the cache derives as objects come and go (tasks on nodes, changed marks
  and generations, pending jobs, the pods no session sees and ``problems()``);
- ``cache/snapshot.py``: the copy-on-write slots and the snapshot (``snapshot``, ``snapshot_async``);
- ``cache/assumptions.py``: a session's result assumed (``apply``), confirmed (``confirm_bound``)
  or forgotten (``forget_assumption``, ``forget_eviction``);
- ``cache/dra.py``: DeviceClasses, ResourceSlices and ResourceClaims, the claim allocations assumed
  until the watch shows them, and the snapshot's ``DraView``;
- ``cache/usage.py``: nodes' real load from the conf's metrics source (its poller and sources), and
  the snapshot's ``UsageView``.

This module sets the state (``ClusterCache.__init__``) and holds the read API that code outside
``cache/`` uses (the scheduler, the metrics, the tools): no code outside ``cache/`` reads the
cache's fields.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass

from caldera.cache.assumptions import Assumptions
from caldera.cache.indexes import CacheProblems
from caldera.cache.ingest import Ingest
from caldera.cache.lag import WatchLag
from caldera.cache.snapshot import Snapshots, _Slot
from caldera.cache.state import CacheStats
from caldera.framework.dra.objects import ResourceClaim
from caldera.framework.model import OCCUPYING_STATUSES, NodeInfo, TaskInfo
from caldera.framework.nodetable import NodeTable
from caldera.framework.objects import NativePodGroup, PersistentVolumeClaim, PodGroup, StorageClass
from caldera.framework.usage import DEFAULT_METRICS_INTERVAL


@dataclass(frozen=True)
class CacheCounts:
    """How much the cache holds (for logs and /debug/state)."""

    nodes: int
    jobs: int
    tasks: int
    #: our pods whose PodGroup the cache does not hold (yet)
    waiting_for_podgroup: int


class ClusterCache(Ingest, Snapshots, Assumptions):
    """Thread-safe: watches write from the event loop while a session may be built from a snapshot."""

    def __init__(self, scheduler_names: Iterable[str] = ("caldera",), default_queue: str = "default") -> None:
        # Each field is declared, with its type and what it holds, in cache/state.py.
        self.scheduler_names = frozenset(scheduler_names)
        self.default_queue = default_queue
        self._lock = threading.RLock()
        self.table = NodeTable()
        self.nodes = {}
        self._free_rows = []
        self.jobs = {}
        self.podgroups = {}
        self.native_podgroups = {}
        self.workloads = {}
        self.group_conflicts = {}
        self.native_gang_api = False
        self.queues = {}
        self.priority_classes = {}
        self.default_priority = 0
        self._priority_revision = 0
        self._snapshot_seq = 0
        self._generation = 0
        self._made = None
        self._jobs_changed = set()
        self._changed_priority_revision = 0
        self.hypernodes = {}
        self._hypernodes_revision = 0
        self.pdbs = {}
        self.resource_quotas = {}
        self.numatopologies = {}
        self.numa_assumed = {}
        self._numa_made = None
        self.pvcs = {}
        self.pvs = {}
        self.storage_classes = {}
        self.csinodes = {}
        self.device_classes = {}
        self.resource_slices = {}
        self.resource_claims = {}
        self._assumed_claims = {}
        self._claims_assumed_by = {}
        self._claims_in_flight = {}
        self._claims_written_at = {}
        self._dra_revision = 0
        self._dra_slices_revision = 0
        self._dra_made = None
        self._claims_changed = set()
        self._claim_holds = {}
        self._device_keys = {}
        self._holders = {}
        self._dra_inventory = None
        self._dra_inventory_revision = -1
        self._claim_pods = set()
        self.tasks = {}
        self.waiting = {}
        self._waiting_since = {}
        self.unreadable = {}
        self._problems_revision = 0
        self._problems = (0, 0.0, CacheProblems())
        self.ungrouped = {}
        self._ungrouped_since = {}
        self._affinity = {}
        self._orphans_by_node = {}
        self._slots = (_Slot(), _Slot())
        self._published = None
        self._last_slot = None
        self._unsynced = set()
        self._layout = 0
        self._node_specs = 0
        self._node_revision = 0
        self.revision = 0
        self._settled_changes = 0
        self._pending_jobs = set()
        self.stats = CacheStats()
        self.watch_lag = WatchLag()
        self.node_usage = None
        self._usage_revision = 0
        self._usage_interval = DEFAULT_METRICS_INTERVAL
        self._usage_fresh = -1

    # -- the read API: what code outside cache/ reads of the cache -------------------------------------
    # The ``*_view`` and ``node_infos`` mappings are the cache's own, typed read-only: no copy and no
    # wrapper per call (the status updater reads every job's PodGroup every cycle). They follow the
    # cache as it changes; read them on the event loop (where the cache is written) or inside
    # ``locked()``, and copy what must stay as it is.
    def locked(self) -> AbstractContextManager[object]:
        """Hold the cache still while reading several things of it from another thread (reentrant)."""
        return self._lock

    def counts(self) -> CacheCounts:
        return CacheCounts(
            nodes=len(self.nodes),
            jobs=len(self.jobs),
            tasks=len(self.tasks),
            waiting_for_podgroup=sum(len(v) for v in self.waiting.values()),
        )

    def task(self, uid: str) -> TaskInfo | None:
        """The cache's task for the pod with this uid, or None (a task object is never changed: the
        cache replaces it, so what this returns is a value)."""
        return self.tasks.get(uid)

    def find_task(self, namespace: str, name: str) -> TaskInfo | None:
        """The cache's task for a pod, by name (a scan: for the debug API, not for the cycle)."""
        for task in list(self.tasks.values()):
            if task.name == name and task.namespace == namespace:
                return task
        return None

    def group_placed(self, job: str, but: str = "") -> bool:
        """Whether a pod of job ``job`` other than ``but`` is placed in the scheduler's view: assumed
        (binding), bound, running, or still terminating on its node (KEP-5729 "Deallocate": "the
        scheduler's internal view of PodGroups ... if any of the group's Pods are scheduled")."""
        with self._lock:
            found = self.jobs.get(job)
            if found is None:
                return False
            return any(uid != but and task.status in OCCUPYING_STATUSES for uid, task in found.tasks.items())

    def node_infos(self) -> Mapping[str, NodeInfo]:
        """Every node the cache holds, by name, with the tasks on it (the cache's own objects: read only)."""
        return self.nodes

    def podgroup(self, key: str) -> PodGroup | None:
        """The PodGroup ``namespace/name`` as the cache holds it, or None."""
        return self.podgroups.get(key)

    def podgroups_view(self) -> Mapping[str, PodGroup]:
        """Every PodGroup the cache holds, by ``namespace/name``."""
        return self.podgroups

    def set_native_gang_api(self, served: bool) -> None:
        """Whether ``scheduling.k8s.io/v1alpha2`` PodGroups are watched (``cache/informer.py``'s
        discovery): a pod waiting for a native group is told why."""
        with self._lock:
            if self.native_gang_api != served:
                self.native_gang_api = served
                self._problems_revision += 1

    def native_podgroup(self, key: str) -> NativePodGroup | None:
        """The ``scheduling.k8s.io/v1alpha2`` PodGroup of job key ``key`` (``native_job_key``), or None."""
        return self.native_podgroups.get(key)

    def native_podgroups_view(self) -> Mapping[str, NativePodGroup]:
        """Every ``scheduling.k8s.io/v1alpha2`` PodGroup the cache holds, by job key."""
        return self.native_podgroups

    def pvc(self, key: str) -> PersistentVolumeClaim | None:
        """The PersistentVolumeClaim ``namespace/name`` as the cache holds it, or None."""
        return self.pvcs.get(key)

    def pvcs_view(self) -> Mapping[str, PersistentVolumeClaim]:
        """Every PersistentVolumeClaim the cache holds, by ``namespace/name``."""
        return self.pvcs

    def resource_claim(self, key: str) -> ResourceClaim | None:
        """The ResourceClaim ``namespace/name`` as the watch last showed it, or None."""
        return self.resource_claims.get(key)

    def storage_classes_view(self) -> Mapping[str, StorageClass]:
        """Every StorageClass the cache holds, by name."""
        return self.storage_classes
