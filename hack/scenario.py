"""Builders for scenario tests and in-process benchmarks: Kubernetes objects as the API would send
them (dicts, decoded through the same msgspec path as watch events), and snapshots built from them.

    snap = cluster(nodes=[node("n1", cpu="4")], pods=[pod("p1", cpu="1", group="job1")],
                   podgroups=[podgroup("job1", min_member=1)])
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from caldera.cache.store import ClusterCache
from caldera.framework.model import GROUP_NAME_ANNOTATION, QUEUE_NAME_ANNOTATION, TASK_SPEC_ANNOTATION
from caldera.framework.objects import NativePodGroup, Node, Pod, PodGroup, PriorityClass, Queue, convert
from caldera.framework.snapshot import Snapshot

if TYPE_CHECKING:
    from caldera.framework.plugin import Registry

_uid = itertools.count(1)
_clock = itertools.count(0)


def _ts() -> str:
    # Distinct, increasing creation timestamps so creation order is well defined in tests.
    n = next(_clock)
    return (
        f"2026-01-01T00:{(n // 60) % 60:02d}:{n % 60:02d}Z"
        if n < 3600
        else f"2026-01-02T{(n // 3600) % 24:02d}:{(n // 60) % 60:02d}:{n % 60:02d}Z"
    )


def node_dict(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    pods: str = "110",
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: bool = True,
    extra: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{name}",
            "labels": {"kubernetes.io/hostname": name, **(labels or {})},
            "annotations": annotations or {},
            "creationTimestamp": _ts(),
        },
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def node(name: str, **kw: Any) -> Node:
    return convert(Node, node_dict(name, **kw))


def pod_dict(
    name: str,
    cpu: str | None = "1",
    memory: str | None = "1Gi",
    group: str | None = None,
    namespace: str = "default",
    scheduler: str = "caldera",
    node_name: str = "",
    phase: str = "Pending",
    priority: int | None = None,
    priority_class: str = "",
    role: str = "",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    host_ports: list[int] | None = None,
    extra: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    uid: str | None = None,
    spec_extra: dict[str, Any] | None = None,
    preemption_policy: str = "",
) -> dict[str, Any]:
    """A pod; ``spec_extra`` adds any other spec fields as written in a manifest (schedulingGates,
    topologySpreadConstraints, volumes, ...)."""
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    ann = dict(annotations or {})
    if group:
        ann[GROUP_NAME_ANNOTATION] = group
    if role:
        ann[TASK_SPEC_ANNOTATION] = role
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": requests}}
    if limits:
        container["resources"]["limits"] = limits
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p} for p in host_ports]
    spec: dict[str, Any] = {"schedulerName": scheduler, "containers": [container]}
    if node_name:
        spec["nodeName"] = node_name
    if priority is not None:
        spec["priority"] = priority
    if priority_class:
        spec["priorityClassName"] = priority_class
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    spec.update(spec_extra or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"pod-{namespace}-{name}-{next(_uid)}",
            "labels": labels or {},
            "annotations": ann,
            "creationTimestamp": _ts(),
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def pod(name: str, **kw: Any) -> Pod:
    return convert(Pod, pod_dict(name, **kw))


def podgroup_dict(
    name: str,
    min_member: int = 1,
    queue: str = "default",
    namespace: str = "default",
    priority_class: str = "",
    min_task_member: dict[str, int] | None = None,
    min_resources: dict[str, str] | None = None,
    phase: str = "Inqueue",
    network_topology: dict[str, Any] | None = None,
    uid: str | None = None,
    annotations: dict[str, str] | None = None,
    sub_group_policy: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if sub_group_policy:
        spec["subGroupPolicy"] = sub_group_policy
    if priority_class:
        spec["priorityClassName"] = priority_class
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    if min_resources:
        spec["minResources"] = min_resources
    if network_topology:
        spec["networkTopology"] = network_topology
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"pg-{namespace}-{name}-{next(_uid)}",
            "creationTimestamp": _ts(),
            "annotations": annotations or {},
        },
        "spec": spec,
        "status": {"phase": phase},
    }


def podgroup(name: str, **kw: Any) -> PodGroup:
    return convert(PodGroup, podgroup_dict(name, **kw))


def native_podgroup_dict(
    name: str,
    min_count: int | None = None,
    namespace: str = "default",
    topology_keys: Iterable[str] = (),
    queue: str | None = None,
    priority_class: str = "",
    priority: int | None = None,
    template: tuple[str, str] | None = None,
    uid: str | None = None,
    resource_claims: Iterable[dict[str, str]] = (),
    disruption_mode: str = "",
) -> dict[str, Any]:
    """A ``scheduling.k8s.io/v1alpha2`` PodGroup as a manifest writes it: ``gang: {minCount}`` when
    ``min_count`` is given, else ``basic: {}`` (no policy at all when ``template`` names a Workload's
    template: (workload, template)); ``resource_claims`` its ``spec.resourceClaims`` (KEP-5729),
    ``disruption_mode`` its ``spec.disruptionMode`` (``Pod`` or ``PodGroup``)."""
    spec: dict[str, Any] = {}
    if template is not None:
        spec["podGroupTemplateRef"] = {
            "workload": {"workloadName": template[0], "podGroupTemplateName": template[1]}
        }
    elif min_count is not None:
        spec["schedulingPolicy"] = {"gang": {"minCount": min_count}}
    else:
        spec["schedulingPolicy"] = {"basic": {}}
    keys = list(topology_keys)
    if keys:
        spec["schedulingConstraints"] = {"topology": [{"key": k} for k in keys]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    if priority is not None:
        spec["priority"] = priority
    claims = list(resource_claims)
    if claims:
        spec["resourceClaims"] = claims
    if disruption_mode:
        spec["disruptionMode"] = disruption_mode
    labels = {QUEUE_NAME_ANNOTATION: queue} if queue else {}
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"npg-{namespace}-{name}-{next(_uid)}",
            "creationTimestamp": _ts(),
            "labels": labels,
        },
        "spec": spec,
    }


def native_podgroup(name: str, **kw: Any) -> NativePodGroup:
    return convert(NativePodGroup, native_podgroup_dict(name, **kw))


def native_member(name: str, native_group: str, **kw: Any) -> Pod:
    """A pod of the native group ``native_group`` (``spec.schedulingGroup.podGroupName``)."""
    extra = dict(kw.pop("spec_extra", None) or {})
    extra["schedulingGroup"] = {"podGroupName": native_group}
    return pod(name, spec_extra=extra, **kw)


def queue_dict(
    name: str,
    weight: int = 1,
    capability: dict[str, str] | None = None,
    guarantee: dict[str, str] | None = None,
    reclaimable: bool | None = None,
    state: str = "Open",
    parent: str = "",
    deserved: dict[str, str] | None = None,
    priority: int = 0,
    affinity: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Queue; ``affinity`` is its ``spec.affinity`` as written in a manifest (nodeGroupAffinity,
    nodeGroupAntiAffinity)."""
    spec: dict[str, Any] = {"weight": weight}
    if priority:
        spec["priority"] = priority
    if capability:
        spec["capability"] = capability
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    if reclaimable is not None:
        spec["reclaimable"] = reclaimable
    if parent:
        spec["parent"] = parent
    if deserved:
        spec["deserved"] = deserved
    if affinity is not None:
        spec["affinity"] = affinity
    meta: dict[str, Any] = {"name": name, "uid": f"queue-{name}-{next(_uid)}", "creationTimestamp": _ts()}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": meta,
        "spec": spec,
        "status": {"state": state},
    }


def queue(name: str, **kw: Any) -> Queue:
    return convert(Queue, queue_dict(name, **kw))


def priority_class(name: str, value: int, global_default: bool = False) -> PriorityClass:
    return convert(
        PriorityClass,
        {"metadata": {"name": name, "uid": f"pc-{name}"}, "value": value, "globalDefault": global_default},
    )


def gang(
    name: str,
    size: int,
    min_member: int | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    queue: str = "default",
    namespace: str = "default",
    **pod_kw: Any,
) -> tuple[PodGroup, list[Pod]]:
    """A PodGroup and its ``size`` pods (min member defaults to the size)."""
    pg = podgroup(
        name, min_member=size if min_member is None else min_member, queue=queue, namespace=namespace
    )
    pods = [
        pod(f"{name}-{i}", cpu=cpu, memory=memory, group=name, namespace=namespace, **pod_kw)
        for i in range(size)
    ]
    return pg, pods


def load(
    cache: ClusterCache,
    nodes: Iterable[Node] = (),
    pods: Iterable[Pod] = (),
    podgroups: Iterable[PodGroup] = (),
    queues: Iterable[Queue] = (),
    priority_classes: Iterable[PriorityClass] = (),
    pdbs: Iterable[Any] = (),
    dra: Iterable[Any] = (),
    resource_quotas: Iterable[Any] = (),
    numatopologies: Iterable[Any] = (),
) -> ClusterCache:
    for topo in numatopologies:
        cache.upsert_numatopology(topo)
    for pdb in pdbs:
        cache.upsert_pdb(pdb)
    for obj in dra:
        load_dra(cache, obj)
    for quota in resource_quotas:
        cache.upsert_resource_quota(quota)
    for pc in priority_classes:
        cache.upsert_priority_class(pc)
    for q in queues:
        cache.upsert_queue(q)
    for n in nodes:
        cache.upsert_node(n)
    for pg in podgroups:
        cache.upsert_podgroup(pg)
    for p in pods:
        cache.upsert_pod(p)
    return cache


def cluster(
    nodes: Iterable[Node] = (),
    pods: Iterable[Pod] = (),
    podgroups: Iterable[PodGroup] = (),
    queues: Iterable[Queue] = (),
    priority_classes: Iterable[PriorityClass] = (),
    scheduler_names: Iterable[str] = ("caldera",),
    pdbs: Iterable[Any] = (),
    dra: Iterable[Any] = (),
    resource_quotas: Iterable[Any] = (),
    numatopologies: Iterable[Any] = (),
) -> Snapshot:
    """A snapshot of a cache loaded with these objects."""
    return load(
        ClusterCache(scheduler_names),
        nodes,
        pods,
        podgroups,
        queues,
        priority_classes,
        pdbs,
        dra=dra,
        resource_quotas=resource_quotas,
        numatopologies=numatopologies,
    ).snapshot()


def pdb(
    name: str,
    match_labels: dict[str, str],
    allowed: int,
    namespace: str = "default",
    disrupted: Iterable[str] = (),
) -> Any:
    """A PodDisruptionBudget as its controller left it: ``allowed`` disruptions allowed now."""
    from caldera.framework.objects import PodDisruptionBudget

    return convert(
        PodDisruptionBudget,
        {
            "metadata": {"name": name, "namespace": namespace, "uid": f"pdb-{name}"},
            "spec": {"selector": {"matchLabels": match_labels}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: _ts() for p in disrupted}},
        },
    )


# --- Dynamic Resource Allocation (resource.k8s.io/v1) ---------------------------------------------
def device_class(name: str, expression: str = "") -> Any:
    """A DeviceClass; ``expression`` (default: ``device.driver == "<name>"``) its one CEL selector."""
    from caldera.framework.dra.objects import DeviceClass

    cel = expression or f'device.driver == "{name}"'
    return convert(
        DeviceClass,
        {
            "metadata": {"name": name, "uid": f"dc-{name}"},
            "spec": {"selectors": [{"cel": {"expression": cel}}]},
        },
    )


def resource_slice(
    node: str, driver: str, devices: Iterable[str] | dict[str, dict[str, Any]], pool: str = ""
) -> Any:
    """A node-local ResourceSlice of one complete pool; ``devices`` are names, or name -> attributes
    as on the wire (``{"numa": {"int": 0}}``)."""
    from caldera.framework.dra.objects import ResourceSlice

    attrs = devices if isinstance(devices, dict) else {d: {} for d in devices}
    return convert(
        ResourceSlice,
        {
            "metadata": {"name": f"{node}-{driver}", "uid": f"rs-{node}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": d, "attributes": a} for d, a in attrs.items()],
            },
        },
    )


def resource_claim(
    name: str,
    device_class_name: str,
    count: int = 1,
    selector: str = "",
    namespace: str = "default",
    match_attribute: str = "",
    status: dict[str, Any] | None = None,
    capacity: dict[str, str] | None = None,
    requests: int = 1,
    distinct_attribute: str = "",
) -> Any:
    """A ResourceClaim with one request ``req`` for ``count`` devices of the class (and a CEL selector,
    a matchAttribute or distinctAttribute constraint and ``capacity.requests`` when given); with
    ``requests`` above 1, that many such requests ``r0``, ``r1``... under the constraint."""
    from caldera.framework.dra.objects import ResourceClaim

    exactly: dict[str, Any] = {
        "deviceClassName": device_class_name,
        "count": count,
        "allocationMode": "ExactCount",
    }
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    names = ["req"] if requests == 1 else [f"r{i}" for i in range(requests)]
    devices: dict[str, Any] = {"requests": [{"name": n, "exactly": exactly} for n in names]}
    if match_attribute:
        devices["constraints"] = [{"matchAttribute": match_attribute}]
    elif distinct_attribute:
        devices["constraints"] = [{"distinctAttribute": distinct_attribute}]
    return convert(
        ResourceClaim,
        {
            "metadata": {"name": name, "namespace": namespace, "uid": f"rc-{namespace}-{name}"},
            "spec": {"devices": devices},
            "status": status or {},
        },
    )


def claim_pod_spec(*claims: str, template: str = "") -> dict[str, Any]:
    """``spec_extra`` for a pod using these claims by name (or one claim from ``template``)."""
    entries: list[dict[str, Any]] = [{"name": f"c{i}", "resourceClaimName": c} for i, c in enumerate(claims)]
    if template:
        entries.append({"name": "tmpl", "resourceClaimTemplateName": template})
    return {"resourceClaims": entries}


def load_dra(cache: ClusterCache, obj: Any) -> None:
    from caldera.framework.dra.objects import DeviceClass, ResourceClaim, ResourceSlice

    if isinstance(obj, DeviceClass):
        cache.upsert_device_class(obj)
    elif isinstance(obj, ResourceSlice):
        cache.upsert_resource_slice(obj)
    elif isinstance(obj, ResourceClaim):
        cache.upsert_resource_claim(obj)
    else:
        raise TypeError(f"not a DRA object: {obj!r}")


# --- running cycles in tests ---------------------------------------------------------------------
def resource_quota(
    name: str,
    hard: dict[str, str],
    used: dict[str, str] | None = None,
    namespace: str = "default",
) -> Any:
    """A v1 ResourceQuota as the quota controller left it: ``status.hard`` is the spec's, and
    ``status.used`` what it counted (nothing when not given)."""
    from caldera.framework.objects import ResourceQuota

    return convert(
        ResourceQuota,
        {
            "metadata": {"name": name, "namespace": namespace, "uid": f"quota-{namespace}-{name}"},
            "spec": {"hard": dict(hard)},
            "status": {"hard": dict(hard), "used": dict(used or {})},
        },
    )


def cpu_detail(numa_nodes: int, cores_per_node: int, threads: int = 2) -> dict[int, tuple[int, int, int]]:
    """CPU id -> (NUMA node, socket, core) of a machine with one socket per NUMA node: CPUs numbered
    node by node, core by core (core ids unique per socket, as Volcano's exporter reports them)."""
    out: dict[int, tuple[int, int, int]] = {}
    cpu = 0
    for node in range(numa_nodes):
        for core in range(cores_per_node):
            for _ in range(threads):
                out[cpu] = (node, node, core)
                cpu += 1
    return out


def numatopology_dict(
    node: str,
    cpus: dict[int, tuple[int, int, int]],
    allocatable: str | None = None,
    topology_policy: str = "single-numa-node",
    cpu_policy: str = "static",
    res_reserved: dict[str, str] | None = None,
    pod_allocations: Iterable[dict[str, str]] = (),
) -> dict[str, Any]:
    """A Numatopology as Volcano's resource-exporter writes it for ``node`` (``allocatable``: a CPU
    list; default every CPU)."""
    from caldera.framework.numa import format_cpuset

    return {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": node},
        "spec": {
            "policies": {"CPUManagerPolicy": cpu_policy, "TopologyManagerPolicy": topology_policy},
            "resReserved": dict(res_reserved or {}),
            "numares": {
                "cpu": {
                    "allocatable": format_cpuset(set(cpus)) if allocatable is None else allocatable,
                    "capacity": len(cpus),
                }
            },
            "cpuDetail": {str(c): {"numa": n, "socket": s, "core": k} for c, (n, s, k) in cpus.items()},
            "podAllocations": list(pod_allocations),
        },
    }


def numatopology(node: str, cpus: dict[int, tuple[int, int, int]], **kw: Any) -> Any:
    import msgspec

    from caldera.framework.numa import Numatopology

    return msgspec.convert(numatopology_dict(node, cpus, **kw), Numatopology)


def run_session(snap: Snapshot, conf_text: str | None = None) -> tuple[Any, Any]:
    """Open a session on ``snap`` with a Volcano conf (default: Volcano's default conf) and the
    built-in actions and plugins, run its actions and close it. Returns (session, result)."""
    from caldera.config.conf import DEFAULT_CONF, parse_conf
    from caldera.framework.plugin import Arguments
    from caldera.framework.session import close_session, open_session
    from caldera.scheduler.registry import builtin_registry

    registry = builtin_registry()
    conf = parse_conf(conf_text or DEFAULT_CONF, registry)
    ssn = open_session(snap, conf.tiers, registry.plugins, conf.configurations)
    try:
        for name in conf.actions:
            registry.actions[name](conf.configurations.get(name) or Arguments(name)).execute(ssn)
    finally:
        result = close_session(ssn)
    return ssn, result


class InProcessCluster:
    """A cluster held in process, without an API server (unlike ``caldera.hack.sim.SimCluster``): the
    scheduler's cache and loop plus a pretend kubelet. Each ``cycle()`` runs the scheduler loop once, then
    binds its placements (pods become Running on their node) and deletes evicted pods."""

    def __init__(
        self, conf_text: str | None = None, registry: Registry | None = None, **objects: Any
    ) -> None:
        """``registry``: the scheduler's plugins and actions (default: the built-ins)."""
        from caldera.config.conf import DEFAULT_CONF, parse_conf
        from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
        from caldera.scheduler.registry import builtin_registry

        self.cache = load(ClusterCache(("caldera",)), **objects)
        self.pods: dict[str, Pod] = {p.metadata.uid: p for p in objects.get("pods", ())}
        if registry is None:
            registry = builtin_registry()
        self.conf = parse_conf(conf_text or DEFAULT_CONF, registry)
        self.binder = RecordingBinder()
        self.loop = SchedulerLoop(self.cache, lambda: self.conf, registry, self.binder)

    def add(self, **objects: Any) -> None:
        load(self.cache, **objects)
        for p in objects.get("pods", ()):
            self.pods[p.metadata.uid] = p

    def cycle(self) -> Any:
        import msgspec

        self.binder.placements.clear()
        self.binder.evictions.clear()
        result = self.loop.run_once()
        for placement in self.binder.placements:
            old = self.pods[placement.task.uid]
            new = msgspec.structs.replace(
                old,
                spec=msgspec.structs.replace(old.spec, node_name=placement.node),
                status=msgspec.structs.replace(old.status, phase="Running"),
            )
            self.pods[placement.task.uid] = new
            self.cache.upsert_pod(new)
        for eviction in self.binder.evictions:
            old = self.pods.pop(eviction.task.uid, None)
            if old is not None:
                self.cache.delete_pod(old)
        return result

    def running_on(self) -> dict[str, str]:
        """Pod name → node, for every pod placed so far."""
        return {p.metadata.name: p.spec.node_name for p in self.pods.values() if p.spec.node_name}
