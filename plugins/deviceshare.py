"""deviceshare: vGPU scheduling in Volcano's wire format (HAMi-core style device sharing).

A node shares its GPUs when its allocatable has ``volcano.sh/vgpu-number`` and its
``volcano.sh/node-vgpu-register`` annotation lists the devices (``UUID,count,memoryMiB,type,healthy,mode``
separated by ``:``). A pod asks, per container (limits), for ``volcano.sh/vgpu-number`` devices with
``volcano.sh/vgpu-memory`` MiB (or ``volcano.sh/vgpu-memory-percentage`` of a card) and
``volcano.sh/vgpu-cores`` percent of each. The decision is written on the pod before the bind
(``volcano.sh/vgpu-ids-new`` / ``volcano.sh/devices-to-allocate``: containers separated by ``;``,
each device ``UUID,type,usedMemMiB,usedCores:``); the usage of a device is recomputed from the pods
that carry it, so a restarted scheduler sees exactly what the cluster holds.

The device model (parsing, formatting, usage, fitting) is pure functions and small value classes, shared
with ``metrics.devices``. The plugin builds per-node usage at session open, keeps it in step through the
allocate/deallocate events (so a discarded statement gives its devices back) and puts its decision in
``ssn.task_annotations``, which a committed placement carries to the binder.

Arguments (Volcano's): ``deviceshare.VGPUEnable`` (false), ``deviceshare.SchedulePolicy``
(``binpack`` | ``spread``; default binpack), ``deviceshare.ScheduleWeight`` (10).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from framework.model import OCCUPYING_STATUSES, TaskInfo, TaskStatus
from framework.objects import Node, Pod
from framework.plugin import Plugin
from framework.quantity import parse_quantity

if TYPE_CHECKING:
    from framework.session import Event, Session

log = logging.getLogger("caldera.plugins.deviceshare")

# --- wire format (Volcano / HAMi) -----------------------------------------------------------------------
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
VGPU_MEMORY_PERCENTAGE = "volcano.sh/vgpu-memory-percentage"
VGPU_CORES = "volcano.sh/vgpu-cores"
NODE_REGISTER = "volcano.sh/node-vgpu-register"

ASSIGNED_IDS = "volcano.sh/vgpu-ids-new"
DEVICES_TO_ALLOCATE = "volcano.sh/devices-to-allocate"
ASSIGNED_NODE = "volcano.sh/vgpu-node"
ASSIGNED_TIME = "volcano.sh/vgpu-time"
BIND_PHASE = "volcano.sh/bind-phase"
BIND_TIME = "volcano.sh/bind-time"

USE_GPU_TYPE = "nvidia.com/use-gputype"
NOUSE_GPU_TYPE = "nvidia.com/nouse-gputype"
USE_GPU_UUID = "volcano.sh/vgpu-use-gpuuuid"
NOUSE_GPU_UUID = "volcano.sh/vgpu-nouse-gpuuuid"

DEVICE_TYPE = "NVIDIA"
FULL_CORES = 100
MODES = frozenset({"hami-core", "mig", "mps"})

BINPACK = "binpack"
SPREAD = "spread"

R_NO_DEVICES = "node(s) had no vGPU devices"
R_NO_MATCH = "node(s) had no vGPU devices matching the request"
R_INSUFFICIENT = "node(s) didn't have enough free vGPU devices"


# --- the model ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Device:
    """One physical GPU as the device plugin registered it."""

    uuid: str
    index: int
    count: int  # how many grants may share it
    memory: int  # MiB
    type: str
    healthy: bool
    mode: str


@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """One container's vGPU request. ``memory`` 0 with ``percentage`` None means the whole card."""

    number: int
    memory: int = 0
    percentage: int | None = None
    cores: int = 0

    def memory_on(self, device: Device) -> int:
        if self.memory > 0:
            return self.memory
        if self.percentage is not None:
            return device.memory * self.percentage // 100
        return device.memory


@dataclass(frozen=True, slots=True)
class Grant:
    """One device given to one container: ``UUID,type,usedMemMiB,usedCores``."""

    uuid: str
    type: str
    memory: int
    cores: int


Assignment = tuple[tuple[Grant, ...], ...]  # per container, its grants


@dataclass(slots=True)
class PodShare:
    memory: int = 0
    cores: int = 0
    grants: int = 0


@dataclass(slots=True)
class DeviceUsage:
    """What the pods on a node hold of one device."""

    memory: int = 0
    cores: int = 0
    grants: int = 0
    pods: dict[str, PodShare] = field(default_factory=dict)

    def copy(self) -> DeviceUsage:
        return DeviceUsage(
            self.memory,
            self.cores,
            self.grants,
            {k: PodShare(v.memory, v.cores, v.grants) for k, v in self.pods.items()},
        )


class NodeDevices:
    """A node's devices and their usage, by the pods (keyed by any stable id) that hold grants."""

    __slots__ = ("by_uuid", "devices", "holders", "usage", "version")

    def __init__(self, devices: tuple[Device, ...]) -> None:
        self.devices = devices
        self.by_uuid = {d.uuid: d for d in devices}
        self.usage: dict[str, DeviceUsage] = {d.uuid: DeviceUsage() for d in devices}
        #: pod id → the grants it holds here (exactly what was added, so removal is exact)
        self.holders: dict[str, list[Grant]] = {}
        #: bumped on every change, so fits computed against older usage are recomputed
        self.version = 0

    def add_pod(self, pod_id: str, assignment: Assignment) -> None:
        if pod_id in self.holders:
            self.remove_pod(pod_id)
        self.version += 1
        held: list[Grant] = []
        for container in assignment:
            for grant in container:
                usage = self.usage.get(grant.uuid)
                if usage is None:
                    continue  # a device this node no longer registers: nothing of it to account
                usage.memory += grant.memory
                usage.cores += grant.cores
                usage.grants += 1
                share = usage.pods.get(pod_id)
                if share is None:
                    share = usage.pods[pod_id] = PodShare()
                share.memory += grant.memory
                share.cores += grant.cores
                share.grants += 1
                held.append(grant)
        self.holders[pod_id] = held

    def remove_pod(self, pod_id: str) -> None:
        held = self.holders.pop(pod_id, None)
        if not held:
            return
        self.version += 1
        for grant in held:
            usage = self.usage[grant.uuid]
            usage.memory -= grant.memory
            usage.cores -= grant.cores
            usage.grants -= 1
            usage.pods.pop(pod_id, None)

    def copy(self) -> NodeDevices:
        out = NodeDevices.__new__(NodeDevices)
        out.devices = self.devices
        out.by_uuid = self.by_uuid
        out.usage = {k: v.copy() for k, v in self.usage.items()}
        out.holders = {k: list(v) for k, v in self.holders.items()}
        out.version = self.version
        return out


# --- parsing and formatting ------------------------------------------------------------------------------
@lru_cache(maxsize=4096)
def parse_register(node_name: str, text: str) -> tuple[Device, ...]:
    """The devices of a ``node-vgpu-register`` annotation; malformed → no devices (and a log line)."""
    devices: list[Device] = []
    seen: set[str] = set()
    for index, entry in enumerate(part for part in text.split(":") if part.strip()):
        items = [item.strip() for item in entry.split(",")]
        try:
            if len(items) < 6:
                raise ValueError(f"{len(items)} fields, expected 6")
            uuid, count, memory, kind, healthy, mode = items[:6]
            if not uuid:
                raise ValueError("empty UUID")
            if uuid in seen:
                raise ValueError(f"duplicate UUID {uuid}")
            if healthy.lower() not in ("true", "false"):
                raise ValueError(f"health {healthy!r} is not true/false")
            device = Device(
                uuid=uuid,
                index=index,
                count=int(count),
                memory=int(memory),
                type=kind,
                healthy=healthy.lower() == "true",
                mode=mode if mode in MODES else "hami-core",
            )
            if device.count < 0 or device.memory < 0:
                raise ValueError("negative count or memory")
        except ValueError as exc:
            log.warning(
                "node %s: malformed %s entry %r (%s): no vGPU devices used",
                node_name,
                NODE_REGISTER,
                entry,
                exc,
            )
            return ()
        seen.add(uuid)
        devices.append(device)
    return tuple(devices)


def _positive(value: object) -> bool:
    try:
        return float(parse_quantity(value)) > 0  # type: ignore[arg-type]
    except Exception:
        return False


def node_devices(node: Node) -> tuple[Device, ...]:
    """A vGPU node's devices: allocatable ``volcano.sh/vgpu-number`` above zero and a register annotation."""
    alloc = node.status.allocatable or node.status.capacity
    text = node.metadata.annotations.get(NODE_REGISTER)
    if not text or not _positive(alloc.get(VGPU_NUMBER, 0)):
        return ()
    return parse_register(node.metadata.name, text)


def _int(value: object) -> int:
    return int(parse_quantity(value))  # type: ignore[arg-type]


def pod_requests(pod: Pod) -> tuple[ContainerRequest, ...]:
    """Per container asking for vGPU (``vgpu-number`` or ``vgpu-memory`` in its limits), its request.
    An unreadable quantity makes the request impossible (number above any node) rather than ignored."""
    out: list[ContainerRequest] = []
    for container in pod.spec.containers:
        limits = container.resources.limits
        requests = container.resources.requests
        if VGPU_NUMBER not in limits and VGPU_MEMORY not in limits:
            continue

        def get(
            name: str, limits: Mapping[str, object] = limits, requests: Mapping[str, object] = requests
        ) -> object:
            return limits[name] if name in limits else requests.get(name)

        try:
            number = _int(limits[VGPU_NUMBER]) if VGPU_NUMBER in limits else 1
            memory = get(VGPU_MEMORY)
            percentage = get(VGPU_MEMORY_PERCENTAGE)
            cores = get(VGPU_CORES)
            out.append(
                ContainerRequest(
                    number=max(0, number),
                    memory=max(0, _int(memory)) if memory is not None else 0,
                    percentage=min(100, max(0, _int(percentage))) if percentage is not None else None,
                    cores=min(FULL_CORES, max(0, _int(cores))) if cores is not None else 0,
                )
            )
        except Exception as exc:
            log.warning(
                "pod %s/%s: unreadable vGPU request (%s)", pod.metadata.namespace, pod.metadata.name, exc
            )
            out.append(ContainerRequest(number=1 << 30))
    return tuple(out)


def format_assignment(assignment: Assignment) -> str:
    """Volcano's encoding: each grant ``UUID,type,mem,cores:``, containers joined by ``;``."""
    return ";".join(
        "".join(f"{g.uuid},{g.type},{g.memory},{g.cores}:" for g in container) for container in assignment
    )


@lru_cache(maxsize=65536)
def parse_assignment(text: str) -> Assignment:
    """Decode ``format_assignment``'s text; malformed grants are skipped (and logged)."""
    containers: list[tuple[Grant, ...]] = []
    for container in text.split(";"):
        grants: list[Grant] = []
        for entry in container.split(":"):
            if not entry.strip():
                continue
            items = entry.split(",")
            try:
                if len(items) < 4 or not items[0]:
                    raise ValueError(f"{len(items)} fields")
                grants.append(Grant(items[0], items[1], int(items[2]), int(items[3])))
            except ValueError as exc:
                log.warning("malformed vGPU grant %r (%s): ignored", entry, exc)
        containers.append(tuple(grants))
    return tuple(containers)


def pod_assignment(pod: Pod) -> Assignment | None:
    """The devices a pod holds according to its own annotations, or None."""
    annotations = pod.metadata.annotations
    text = annotations.get(ASSIGNED_IDS) or annotations.get(DEVICES_TO_ALLOCATE)
    if not text:
        return None
    return parse_assignment(text)


def holds_devices(task: TaskInfo) -> bool:
    """Tasks whose grants count on their node: placed, bound, running or on their way out."""
    return task.status in OCCUPYING_STATUSES


def build_node_devices(devices: tuple[Device, ...], holders: Iterable[tuple[str, Assignment]]) -> NodeDevices:
    state = NodeDevices(devices)
    for pod_id, assignment in holders:
        state.add_pod(pod_id, assignment)
    return state


# --- fitting -------------------------------------------------------------------------------------------
def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@dataclass(frozen=True, slots=True)
class Filters:
    use_types: tuple[str, ...] = ()
    nouse_types: tuple[str, ...] = ()
    use_uuids: frozenset[str] = frozenset()
    nouse_uuids: frozenset[str] = frozenset()

    @classmethod
    def of(cls, annotations: Mapping[str, str]) -> Filters:
        return cls(
            tuple(v.upper() for v in _split(annotations.get(USE_GPU_TYPE))),
            tuple(v.upper() for v in _split(annotations.get(NOUSE_GPU_TYPE))),
            frozenset(_split(annotations.get(USE_GPU_UUID))),
            frozenset(_split(annotations.get(NOUSE_GPU_UUID))),
        )

    def allows(self, device: Device) -> bool:
        kind = device.type.upper()
        if DEVICE_TYPE not in kind:
            return False
        if self.use_types and not any(t in kind for t in self.use_types):
            return False
        if any(t in kind for t in self.nouse_types):
            return False
        if self.use_uuids and device.uuid not in self.use_uuids:
            return False
        return device.uuid not in self.nouse_uuids


def _device_takes(device: Device, usage: DeviceUsage, request: ContainerRequest) -> int | None:
    """The memory this device would grant the request now, or None when it cannot take it."""
    if not device.healthy or usage.grants >= device.count:
        return None
    memory = request.memory_on(device)
    if device.memory - usage.memory < memory:
        return None
    if usage.cores + request.cores > FULL_CORES:
        return None
    if request.cores == FULL_CORES and usage.grants > 0:
        return None  # a whole card's cores means the card alone
    if usage.cores >= FULL_CORES and request.cores == 0:
        return None  # a card whose cores are all given takes no more sharers
    return memory


def could_fit(devices: tuple[Device, ...], requests: tuple[ContainerRequest, ...], filters: Filters) -> bool:
    """Whether an empty node of these devices could ever take the request (usage ignored)."""
    for request in requests:
        fitting = 0
        for d in devices:
            if d.healthy and d.count > 0 and filters.allows(d) and request.memory_on(d) <= d.memory:
                fitting += 1
        if fitting < request.number:
            return False
    return True


def fit(
    state: NodeDevices, requests: tuple[ContainerRequest, ...], filters: Filters, policy: str
) -> tuple[Assignment, float] | None:
    """Devices for every container (distinct devices within a container; later containers see the
    earlier ones' grants), chosen by policy, and the node's score in [0, 100]; None when it does not fit.
    binpack prefers the fullest devices (by memory after the grant), spread the emptiest."""
    usage = {uuid: DeviceUsage(u.memory, u.cores, u.grants) for uuid, u in state.usage.items()}
    containers: list[tuple[Grant, ...]] = []
    fullness: list[float] = []
    for request in requests:
        candidates: list[tuple[float, int, Device, int]] = []
        for device in state.devices:
            if not filters.allows(device):
                continue
            u = usage[device.uuid]
            memory = _device_takes(device, u, request)
            if memory is None:
                continue
            after = (u.memory + memory) / device.memory if device.memory else 1.0
            key = -after if policy == BINPACK else after
            candidates.append((key, device.index, device, memory))
        if len(candidates) < request.number:
            return None
        candidates.sort(key=lambda c: (c[0], c[1]))
        grants: list[Grant] = []
        for _, _, device, memory in candidates[: request.number]:
            u = usage[device.uuid]
            u.memory += memory
            u.cores += request.cores
            u.grants += 1
            grants.append(Grant(device.uuid, DEVICE_TYPE, memory, request.cores))
            fullness.append(u.memory / device.memory if device.memory else 1.0)
        containers.append(tuple(grants))
    if not fullness:
        return tuple(containers), 0.0
    mean = sum(fullness) / len(fullness)
    score = 100.0 * (mean if policy == BINPACK else 1.0 - mean)
    return tuple(containers), max(0.0, min(100.0, score))


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
        "deviceshare.GPUSharingEnable": bool,
        "deviceshare.GPUNumberEnable": bool,
        "deviceshare.NodeLockEnable": bool,
        "deviceshare.*": str,
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
        from framework.session import EventHandler

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
