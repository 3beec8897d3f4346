"""``volcano_queue_allocated_milli_cpu`` counts what Volcano's proportion counts as a queue's
allocated resources: at session open the tasks in ``AllocatedStatus`` (Allocated, Binding, Bound,
Running; pkg/scheduler/api/helpers.go) of the session's jobs, then every task the session allocates
or pipelines (``Statement.Allocate`` and ``Statement.Pipeline`` fire ``AllocateFunc``) less every
task it evicts (``DeallocateFunc``); proportion.go sets the gauge from those figures
(``metrics.UpdateQueueAllocated``). A pod being deleted (Releasing), a finished one (Succeeded,
Failed), one in phase Unknown, a pending one and one whose PodGroup does not exist (in no job of the
session) count for nothing.

One queue holds a pod in each state; the gauge is read after the cycle that left them so."""

from __future__ import annotations

import msgspec
from prometheus_client import REGISTRY

from caldera.cache.store import ClusterCache
from caldera.config.conf import DEFAULT_CONF, parse_conf
from caldera.framework.model import TaskStatus
from caldera.framework.objects import Pod
from caldera.hack.scenario import load, node, pod, podgroup, queue
from caldera.metrics.cycle import CycleMetrics
from caldera.scheduler.debug import DebugApi, Observatory
from caldera.scheduler.loop import RecordingBinder, SchedulerLoop
from caldera.scheduler.registry import builtin_registry

Q = "states-q"


def member(name: str, cpu: int, **kw) -> tuple[Pod, object]:
    """A pod of ``cpu`` cores in a PodGroup of its own (minMember 1) in queue Q."""
    return pod(name, cpu=str(cpu), memory="1Gi", group=name, **kw), podgroup(name, queue=Q)


def deleting(p: Pod) -> Pod:
    meta = msgspec.structs.replace(p.metadata, deletion_timestamp="2026-01-01T00:00:00Z")
    return msgspec.structs.replace(p, metadata=meta)


def test_the_gauge_counts_allocated_binding_bound_running_and_pipelined_tasks_only():
    nodes = [
        node("n1", cpu="4", memory="64Gi"),  # running 1 + bound 1 + releasing 2: nothing idle, 2 to come
        node("n2", cpu="1", memory="64Gi"),  # two finished pods: 1 idle, for the pod allocated now
        node("n3", cpu="2", memory="64Gi"),  # the pod whose bind is in flight + one without a PodGroup
        node("n4", cpu="1", memory="64Gi"),  # a pod in phase Unknown
    ]
    binding, binding_pg = member("binding", 1)
    cache = ClusterCache(("caldera",))
    load(cache, nodes=nodes, queues=[queue(Q)], pods=[binding], podgroups=[binding_pg])
    registry = builtin_registry()
    conf = parse_conf(DEFAULT_CONF, registry)
    metrics = CycleMetrics()
    obs = Observatory()

    def on_cycle(*args: object) -> None:
        metrics.observe(*args)
        obs.on_cycle(*args)

    loop = SchedulerLoop(cache, lambda: conf, registry, RecordingBinder(), on_cycle=on_cycle)
    assert loop.run_once() is not None
    # handed to the binder, not yet seen bound: the cache holds it as Binding on n3
    assert cache.task(binding.metadata.uid).status == TaskStatus.BINDING

    made = [
        member("running", 1, node_name="n1", phase="Running"),
        member("bound", 1, node_name="n1", phase="Pending"),
        member("releasing", 2, node_name="n1", phase="Running"),
        member("succeeded", 1, node_name="n2", phase="Succeeded"),
        member("failed", 1, node_name="n2", phase="Failed"),
        member("unknown", 1, node_name="n4", phase="Unknown"),
        member("allocated", 1),  # fits n2 now: allocated this cycle
        member("pipelined", 2),  # fits only n1 once the releasing pod is gone: pipelined
        member("pending", 16),  # fits nowhere
    ]
    pods = [p for p, _ in made]
    pods[2] = deleting(pods[2])
    orphan = pod("orphan", cpu="1", memory="1Gi", group="no-such-group", node_name="n3", phase="Running")
    load(cache, pods=[*pods, orphan], podgroups=[pg for _, pg in made])

    result = loop.run_once()
    assert result is not None
    status = {t.name: t.status for job in result.jobs.values() for t in job.tasks.values()}
    assert {n: status[n] for n in ("allocated", "pipelined", "pending", "releasing", "unknown")} == {
        "allocated": TaskStatus.ALLOCATED,
        "pipelined": TaskStatus.PIPELINED,
        "pending": TaskStatus.PENDING,
        "releasing": TaskStatus.RELEASING,
        "unknown": TaskStatus.UNKNOWN,
    }
    # running 1 + bound 1 + binding 1 + allocated 1 + pipelined 2 cores
    assert REGISTRY.get_sample_value("volcano_queue_allocated_milli_cpu", {"queue_name": Q}) == 6000
    assert result.report.queue_shares[Q].allocated["cpu"] == 6000
    # /debug/queues shows the pipelined part of that figure, which the API cannot show
    (shown,) = [q for q in DebugApi(obs).queues()["queues"] if q["name"] == Q]
    assert shown["allocated"]["cpu"] == 6.0
    assert shown["pipelined"] == {"cpu": 2.0, "memory": 2**30, "pods": 1.0}
