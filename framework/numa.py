"""Volcano's Numatopology objects (``nodeinfo.volcano.sh/v1alpha1``) as the scheduler reads them.

Volcano's resource-exporter writes one cluster-scoped ``Numatopology`` per node (named as the node):
the kubelet's CPU and topology manager policies, the node's CPUs with their NUMA node, socket and
core, the CPUs still allocatable, the resources the kubelet reserves, and the pods it has given NUMA
resources (``volcano.sh/apis`` ``pkg/apis/nodeinfo/v1alpha1/numatopo_types.go``). The watch decodes
each object once into :class:`Numatopology` (only the fields the scheduler reads: a pod allocation's
per-container sets are skipped), and the cache turns it at once into a :class:`NumaInfo`, the lean
immutable value snapshots carry (Volcano's ``getNumaInfo`` in ``pkg/scheduler/cache/event_handlers.go``
and ``api.NumatopoInfo`` in ``pkg/scheduler/api/numa_info.go``).

What a cycle assigned and the exporter has not reported yet stays taken: :func:`with_assumed` is
Volcano's ``NodeInfo.RefreshNumaSchedulerInfoByCrd`` (``pkg/scheduler/api/node_info.go``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import msgspec

from caldera.framework.objects import ObjectMeta
from caldera.framework.quantity import QuantityError, parse_cpu_millis

log = logging.getLogger("caldera.numa")

#: the keys of ``spec.policies`` (Volcano's ``nodeinfov1alpha1.CPUManagerPolicy`` / ``TopologyManagerPolicy``)
CPU_MANAGER_POLICY = "CPUManagerPolicy"
TOPOLOGY_MANAGER_POLICY = "TopologyManagerPolicy"
#: the pod annotation naming the pod's topology policy (volcano.sh/apis ``v1beta1.NumaPolicyKey``)
NUMA_POLICY_ANNOTATION = "volcano.sh/numa-topology-policy"
CPU = "cpu"


# --- the object, as decoded from the watch ----------------------------------------------------------
class CPUInfo(msgspec.Struct, frozen=True, gc=False):
    numa: int = 0
    socket: int = 0
    core: int = 0


class NumaResource(msgspec.Struct, frozen=True, gc=False):
    #: a Linux CPU list ("0-3,8")
    allocatable: str = ""
    capacity: int = 0


class PodAllocation(msgspec.Struct, frozen=True, gc=False):
    """Which pod the kubelet has given NUMA resources (its per-container sets are not read)."""

    uid: str = ""
    name: str = ""
    namespace: str = ""


class NumatopoSpec(msgspec.Struct, frozen=True, gc=False):
    policies: dict[str, str] = {}
    res_reserved: dict[str, str] = msgspec.field(default_factory=dict, name="resReserved")
    numares: dict[str, NumaResource] = {}
    cpu_detail: dict[str, CPUInfo] = msgspec.field(default_factory=dict, name="cpuDetail")
    pod_allocations: list[PodAllocation] = msgspec.field(default_factory=list, name="podAllocations")


class Numatopology(msgspec.Struct, frozen=True, gc=False):
    metadata: ObjectMeta = ObjectMeta()
    spec: NumatopoSpec = NumatopoSpec()


# --- CPU sets ---------------------------------------------------------------------------------------
class CPUSetError(ValueError):
    """A CPU list that ``k8s.io/utils/cpuset.Parse`` refuses."""


def parse_cpuset(text: str) -> frozenset[int]:
    """A Linux CPU list ("0-3,8,10-11") as ``cpuset.Parse`` reads it: empty is the empty set, a
    range's end must not be below its start."""
    out: set[int] = set()
    if text == "":
        return frozenset()
    for part in text.split(","):
        lo, dash, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if dash else first
        except ValueError:
            raise CPUSetError(f"invalid CPU list {text!r}: {part!r} is not a number or a range") from None
        if first < 0 or last < first:
            raise CPUSetError(f"invalid CPU list {text!r}: bad range {part!r}")
        out.update(range(first, last + 1))
    return frozenset(out)


def format_cpuset(cpus: frozenset[int] | set[int]) -> str:
    """The CPU list form of a set ("0-3,8"), as ``cpuset.CPUSet.String`` writes it."""
    ordered = sorted(cpus)
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


#: resource name -> the CPUs (ids) of that resource: Volcano's ``api.ResNumaSets``
ResNumaSets = Mapping[str, frozenset[int]]


class PodMeta(NamedTuple):
    """Volcano's ``api.PodMeta``: how an assignment is matched to the exporter's pod allocations."""

    uid: str
    name: str
    namespace: str


# --- the lean value snapshots carry ---------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class NumaInfo:
    """One node's Numatopology: Volcano's ``api.NumatopoInfo``. Immutable; shared between snapshots."""

    name: str
    #: ``CPUManagerPolicy`` / ``TopologyManagerPolicy`` -> the kubelet's policy ("static", "single-numa-node", ...)
    policies: Mapping[str, str]
    #: resource name -> the ids still allocatable (``numares[...].allocatable``), what this
    #: scheduler assigned and the exporter has not reported yet taken out (``with_assumed``)
    free: Mapping[str, frozenset[int]]
    capacity: Mapping[str, int]
    #: cpu id -> (NUMA node, socket, core)
    cpus: Mapping[int, tuple[int, int, int]]
    #: how many CPUs the kubelet reserves (``resReserved.cpu``, rounded up), None when not given
    reserved_cpus: int | None
    #: the pods the exporter reports as given NUMA resources: by uid, and by namespace/name
    reported_uids: frozenset[str] = frozenset()
    reported_names: frozenset[tuple[str, str]] = frozenset()
    #: the NUMA node ids, ascending (``CPUDetails.NUMANodes().List()``)
    numa_nodes: tuple[int, ...] = field(default=())

    @property
    def cpu_manager_policy(self) -> str:
        return self.policies.get(CPU_MANAGER_POLICY, "")

    @property
    def topology_policy(self) -> str:
        return self.policies.get(TOPOLOGY_MANAGER_POLICY, "")

    def reported(self, pod: PodMeta) -> bool:
        """Volcano's ``NumatopoInfo.CheckNumaPodAssigned``: the uid or the namespace/name matches."""
        return pod.uid in self.reported_uids or (pod.namespace, pod.name) in self.reported_names

    def taken(self, sets: ResNumaSets) -> NumaInfo:
        """A copy with ``sets`` no longer free (``NumatopoInfo.Allocate``; names it lacks are skipped)."""
        free = dict(self.free)
        for name, ids in sets.items():
            if name in free:
                free[name] = free[name] - ids
        return replace(self, free=free)


def numa_info(obj: Numatopology) -> NumaInfo | None:
    """The lean value of one object (Volcano's ``getNumaInfo``). A part it cannot read is logged once
    (for this object) and left out, as Volcano does: a bad CPU list is an empty one, an unreadable
    ``resReserved`` none. ``None`` (logged) when the object cannot describe a node at all."""
    name = obj.metadata.name
    spec = obj.spec
    problems: list[str] = []
    free: dict[str, frozenset[int]] = {}
    capacity: dict[str, int] = {}
    for res, info in spec.numares.items():
        try:
            free[res] = parse_cpuset(info.allocatable)
        except CPUSetError as exc:
            problems.append(f"numares[{res}]: {exc}")
            free[res] = frozenset()
        capacity[res] = info.capacity
    cpus: dict[int, tuple[int, int, int]] = {}
    for key, detail in spec.cpu_detail.items():
        try:
            cpu = int(key)
        except ValueError:
            problems.append(f"cpuDetail key {key!r} is not a CPU id")
            continue
        if not 0 <= detail.numa < 64:
            # kubelet's bitmask holds NUMA ids 0-63 only
            log.warning(
                "Numatopology %s: cpu %d is on NUMA node %d (0-63 only); ignoring the object",
                name,
                cpu,
                detail.numa,
            )
            return None
        cpus[cpu] = (detail.numa, detail.socket, detail.core)
    reserved: int | None = None
    if CPU in spec.res_reserved:
        try:
            # ParseResourceList: one bad quantity and none of the list is read
            for value in spec.res_reserved.values():
                parse_cpu_millis(value)
            reserved = math.ceil(parse_cpu_millis(spec.res_reserved[CPU]) / 1000)
        except QuantityError as exc:
            problems.append(f"resReserved: {exc}")
    if problems:
        log.warning(
            "Numatopology %s: %s (read as Volcano does: the part left empty)", name, "; ".join(problems)
        )
    allocs = spec.pod_allocations
    return NumaInfo(
        name=name,
        policies=dict(spec.policies),
        free=free,
        capacity=capacity,
        cpus=cpus,
        reserved_cpus=reserved,
        reported_uids=frozenset(a.uid for a in allocs if a.uid),
        reported_names=frozenset((a.namespace, a.name) for a in allocs),
        numa_nodes=tuple(sorted({c[0] for c in cpus.values()})),
    )


def with_assumed(info: NumaInfo, assumed: Mapping[PodMeta, ResNumaSets]) -> tuple[NumaInfo, bool]:
    """Volcano's ``RefreshNumaSchedulerInfoByCrd``: the node's info with every assignment this scheduler
    made there taken out, unless the exporter reports all of them (its ``podAllocations``), in which case
    the second value is True and the assignments may be forgotten. All of them stay taken while any is
    unreported, because the kubelet's choice may differ from the scheduler's."""
    if all(info.reported(pod) for pod in assumed):
        return info, True
    for sets in assumed.values():
        info = info.taken(sets)
    return info, False


@dataclass(frozen=True, slots=True, eq=False)
class NumaView:
    """What a session reads of the cluster's Numatopologies: node name -> :class:`NumaInfo`, as of the
    snapshot (the cache's assumptions applied). The cache makes a new one only when a Numatopology or
    an assumption changes, so two snapshots with the same object saw the same NUMA state."""

    nodes: Mapping[str, NumaInfo]
