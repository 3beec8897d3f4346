"""numa-aware: CPU/NUMA topology policies against Volcano's Numatopology objects.

Volcano's ``pkg/scheduler/plugins/numaaware/`` (``numaaware.go``, ``policy/``,
``provider/cpumanager/``), read for its rules:

- Only Guaranteed pods are checked (``predicateFn``: ``v1qos.GetPodQOS``; :func:`pod_qos`).
- A pod names its topology policy in the ``volcano.sh/numa-topology-policy`` annotation (``none``,
  ``best-effort``, ``restricted``, ``single-numa-node``). With one (not ``none``), a node must have a
  Numatopology, the ``static`` CPU manager policy, the same topology manager policy and free CPUs
  (``filterNodeByPolicy``; its error strings are the reasons). Without one, only nodes with a
  Numatopology, ``static`` CPUs and a topology policy other than ``none`` are checked, the others
  pass.
- On a node that is checked, each container in turn asks the CPU manager hint provider for its
  hints (``cpuMng.GetTopologyHints``: a container with a whole number of CPUs gets one hint per set
  of NUMA nodes holding enough free CPUs, the narrowest preferred), the node's policy merges them
  (``policy.go``: ``filterProvidersHints``, ``mergeFilteredHints``; ``single-numa-node`` keeps only
  one-node hints; ``restricted`` and ``single-numa-node`` admit only a preferred best hint) and the
  provider picks the CPUs (``cpuMng.Allocate``, ``takeByTopology`` in ``cpu_assignment.go``), which
  the next container no longer sees. A container that is not admitted fails the node: ``container
  NAME cannot be assigned by numa``.
- The CPUs a placed task took are taken for the rest of the session (``AllocateFunc``) and given back
  when its statement is discarded (``DeallocateFunc``). A committed placement carries them
  (``ssn.task_numa`` -> ``Placement.numa``) and the cache keeps them taken until the node's
  Numatopology reports the pod (``OnSessionClose`` -> ``AddUnassignedNumaPods``; cache/numa.py).
- A task with a policy scores each node by how many NUMA nodes its CPUs there would span, fewer
  better (``batchNodeOrderFn``: ``getNodeNumaNumForTask``, ``NormalizeScore(100, reverse)``, times
  the ``weight`` argument, default 1).

Where this differs from Volcano, on purpose:

- Volcano computes a task's CPUs on a node in its predicate and keeps them per task and node
  (``assignRes``); here they are computed when asked (predicate, score, allocate event) from the
  node's CPUs free at that moment, remembered per pod shape and node until that node changes. The
  answer is the one Volcano's predicate gives at the same moment; Volcano's kept answer can be stale
  when other tasks took CPUs on the node since.
- Only placements (to be bound) are reported to the cache; Volcano also reports pipelined tasks, which
  then stay taken until the pod is deleted. A bind that fails for good gives its CPUs back here.
- ``takeByTopology``'s sorts use Go ``sort.Slice`` comparators that are not strict weak orders
  (``a > b || c < d || ...``); here they are the lexicographic orders those comparators spell out,
  as kubelet's CPU manager meant them. The ports of Volcano's tests pass with them.
- Pod-level resources (``spec.resources``, the PodLevelResources feature) are not read for the QoS class.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NamedTuple

import msgspec
import numpy as np

from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.numa import CPU, NUMA_POLICY_ANNOTATION, NumaInfo
from caldera.framework.objects import Container, Pod
from caldera.framework.plugin import Plugin
from caldera.framework.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from caldera.framework.result import Event
    from caldera.framework.session import Session

log = logging.getLogger("caldera.plugins.numaaware")

#: Volcano's ``api.DefaultMaxNodeScore``
MAX_NODE_SCORE = 100
NONE, BEST_EFFORT, RESTRICTED, SINGLE_NUMA_NODE = "none", "best-effort", "restricted", "single-numa-node"


# --- NUMA masks: kubelet's topologymanager/bitmask, as ints (bit i: NUMA node i) ----------------------
def mask_of(*bits: int) -> int:
    out = 0
    for b in bits:
        out |= 1 << b
    return out


def bits_of(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def count(mask: int) -> int:
    return mask.bit_count()


def narrower(a: int, b: int) -> bool:
    """``bitMask.IsNarrowerThan``: fewer bits set; as many, then the lower value (more low bits)."""
    return a < b if count(a) == count(b) else count(a) < count(b)


def iterate_masks(bits: list[int]) -> Iterable[int]:
    """``bitmask.IterateBitMasks``: every non-empty subset, by size, then in combination order."""
    for size in range(1, len(bits) + 1):
        for combo in itertools.combinations(bits, size):
            yield mask_of(*combo)


class TopologyHint(NamedTuple):
    """``policy.TopologyHint``: ``affinity`` None is "any NUMA node"."""

    affinity: int | None
    preferred: bool


#: one provider's hints: resource name -> hints (None: no preference for that resource)
ProviderHints = Mapping[str, list[TopologyHint] | None] | None


# --- policy/: merging the providers' hints --------------------------------------------------------
def filter_providers_hints(providers_hints: list[ProviderHints]) -> list[list[TopologyHint]]:
    """``filterProvidersHints``: no hints from a provider, or None for a resource, is one preferred
    any-node hint; an empty list for a resource is one non-preferred any-node hint."""
    out: list[list[TopologyHint]] = []
    for hints in providers_hints:
        if not hints:
            out.append([TopologyHint(None, True)])
            continue
        for resource in hints:
            found = hints[resource]
            if found is None:
                out.append([TopologyHint(None, True)])
            elif not found:
                out.append([TopologyHint(None, False)])
            else:
                out.append(list(found))
    return out


def merge_permutation(numa_nodes: list[int], permutation: tuple[TopologyHint, ...]) -> TopologyHint:
    """``mergePermutation``: the AND of the masks (any-node is every node), preferred if all are."""
    default = mask_of(*numa_nodes)
    merged = default
    preferred = True
    for hint in permutation:
        merged &= default if hint.affinity is None else hint.affinity
        preferred = preferred and hint.preferred
    return TopologyHint(merged, preferred)


def merge_filtered_hints(numa_nodes: list[int], filtered: list[list[TopologyHint]]) -> TopologyHint:
    """``mergeFilteredHints``: over every permutation (one hint per resource), the best non-empty merge:
    preferred over not, then the narrower."""
    best = TopologyHint(mask_of(*numa_nodes), False)
    for permutation in itertools.product(*filtered):
        merged = merge_permutation(numa_nodes, permutation)
        assert merged.affinity is not None
        if count(merged.affinity) == 0:
            continue
        if merged.preferred and not best.preferred:
            best = merged
            continue
        if not merged.preferred and best.preferred:
            continue
        assert best.affinity is not None
        if narrower(merged.affinity, best.affinity):
            best = merged
    return best


def filter_single_numa_hints(all_hints: list[list[TopologyHint]]) -> list[list[TopologyHint]]:
    """``filterSingleNumaHints``: only preferred hints of any node or of exactly one node."""
    return [
        [h for h in hints if h.preferred and (h.affinity is None or count(h.affinity) == 1)]
        for hints in all_hints
    ]


def policy_predicate(
    policy: str, numa_nodes: list[int], providers_hints: list[ProviderHints]
) -> tuple[TopologyHint, bool]:
    """``Policy.Predicate`` of the node's topology manager policy (``policy.GetPolicy``: anything else
    is ``none``): the best hint and whether the pod is admitted."""
    if policy == BEST_EFFORT:
        return merge_filtered_hints(numa_nodes, filter_providers_hints(providers_hints)), True
    if policy == RESTRICTED:
        best = merge_filtered_hints(numa_nodes, filter_providers_hints(providers_hints))
        return best, best.preferred
    if policy == SINGLE_NUMA_NODE:
        filtered = filter_single_numa_hints(filter_providers_hints(providers_hints))
        best = merge_filtered_hints(numa_nodes, filtered)
        return best, best.preferred
    return TopologyHint(None, False), True


# --- provider/cpumanager ----------------------------------------------------------------------------
class CPUTopology:
    """kubelet's ``topology.CPUTopology`` over a node's CPUs (``CPUDetails``), as ``cpuMng`` builds it:
    ``NumCores`` counts (socket, core) pairs, since the exporter's core ids repeat per socket."""

    def __init__(self, cpus: Mapping[int, tuple[int, int, int]]) -> None:
        self.details = cpus
        self.num_cpus = len(cpus)
        self.num_cores = len({(s, c) for _, s, c in cpus.values()})
        self.num_sockets = len({s for _, s, _ in cpus.values()})

    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0


def _sockets(details: Mapping[int, tuple[int, int, int]]) -> set[int]:
    return {s for _, s, _ in details.values()}


def _cores(details: Mapping[int, tuple[int, int, int]]) -> set[int]:
    return {c for _, _, c in details.values()}


def _in_sockets(details: Mapping[int, tuple[int, int, int]], *sockets: int) -> set[int]:
    return {cpu for cpu, (_, s, _) in details.items() if s in sockets}


def _in_cores(details: Mapping[int, tuple[int, int, int]], *cores: int) -> set[int]:
    return {cpu for cpu, (_, _, c) in details.items() if c in cores}


def _cores_in_sockets(details: Mapping[int, tuple[int, int, int]], *sockets: int) -> set[int]:
    return {c for _, s, c in details.values() if s in sockets}


class _Accumulator:
    """``cpuAccumulator`` of ``cpu_assignment.go``."""

    def __init__(self, topo: CPUTopology, available: Iterable[int], needed: int) -> None:
        self.topo = topo
        avail = set(available)
        self.details = {cpu: d for cpu, d in topo.details.items() if cpu in avail}
        self.needed = needed
        self.result: set[int] = set()

    def take(self, cpus: set[int]) -> None:
        self.result |= cpus
        self.details = {cpu: d for cpu, d in self.details.items() if cpu not in self.result}
        self.needed -= len(cpus)

    def free_sockets(self) -> list[int]:
        # as Volcano writes it: the socket ids that are also ids of available CPUs
        return sorted(_sockets(self.details) & set(self.details))

    def free_cores(self) -> list[int]:
        cpu_ids = set(self.details)

        def whole(socket: int) -> set[int]:
            # as Volcano writes it: the socket's core ids that are also ids of available CPUs
            return _cores_in_sockets(self.details, socket) & cpu_ids

        sockets = sorted(_sockets(self.details), key=lambda s: (len(whole(s)), s))
        return [core for s in sockets for core in sorted(whole(s))]

    def free_cpus(self) -> list[int]:
        topo = self.topo.details

        def key(core: int) -> tuple[int, int, int, int, int]:
            first = min(_in_cores(topo, core))
            socket = topo[first][1]
            colo = len(_in_sockets(topo, socket) & self.result)
            return (
                -colo,
                len(_in_sockets(self.details, socket)),
                len(_in_cores(self.details, core)),
                socket,
                core,
            )

        return [
            cpu
            for core in sorted(_cores(self.details), key=key)
            for cpu in sorted(_in_cores(self.details, core))
        ]

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.details)


def take_by_topology(topo: CPUTopology, available: Iterable[int], num_cpus: int) -> frozenset[int] | None:
    """``takeByTopology``: whole sockets, then whole cores, then single CPUs near those taken.
    None when the request cannot be met."""
    acc = _Accumulator(topo, available, num_cpus)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        return None
    if acc.needs(topo.cpus_per_socket()):
        for s in acc.free_sockets():
            acc.take(_in_sockets(acc.details, s))
            if acc.satisfied():
                return frozenset(acc.result)
            if not acc.needs(topo.cpus_per_socket()):
                break
    if acc.needs(topo.cpus_per_core()):
        for c in acc.free_cores():
            acc.take(_in_cores(acc.details, c))
            if acc.satisfied():
                return frozenset(acc.result)
            if not acc.needs(topo.cpus_per_core()):
                break
    for cpu in acc.free_cpus():
        if acc.needs(1):
            acc.take({cpu})
        if acc.satisfied():
            return frozenset(acc.result)
    return None


def guaranteed_cpus(container: Container) -> int:
    """``guaranteedCPUs``: the container's CPU request when it is a whole number, else 0."""
    value = container.resources.requests.get(CPU)
    if value is None:
        return 0
    try:
        amount = parse_quantity(value)
    except QuantityError:
        return 0
    if amount != amount.to_integral_value():
        return 0
    return int(amount)


def _reserved(topo: CPUTopology, info: NumaInfo) -> frozenset[int]:
    """The CPUs the kubelet reserves: ``takeByTopology`` over all CPUs for the rounded-up reservation."""
    if info.reserved_cpus is None:
        return frozenset()
    return take_by_topology(topo, topo.details, info.reserved_cpus) or frozenset()


def cpu_topology_hints(
    available: frozenset[int], cpus: Mapping[int, tuple[int, int, int]], request: int
) -> list[TopologyHint]:
    """``generateCPUTopologyHints``: a hint per set of NUMA nodes with ``request`` free CPUs; those as
    narrow as the narrowest set that could ever hold the request are preferred."""
    numa_nodes = sorted({d[0] for d in cpus.values()})
    min_size = len(numa_nodes)
    hints: list[TopologyHint] = []
    for mask in iterate_masks(numa_nodes):
        in_mask = sum(1 for d in cpus.values() if mask >> d[0] & 1)
        if in_mask >= request and count(mask) < min_size:
            min_size = count(mask)
        matching = sum(1 for c in available if c in cpus and mask >> cpus[c][0] & 1)
        if matching < request:
            continue
        hints.append(TopologyHint(mask, False))
    return [TopologyHint(h.affinity, count(h.affinity or 0) == min_size) for h in hints]


def cpu_hints(container: Container, info: NumaInfo, free: Mapping[str, frozenset[int]]) -> ProviderHints:
    """``cpuMng.GetTopologyHints``: None (no preference) without a whole CPU request or free-CPU map."""
    if CPU not in container.resources.requests:
        return None
    request = guaranteed_cpus(container)
    if request == 0:
        return None
    topo = CPUTopology(info.cpus)
    reserved = _reserved(topo, info)
    available = free.get(CPU)
    if available is None:
        return None
    return {CPU: cpu_topology_hints(available - reserved, info.cpus, request)}


def cpu_allocate(
    container: Container, best: TopologyHint, info: NumaInfo, free: Mapping[str, frozenset[int]]
) -> dict[str, frozenset[int]]:
    """``cpuMng.Allocate``: CPUs of the best hint's NUMA nodes first, the rest from anywhere; nothing
    when the request cannot be met."""
    topo = CPUTopology(info.cpus)
    reserved = _reserved(topo, info)
    request = guaranteed_cpus(container)
    available = free.get(CPU, frozenset()) - reserved
    result: frozenset[int] = frozenset()
    if best.affinity is not None:
        nodes = set(bits_of(best.affinity))
        aligned = frozenset(c for c in available if c in info.cpus and info.cpus[c][0] in nodes)
        taken = take_by_topology(topo, aligned, min(request, len(aligned)))
        if taken is None:
            return {CPU: frozenset()}
        result = taken
    rest = take_by_topology(topo, available - result, request - len(result))
    if rest is None:
        return {CPU: frozenset()}
    return {CPU: result | rest}


# --- the pod ----------------------------------------------------------------------------------------
def _quantity(value: object) -> object:
    try:
        return parse_quantity(value)  # type: ignore[arg-type]
    except QuantityError:
        return value


def _container_qos(container: Container) -> str:
    """kubelet's ``resourceQOS`` (``pkg/apis/core/v1/helper/qos/qos.go``) for one container."""
    res = container.resources
    if not res.requests and not res.limits:
        return "BestEffort"
    qos = ""
    for name in (CPU, "memory"):
        req = _quantity(res.requests.get(name, 0))
        lim = _quantity(res.limits.get(name, 0))
        if req != lim:
            return "Burstable"
        best_effort = req == 0
        if not qos:
            qos = "BestEffort" if best_effort else "Guaranteed"
        elif best_effort != (qos == "BestEffort"):
            return "Burstable"
    return qos


def pod_qos(pod: Pod) -> str:
    """``qos.GetPodQOS``: the API server's ``status.qosClass``, else ``ComputePodQOS`` over the init
    containers and containers."""
    if pod.status.qos_class:
        return pod.status.qos_class
    qos = ""
    for container in itertools.chain(pod.spec.init_containers, pod.spec.containers):
        one = _container_qos(container)
        if one == "Burstable":
            return one
        if not qos:
            qos = one
        elif qos != one:
            return "Burstable"
    return qos or "BestEffort"


def task_policy(task: TaskInfo) -> str:
    """The pod's topology policy (``api.GetPodTopologyInfo``), "" without the annotation."""
    return task.pod.metadata.annotations.get(NUMA_POLICY_ANNOTATION, "")


def _no_policy(policy: str) -> bool:
    return policy in ("", NONE)


# --- per node -----------------------------------------------------------------------------------------
def filter_node(
    policy: str, info: NumaInfo | None, free: Mapping[str, frozenset[int]] | None
) -> tuple[bool, str | None]:
    """``filterNodeByPolicy``: (whether the node is checked, the reason it fails outright)."""
    if not _no_policy(policy):
        if info is None:
            return False, "numa info is empty"
        if info.cpu_manager_policy != "static":
            return False, "cpu manager policy isn't static"
        if policy != info.topology_policy:
            return False, f"task topology policy[{policy}] is different with node[{info.topology_policy}]"
        if free is None:
            return False, "no topo information"
        if not free.get(CPU):
            return False, "cpu allocatable map is empty"
        return True, None
    if info is None or info.cpu_manager_policy != "static" or _no_policy(info.topology_policy):
        return False, None
    return True, None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A task's answer on one node: why it fails (None: it fits), and the CPUs it would take there
    (None: the node is not checked for it)."""

    reason: str | None
    sets: dict[str, frozenset[int]] | None


PASS = Outcome(None, None)


def assign(
    pod: Pod, policy: str, info: NumaInfo | None, free: Mapping[str, frozenset[int]] | None
) -> Outcome:
    """Volcano's ``predicateFn`` for a Guaranteed pod on one node: container by container, hints,
    the node's policy and the CPUs picked, each container seeing what the earlier ones left."""
    checked, reason = filter_node(policy, info, free)
    if not checked:
        return Outcome(reason, None)
    assert info is not None and free is not None
    left = dict(free)
    taken: dict[str, frozenset[int]] = {}
    numa_nodes = list(info.numa_nodes)
    for container in pod.spec.containers:
        hints = cpu_hints(container, info, left)
        best, admit = policy_predicate(info.topology_policy, numa_nodes, [hints])
        if not admit:
            return Outcome(f"container {container.name} cannot be assigned by numa", None)
        for name, ids in cpu_allocate(container, best, info, left).items():
            taken[name] = taken.get(name, frozenset()) | ids
            left[name] = left.get(name, frozenset()) - ids
    return Outcome(None, taken)


def numa_node_count(cpus: Iterable[int], info: NumaInfo | None) -> int:
    """``getNumaNodeCntForCPUID``: how many NUMA nodes these CPUs span."""
    if info is None:
        return 0
    return len({info.cpus[c][0] for c in cpus if c in info.cpus})


def normalize_reverse(counts: list[int], weight: int) -> list[float]:
    """``util.NormalizeScore(100, reverse=true)`` (integer division), then times the weight."""
    top = max(counts, default=0)
    if top == 0:
        return [float(MAX_NODE_SCORE * weight)] * len(counts)
    return [float((MAX_NODE_SCORE - MAX_NODE_SCORE * c // top) * weight) for c in counts]


_qualifier_encoder = msgspec.json.Encoder()


class NumaAwarePlugin(Plugin):
    name: ClassVar[str] = "numa-aware"
    arguments_schema: ClassVar[dict[str, type]] = {"weight": int}

    def on_session_open(self, ssn: Session) -> None:
        from caldera.framework.session import EventHandler

        self.ssn = ssn
        self.weight = self.arguments.int("weight", 1)
        view = ssn.snapshot.numa
        self.info: Mapping[str, NumaInfo] = view.nodes if view is not None else {}
        #: node -> resource -> the ids free in this session (Volcano's ``nodeResSets``)
        self.free: dict[str, dict[str, frozenset[int]]] = {n: dict(i.free) for n, i in self.info.items()}
        self._version: dict[str, int] = {}
        #: task uid -> (node, the sets it took): Volcano's ``taskBindNodeMap`` and ``assignRes``
        self.assigned: dict[str, tuple[str, dict[str, frozenset[int]]]] = {}
        self._memo: dict[tuple[bytes, str], tuple[int, Outcome]] = {}
        self._keys: dict[str, bytes] = {}
        self._guaranteed: dict[str, bool] = {}
        names = ssn.table.names
        self._names = names
        self.has_info = np.array([n in self.info for n in names], dtype=bool)
        self.any_checked = any(
            i.cpu_manager_policy == "static" and not _no_policy(i.topology_policy) for i in self.info.values()
        )
        # Volcano fills assignRes only in its predicate: with the predicate off, nothing is counted or scored
        self.predicate_on = any(
            p.name == self.name and p.enabled("predicate") for t in ssn.tiers for p in t.plugins
        )
        ssn.add_template_qualifier(self.name, self._key)
        ssn.add_bulk_predicate_fn(
            self.name, self.passes, self.explain, local=True, applies=self._predicate_applies
        )
        if self.predicate_on:
            ssn.add_bulk_node_order_fn(self.name, self.score, applies=self._score_applies)
            ssn.add_event_handler(EventHandler(allocate=self._on_allocate, deallocate=self._on_deallocate))

    # -- what is read of a task --------------------------------------------------------------------
    def _key(self, task: TaskInfo) -> bytes:
        """What the plugin reads of a pod beyond its template: the policy, the QoS class and each
        container's CPU request."""
        key = self._keys.get(task.uid)
        if key is None:
            pod = task.pod
            key = self._keys[task.uid] = _qualifier_encoder.encode(
                (
                    task_policy(task),
                    pod_qos(pod),
                    [c.resources.requests.get(CPU) for c in pod.spec.containers],
                )
            )
        return key

    def guaranteed(self, task: TaskInfo) -> bool:
        known = self._guaranteed.get(task.uid)
        if known is None:
            known = self._guaranteed[task.uid] = pod_qos(task.pod) == "Guaranteed"
        return known

    def _predicate_applies(self, task: TaskInfo) -> bool:
        return self.guaranteed(task) and (not _no_policy(task_policy(task)) or self.any_checked)

    def _score_applies(self, task: TaskInfo) -> bool:
        return self.guaranteed(task) and not _no_policy(task_policy(task))

    def outcome(self, task: TaskInfo, node: str) -> Outcome:
        """The task's answer on the node now (remembered per pod shape and node until the node's
        free CPUs change)."""
        version = self._version.get(node, 0)
        key = (self._key(task), node)
        hit = self._memo.get(key)
        if hit is not None and hit[0] == version:
            return hit[1]
        out = assign(task.pod, task_policy(task), self.info.get(node), self.free.get(node))
        self._memo[key] = (version, out)
        return out

    def _outcomes(self, task: TaskInfo, rows: np.ndarray) -> list[Outcome]:
        names = self._names
        policy = task_policy(task)
        if _no_policy(policy):
            has = self.has_info[rows]
            return [
                self.outcome(task, names[r]) if h else PASS
                for r, h in zip(rows.tolist(), has.tolist(), strict=True)
            ]
        return [self.outcome(task, names[r]) for r in rows.tolist()]

    # -- predicate ---------------------------------------------------------------------------------
    def passes(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        if not self.guaranteed(task):
            return np.ones(len(rows), dtype=bool)
        return np.array([o.reason is None for o in self._outcomes(task, rows)], dtype=bool)

    def explain(self, task: TaskInfo, rows: np.ndarray) -> dict[str, np.ndarray]:
        if not self.guaranteed(task):
            return {}
        reasons = [o.reason for o in self._outcomes(task, rows)]
        out: dict[str, np.ndarray] = {}
        for reason in set(reasons):
            if reason is not None:
                out[reason] = np.array([r == reason for r in reasons], dtype=bool)
        return out

    # -- score -------------------------------------------------------------------------------------
    def score(self, task: TaskInfo, rows: np.ndarray) -> np.ndarray:
        names = self._names
        counts = []
        for row, o in zip(rows.tolist(), self._outcomes(task, rows), strict=True):
            cpus = o.sets.get(CPU, frozenset()) if o.sets else frozenset()
            counts.append(numa_node_count(cpus, self.info.get(names[row])))
        return np.array(normalize_reverse(counts, self.weight), dtype=float)

    # -- the session's CPUs ------------------------------------------------------------------------
    def _on_allocate(self, event: Event) -> None:
        task = event.task
        if task.status not in (TaskStatus.ALLOCATED, TaskStatus.PIPELINED) or not self.guaranteed(task):
            return  # a running task given back by a discarded eviction took nothing here
        node = task.node_name
        out = self.outcome(task, node)
        if out.reason is not None or out.sets is None:
            return
        free = self.free[node]
        for name, ids in out.sets.items():
            if name in free:
                free[name] = free[name] - ids
        self._version[node] = self._version.get(node, 0) + 1
        self.assigned[task.uid] = (node, out.sets)
        self.ssn.task_numa[task.uid] = out.sets

    def _on_deallocate(self, event: Event) -> None:
        task = event.task
        held = self.assigned.get(task.uid)
        if held is None or held[0] != task.node_name:
            return
        node, sets = self.assigned.pop(task.uid)
        free = self.free[node]
        for name, ids in sets.items():
            if name in free:
                free[name] = free[name] | ids
        self._version[node] = self._version.get(node, 0) + 1
        self.ssn.task_numa.pop(task.uid, None)


__all__ = [
    "NumaAwarePlugin",
    "TopologyHint",
    "assign",
    "cpu_allocate",
    "cpu_hints",
    "cpu_topology_hints",
    "mask_of",
    "normalize_reverse",
    "pod_qos",
    "policy_predicate",
    "take_by_topology",
]
