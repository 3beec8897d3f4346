"""Builders that read like Volcano's test helpers (pkg/scheduler/util/test_utils.go), on top of
caldera.hack.scenario, and a runner for one session of chosen actions, so that the cases of
Volcano's unit tests can be transcribed as data.

As in Volcano's tests, every object has the same (zero) creation time, so ties in task and job
order are broken by uid (``namespace-name``), and a pod's uid is ``namespace-name``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from caldera.config.conf import parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.objects import Node, Pod, PodGroup, PriorityClass, Queue, convert
from caldera.framework.plugin import Arguments
from caldera.framework.session import close_session, open_session
from caldera.hack import scenario
from caldera.scheduler.registry import builtin_registry

T0 = "2026-01-01T00:00:00Z"
REGISTRY = builtin_registry()


def res(cpu: str | None = None, memory: str | None = None, **scalars: str) -> dict[str, str]:
    """Volcano's api.BuildResourceList(cpu, memory, scalars...)."""
    out: dict[str, str] = {}
    if cpu is not None:
        out["cpu"] = cpu
    if memory is not None:
        out["memory"] = memory
    out.update(scalars)
    return out


def build_node(name: str, alloc: dict[str, str], labels: dict[str, str] | None = None, **kw: Any) -> Node:
    alloc = dict(alloc)
    extra = {k: v for k, v in alloc.items() if k not in ("cpu", "memory", "pods")}
    d = scenario.node_dict(
        name,
        cpu=alloc.get("cpu", "0"),
        memory=alloc.get("memory", "0"),
        pods=alloc.get("pods", "110"),
        labels=labels,
        extra=extra,
        **kw,
    )
    d["metadata"]["creationTimestamp"] = T0
    return convert(Node, d)


def build_pod(
    ns: str,
    name: str,
    node_name: str,
    phase: str,
    req: dict[str, str],
    group: str,
    labels: dict[str, str] | None = None,
    selector: dict[str, str] | None = None,
    priority: int | None = None,
    preemption_policy: str = "",
    annotations: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
    **kw: Any,
) -> Pod:
    """Volcano's util.BuildPod (and BuildPodWithPriority / BuildPodWithPreemptionPolicy /
    BuildPodWithAffinity ...: ``affinity=``, ``tolerations=``; ``spec=`` adds raw spec fields)."""
    d = scenario.pod_dict(
        name,
        cpu=None,
        memory=None,
        extra=dict(req),
        group=group,
        namespace=ns,
        node_name=node_name,
        phase=phase,
        labels=labels,
        node_selector=selector,
        priority=priority,
        preemption_policy=preemption_policy,
        annotations=annotations,
        uid=f"{ns}-{name}",
        **kw,
    )
    d["metadata"]["creationTimestamp"] = T0
    d["spec"].update(spec or {})
    return convert(Pod, d)


def build_podgroup(
    name: str,
    ns: str,
    queue: str,
    min_member: int,
    task_min_member: dict[str, int] | None,
    phase: str,
    priority_class: str = "",
    min_resources: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> PodGroup:
    """Volcano's util.BuildPodGroup / BuildPodGroupWithPrio. Volcano's tests pass ``{"": n}`` as
    minTaskMember for pods without a role; Caldera reads it the same way."""
    d = scenario.podgroup_dict(
        name,
        min_member=min_member,
        queue=queue,
        namespace=ns,
        priority_class=priority_class,
        min_task_member={k: v for k, v in (task_min_member or {}).items()},
        min_resources=min_resources,
        phase=phase,
        uid=f"{ns}-{name}",
    )
    d["metadata"]["creationTimestamp"] = T0
    if annotations:
        d["metadata"]["annotations"] = dict(annotations)
    return convert(PodGroup, d)


def build_queue(
    name: str,
    weight: int = 1,
    capability: dict[str, str] | None = None,
    deserved: dict[str, str] | None = None,
    guarantee: dict[str, str] | None = None,
    priority: int = 0,
    reclaimable: bool | None = None,
    state: str = "Open",
    parent: str = "",
    affinity: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> Queue:
    """Volcano's util.BuildQueue / util.MakeQueue().Parent(...).Affinity(...).Annotations(...)."""
    d = scenario.queue_dict(
        name,
        weight=weight,
        capability=capability,
        deserved=deserved,
        guarantee=guarantee,
        priority=priority,
        reclaimable=reclaimable,
        state=state,
        parent=parent,
        affinity=affinity,
        annotations=annotations,
    )
    d["metadata"]["creationTimestamp"] = T0
    return convert(Queue, d)


def registry_with_rejecter(reject_job: str) -> Any:
    """The built-ins plus Volcano's uthelper.RejecterPlugin as ``test-rejecter``: its enqueueable vote
    rejects the job named ``reject_job`` and abstains on the others."""
    from typing import ClassVar

    from caldera.framework.plugin import Plugin

    class Rejecter(Plugin):
        name: ClassVar[str] = "test-rejecter"

        def on_session_open(self, ssn: Any) -> None:
            ssn.add_job_enqueueable_fn(self.name, lambda job: -1 if job.name == reject_job else 0)

    registry = builtin_registry()
    registry.register_plugin(Rejecter)
    return registry


def priority_classes(**values: int) -> list[PriorityClass]:
    return [scenario.priority_class(name.replace("_", "-"), v) for name, v in values.items()]


@dataclass
class Outcome:
    evicted: list[str] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)
    pipelined: dict[str, str] = field(default_factory=dict)
    phases: dict[str, str] = field(default_factory=dict)


def run(
    conf: str,
    nodes: list[Node],
    pods: list[Pod],
    podgroups: list[PodGroup],
    queues: list[Queue],
    pcs: list[PriorityClass] | None = None,
    registry: Any = None,
    resource_quotas: list[Any] | None = None,
    hypernodes: dict[str, Any] | None = None,
) -> Outcome:
    """One session of the conf's actions over these objects, as Volcano's TestCommonStruct.Run."""
    snap = scenario.cluster(
        nodes=nodes,
        pods=pods,
        podgroups=podgroups,
        queues=queues,
        priority_classes=pcs or [],
        resource_quotas=resource_quotas or [],
    )
    if hypernodes:
        snap.hypernodes = hypernodes
    registry = registry or REGISTRY
    parsed = parse_conf(conf, registry)
    ssn = open_session(snap, parsed.tiers, registry.plugins, parsed.configurations)
    try:
        for name in parsed.actions:
            args = parsed.configurations.get(name) or Arguments(f"action {name!r}")
            registry.actions[name](args).execute(ssn)
        pipelined = {
            f"{t.namespace}/{t.name}": t.node_name
            for j in ssn.jobs.values()
            for t in j.tasks.values()
            if t.status == TaskStatus.PIPELINED
        }
    finally:
        result = close_session(ssn)
    return Outcome(
        evicted=sorted(f"{e.task.namespace}/{e.task.name}" for e in result.evictions),
        bound={f"{p.task.namespace}/{p.task.name}": p.node for p in result.placements},
        pipelined=pipelined,
        phases={uid: j.phase for uid, j in result.jobs.items()},
    )
