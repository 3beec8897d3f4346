"""The vGPU device model in Volcano's wire format (HAMi-core style sharing): parsing, usage, fitting.

Pure functions and small value classes, shared by the ``deviceshare`` plugin (which decides) and
``metrics.devices`` (which exports what the cluster holds), so neither depends on the other.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from caldera.framework.model import OCCUPYING_STATUSES, TaskInfo
from caldera.framework.objects import Node, Pod
from caldera.framework.quantity import parse_quantity

log = logging.getLogger("caldera.framework.devices")

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
