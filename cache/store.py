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
  or forgotten (``forget_assumption``, ``forget_eviction``).

This module sets the state (``ClusterCache.__init__``) and holds the read API that code outside
``cache/`` uses (the scheduler, the metrics, the tools): no code outside ``cache/`` reads the
cache's fields.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from caldera.cache.assumptions import Assumptions
from caldera.cache.indexes import CacheProblems
from caldera.cache.ingest import Ingest
from caldera.cache.snapshot import Snapshots, _Slot
from caldera.cache.state import CacheStats
from caldera.framework.nodetable import NodeTable


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
        self.pdbs = {}
        self.pvcs = {}
        self.pvs = {}
        self.storage_classes = {}
        self.csinodes = {}
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
