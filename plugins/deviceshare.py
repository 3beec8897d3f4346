"""deviceshare: vGPU scheduling in Volcano's wire format (HAMi-core style device sharing).

A node shares its GPUs when its allocatable has ``volcano.sh/vgpu-number`` and its
``volcano.sh/node-vgpu-register`` annotation lists the devices (``UUID,count,memoryMiB,type,healthy,mode``
separated by ``:``). A pod asks, per container (limits), for ``volcano.sh/vgpu-number`` devices with
``volcano.sh/vgpu-memory`` MiB (or ``volcano.sh/vgpu-memory-percentage`` of a card) and
``volcano.sh/vgpu-cores`` percent of each. The decision is written on the pod before the bind
(``volcano.sh/vgpu-ids-new`` / ``volcano.sh/devices-to-allocate``: containers separated by ``;``,
each device ``UUID,type,usedMemMiB,usedCores:``); the usage of a device is recomputed from the pods
that carry it, so a restarted scheduler sees exactly what the cluster holds.

The device model (parsing, formatting, usage, fitting) lives in ``framework.devices``, shared with
``metrics.devices``. The plugin builds per-node usage at session open, keeps it in step through the
allocate/deallocate events (so a discarded statement gives its devices back) and puts its decision in
``ssn.task_annotations``, which a committed placement carries to the binder.

Arguments (Volcano's): ``deviceshare.VGPUEnable`` (false), ``deviceshare.SchedulePolicy``
(``binpack`` | ``spread``; default binpack), ``deviceshare.ScheduleWeight`` (10).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from caldera.framework.devices import (
    ASSIGNED_IDS,
    ASSIGNED_NODE,
    ASSIGNED_TIME,
    BIND_PHASE,
    BIND_TIME,
    BINPACK,
    DEVICES_TO_ALLOCATE,
    R_INSUFFICIENT,
    R_NO_DEVICES,
    R_NO_MATCH,
    SPREAD,
    VGPU_MEMORY,
    VGPU_NUMBER,
    Assignment,
    ContainerRequest,
    Filters,
    NodeDevices,
    could_fit,
    fit,
    format_assignment,
    holds_devices,
    node_devices,
    pod_assignment,
    pod_requests,
)
from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.objects import Pod
from caldera.framework.plugin import Plugin, unsupported

if TYPE_CHECKING:
    from caldera.framework.result import Event
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.deviceshare")


def is_vgpu_pod(pod: Pod) -> bool:
    return any(
        VGPU_NUMBER in c.resources.limits or VGPU_MEMORY in c.resources.limits for c in pod.spec.containers
    )


class _SignatureFits:
    """For one request signature: per row, whether it could ever fit (devices only), and the current fit
    (assignment, score) computed at usage version ``seen``."""

    __slots__ = ("could", "ok", "result", "score", "seen")

    def __init__(self, rows: int, could: np.ndarray) -> None:
        self.could = could
        self.ok = np.zeros(rows, dtype=bool)
        self.score = np.zeros(rows)
        self.seen = np.full(rows, -1, dtype=np.int64)
        self.result: dict[int, tuple[Assignment, float] | None] = {}


# --- the plugin ----------------------------------------------------------------------------------------
class DeviceSharePlugin(Plugin):
    name: ClassVar[str] = "deviceshare"
    arguments_schema: ClassVar[dict[str, type]] = {
        "deviceshare.VGPUEnable": bool,
        "deviceshare.SchedulePolicy": str,
        "deviceshare.ScheduleWeight": int,
        # Volcano's other names (pkg/scheduler/plugins/deviceshare/deviceshare.go): only vGPU is implemented
        "deviceshare.GPUSharingEnable": unsupported(
            bool, "GPU sharing by gpu-memory is not implemented", False
        ),
        "deviceshare.GPUNumberEnable": unsupported(bool, "GPU number sharing is not implemented", False),
        "deviceshare.NodeLockEnable": unsupported(bool, "node locks are not implemented", False),
        "deviceshare.AscendMindClusterVNPUEnable": unsupported(bool, "Ascend vNPU is not implemented", False),
        "deviceshare.AscendHAMiVNPUEnable": unsupported(bool, "Ascend vNPU is not implemented", False),
        "deviceshare.KnownGeometriesCMName": unsupported(str, "MIG geometries are not implemented"),
        "deviceshare.KnownGeometriesCMNamespace": unsupported(str, "MIG geometries are not implemented"),
        "deviceshare.GPUExclusiveRules": unsupported(str, "GPU exclusive rules are not implemented"),
    }

    def on_session_open(self, ssn: Session) -> None:
        args = self.arguments
        self.enabled = args.bool("deviceshare.VGPUEnable", False)
        policy = args.str("deviceshare.SchedulePolicy", BINPACK).strip().lower() or BINPACK
        if policy not in (BINPACK, SPREAD):
            log.warning("deviceshare: unknown SchedulePolicy %r, using binpack", policy)
            policy = BINPACK
        self.policy = policy
        self.weight = args.int("deviceshare.ScheduleWeight", 10)
        if not self.enabled:
            return
        self.ssn = ssn
        self.states: dict[str, NodeDevices] = {}
        rows = ssn.table.rows
        self.vgpu_rows = np.zeros(rows, dtype=bool)
        self.row_state: list[NodeDevices | None] = [None] * rows
        #: per node row, bumped whenever its device usage changes in the session
        self.row_version = np.zeros(rows, dtype=np.int64)
        self._rows: dict[str, int] = {}
        self._by_signature: dict[tuple[tuple[ContainerRequest, ...], Filters], _SignatureFits] = {}
        self._requests: dict[str, tuple[tuple[ContainerRequest, ...], Filters]] = {}
        #: task uid → (node, grants) of a holder removed by an eviction, to put back if it is undone
        self._released: dict[str, tuple[str, Assignment]] = {}
        #: task uid → the node whose devices it holds in this session
        self._where: dict[str, str] = {}
        for node in ssn.nodes.values():
            devices = node_devices(node.node)
            if not devices:
                continue
            state = NodeDevices(devices)
            for task in node.tasks.values():
                assignment = self._held(task)
                if assignment is not None:
                    state.add_pod(task.uid, assignment)
                    self._where[task.uid] = node.name
            self.states[node.name] = state
            self.vgpu_rows[node.row] = True
            self.row_state[node.row] = state
            self._rows[node.name] = node.row
        ssn.add_bulk_predicate_fn(self.name, self._nodes_pred, self._nodes_explain, part="nodes", local=True)
        ssn.add_bulk_predicate_fn(
            self.name, self._fit_pred, self._fit_explain, resource=True, part="fit", local=True
        )
        if self.weight:
            ssn.add_bulk_node_order_fn(self.name, self._score, local=True)
        from caldera.framework.session import EventHandler

        ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    def _held(self, task: TaskInfo) -> Assignment | None:
        """The devices a placed pod holds, from its assignment annotation (which the cache keeps on an
        assumed placement until the watch brings the annotated pod back)."""
        if not holds_devices(task):
            return None
        return pod_assignment(task.pod)

    # -- requests ------------------------------------------------------------------------------------
    def _request(self, task: TaskInfo) -> tuple[tuple[ContainerRequest, ...], Filters]:
        entry = self._requests.get(task.uid)
        if entry is None:
            requests = pod_requests(task.pod)
            filters = Filters.of(task.pod.metadata.annotations) if requests else Filters()
            entry = self._requests[task.uid] = (requests, filters)
        return entry

    def _table(self, task: TaskInfo) -> _SignatureFits:
        """The fits of every pod asking exactly what ``task`` asks, over all rows, kept current lazily."""
        signature = self._request(task)
        table = self._by_signature.get(signature)
        if table is None:
            rows = len(self.row_state)
            requests, filters = signature
            could = np.zeros(rows, dtype=bool)
            for row in np.flatnonzero(self.vgpu_rows):
                state = self.row_state[int(row)]
                could[row] = state is not None and could_fit(state.devices, requests, filters)
            table = self._by_signature[signature] = _SignatureFits(rows, could)
        return table

    def _refresh(self, task: TaskInfo, table: _SignatureFits, rows: np.ndarray) -> None:
        """Recompute the fits of ``rows`` whose device usage changed since they were computed."""
        stale = rows[(table.seen[rows] != self.row_version[rows]) & table.could[rows]]
        if not len(stale):
            return
        requests, filters = self._request(task)
        for row in stale.tolist():
            state = self.row_state[row]
            result = fit(state, requests, filters, self.policy) if state is not None else None
            table.result[row] = result
            table.ok[row] = result is not None
            table.score[row] = result[1] if result is not None else 0.0
            table.seen[row] = self.row_version[row]

    def _fit(self, task: TaskInfo, row: int) -> tuple[Assignment, float] | None:
        table = self._table(task)
        self._refresh(task, table, np.asarray([row], dtype=np.intp))
        return table.result.get(row)

    def _touched(self, node_name: str) -> None:
        row = self._rows.get(node_name)
        if row is not None:
            self.row_version[row] += 1

    # -- predicates and score --------------------------------------------------------------------------
    def _nodes_pred(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        if not self._request(task)[0]:
            return np.ones(len(rows), dtype=bool)
        return self._table(task).could[rows]

    def _nodes_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        if not self._request(task)[0]:
            return {}
        no_devices = ~self.vgpu_rows[rows]
        return {R_NO_DEVICES: no_devices, R_NO_MATCH: ~self._table(task).could[rows] & ~no_devices}

    def _fit_pred(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        if not self._request(task)[0]:
            return np.ones(len(rows), dtype=bool)
        table = self._table(task)
        self._refresh(task, table, rows)
        return table.ok[rows] & table.could[rows]

    def _fit_explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        if not self._request(task)[0]:
            return {}
        return {R_INSUFFICIENT: ~self._fit_pred(task, rows)}

    def _score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        if not self._request(task)[0]:
            return np.zeros(len(rows))
        table = self._table(task)
        self._refresh(task, table, rows)
        return np.where(table.ok[rows] & table.could[rows], table.score[rows] * (self.weight / 10.0), 0.0)

    # -- events ---------------------------------------------------------------------------------------
    def _on_allocate(self, event: Event) -> None:
        task = event.task
        state = self.states.get(task.node_name)
        if state is None:
            return
        if task.status == TaskStatus.ALLOCATED:
            if not self._request(task)[0]:
                return
            node = self.ssn.nodes[task.node_name]
            result = self._fit(task, node.row)
            if result is None:
                # The predicates passed a moment ago; only a caller skipping them gets here.
                log.error(
                    "deviceshare: no devices left for %s on %s; placed without vGPU grants",
                    task.key,
                    node.name,
                )
                return
            assignment = result[0]
            state.add_pod(task.uid, assignment)
            self._where[task.uid] = node.name
            self._touched(node.name)
            text = format_assignment(assignment)
            now = str(int(time.time()))
            self.ssn.task_annotations[task.uid] = {
                ASSIGNED_IDS: text,
                DEVICES_TO_ALLOCATE: text,
                ASSIGNED_NODE: node.name,
                ASSIGNED_TIME: now,
                BIND_TIME: now,
                BIND_PHASE: "allocating",
            }
        elif holds_devices(task):
            # An eviction undone: the task holds its devices again.
            released = self._released.pop(task.uid, None)
            if released is not None and released[0] == task.node_name:
                state.add_pod(task.uid, released[1])
                self._where[task.uid] = task.node_name
                self._touched(task.node_name)

    def _on_deallocate(self, event: Event) -> None:
        task = event.task
        self.ssn.task_annotations.pop(task.uid, None)
        name = self._where.pop(task.uid, None)
        if name is None:
            return
        state = self.states.get(name)
        if state is None:
            return
        held = state.holders.get(task.uid, [])
        if task.status == TaskStatus.RELEASING:
            self._released[task.uid] = (name, (tuple(held),))
        state.remove_pod(task.uid)
        self._touched(name)
