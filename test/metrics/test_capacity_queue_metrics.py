"""With the capacity plugin in the conf (and no proportion), the ``volcano_queue_*`` gauges read what
Volcano's capacity plugin sets them to (pkg/scheduler/plugins/capacity/capacity.go,
``buildQueueAttrs``, its event handlers and ``OnSessionClose``; names in pkg/scheduler/metrics/queue.go):

- allocated: the tasks in an allocated status (Running, Bound, Binding, Allocated) and those the
  session allocated; a finished or a releasing pod counts for nothing;
- request: those and the pending tasks, placed or not;
- inqueue: an Inqueue PodGroup's minResources less what the job holds at the session's open;
- deserved: spec.deserved within the real capability, at least the guarantee;
- capacity: spec.capability, cpu or memory left out of it at MaxFloat64, zero without one;
- real capacity: the cluster less every guarantee, plus the queue's own, within its capability;
- share: allocated over deserved on the deserved dimensions; 1 for a queue that deserves nothing;
- overused: share above 1.

A queue without jobs exports its spec's deserved and capability, and nothing allocated or requested.
"""

from __future__ import annotations

import sys

import msgspec
from prometheus_client import REGISTRY

from caldera.framework.objects import Pod
from caldera.hack.scenario import cluster, node, pod, podgroup, queue, run_session
from caldera.metrics.cycle import CycleMetrics

GI = 2**30
MAX_FLOAT = sys.float_info.max


def conf(*queue_plugins: str) -> str:
    plugins = "".join(f"  - name: {name}\n" for name in queue_plugins)
    return (
        'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: priority\n  - name: gang\n'
        f"- plugins:\n  - name: predicates\n{plugins}  - name: nodeorder\n"
    )


def cycle(snap, conf_text):
    _, result = run_session(snap, conf_text)
    return result


def deleting(p: Pod) -> Pod:
    meta = msgspec.structs.replace(p.metadata, deletion_timestamp="2026-01-01T00:00:00Z")
    return msgspec.structs.replace(p, metadata=meta)


def job(name, queue_name, cpu, phase="Inqueue", node_name="", pod_phase="Pending", min_resources=None):
    """A PodGroup of one pod of ``cpu`` cores and 1Gi."""
    return (
        pod(name, cpu=str(cpu), memory="1Gi", group=name, node_name=node_name, phase=pod_phase),
        podgroup(name, queue=queue_name, phase=phase, min_resources=min_resources),
    )


def two_queues_and_an_idle_one():
    """Two nodes of 8 cpu and 32Gi. cm-a deserves 4 cpu and 8Gi, may use 6 cpu (memory left out),
    is guaranteed 1 cpu; cm-b is best-effort (nothing deserved, no capability); cm-idle has no jobs."""
    queues = [
        queue(
            "cm-a", deserved={"cpu": "4", "memory": "8Gi"}, capability={"cpu": "6"}, guarantee={"cpu": "1"}
        ),
        queue("cm-b"),
        queue("cm-idle", deserved={"cpu": "2"}, capability={"cpu": "3"}),
    ]
    made = [
        job("a-run", "cm-a", 2, phase="Running", node_name="n1", pod_phase="Running"),
        # let in, not placed yet: its minimum is inqueue; placed this cycle
        job("a-new", "cm-a", 1, min_resources={"cpu": "1", "memory": "1Gi"}),
        # 2 + 1 + 5 cpu is over cm-a's capability of 6: requested, never allocated
        job("a-big", "cm-a", 5, phase="Pending"),
        job("a-done", "cm-a", 1, phase="Running", node_name="n2", pod_phase="Succeeded"),
        job("b-run", "cm-b", 3, phase="Running", node_name="n2", pod_phase="Running"),
        job("b-new", "cm-b", 1),
        job("b-going", "cm-b", 1, phase="Running", node_name="n2", pod_phase="Running"),
    ]
    pods = [p for p, _ in made]
    pods[-1] = deleting(pods[-1])  # Releasing
    nodes = [node("n1", cpu="8", memory="32Gi"), node("n2", cpu="8", memory="32Gi")]
    return cluster(nodes=nodes, pods=pods, podgroups=[pg for _, pg in made], queues=queues)


def value(name: str, queue_name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, {"queue_name": queue_name, **labels})


def test_the_queue_gauges_read_what_volcanos_capacity_sets():
    result = cycle(two_queues_and_an_idle_one(), conf("capacity"))
    placed = {p.task.name for p in result.placements}
    assert placed == {"a-new", "b-new"}
    CycleMetrics().observe(result, 0.01, None)

    def cpu(metric, q):
        return value(f"volcano_queue_{metric}_milli_cpu", q)

    def memory(metric, q):
        return value(f"volcano_queue_{metric}_memory_bytes", q)

    # cm-a: a-run 2 + a-new 1 allocated; a-big's 5 requested too; a-done counts for nothing
    assert (cpu("allocated", "cm-a"), memory("allocated", "cm-a")) == (3000, 2 * GI)
    assert (cpu("request", "cm-a"), memory("request", "cm-a")) == (8000, 3 * GI)
    assert (cpu("inqueue", "cm-a"), memory("inqueue", "cm-a")) == (1000, GI)
    assert (cpu("deserved", "cm-a"), memory("deserved", "cm-a")) == (4000, 8 * GI)
    assert (cpu("capacity", "cm-a"), memory("capacity", "cm-a")) == (6000, MAX_FLOAT)
    # 16 cpu less the 1 guaranteed to cm-a plus its own 1, within its 6; all 64Gi
    assert (cpu("real_capacity", "cm-a"), memory("real_capacity", "cm-a")) == (6000, 64 * GI)
    assert value("volcano_queue_share", "cm-a") == 0.75  # 3 of 4 cpu, 2 of 8Gi
    assert value("volcano_queue_overused", "cm-a") == 0

    # cm-b: b-run 3 + b-new 1; the releasing pod counts for nothing
    assert (cpu("allocated", "cm-b"), memory("allocated", "cm-b")) == (4000, 2 * GI)
    assert (cpu("request", "cm-b"), memory("request", "cm-b")) == (4000, 2 * GI)
    assert (cpu("inqueue", "cm-b"), memory("inqueue", "cm-b")) == (0, 0)
    assert (cpu("deserved", "cm-b"), memory("deserved", "cm-b")) == (0, 0)
    assert (cpu("capacity", "cm-b"), memory("capacity", "cm-b")) == (0, 0)
    assert (cpu("real_capacity", "cm-b"), memory("real_capacity", "cm-b")) == (15000, 64 * GI)
    assert value("volcano_queue_share", "cm-b") == 1  # best-effort
    assert value("volcano_queue_overused", "cm-b") == 0

    # cm-idle: its spec's figures, nothing in use
    assert (cpu("deserved", "cm-idle"), memory("deserved", "cm-idle")) == (2000, 0)
    assert (cpu("capacity", "cm-idle"), memory("capacity", "cm-idle")) == (3000, 0)
    assert (cpu("real_capacity", "cm-idle"), memory("real_capacity", "cm-idle")) == (3000, 64 * GI)
    for metric in ("allocated", "request", "inqueue"):
        assert (cpu(metric, "cm-idle"), memory(metric, "cm-idle")) == (0, 0), metric


def test_a_queue_over_its_deserved_share_is_overused():
    """cm-a deserves 1 cpu and holds 2: share 2, overused (Volcano's capacity: share > 1)."""
    pods_pgs = [job("o-run", "cm-over", 2, phase="Running", node_name="n1", pod_phase="Running")]
    snap = cluster(
        nodes=[node("n1", cpu="8", memory="32Gi")],
        pods=[p for p, _ in pods_pgs],
        podgroups=[pg for _, pg in pods_pgs],
        queues=[queue("cm-over", deserved={"cpu": "1", "memory": "32Gi"})],
    )
    CycleMetrics().observe(cycle(snap, conf("capacity")), 0.01, None)
    assert value("volcano_queue_share", "cm-over") == 2
    assert value("volcano_queue_overused", "cm-over") == 1


def test_with_both_plugins_the_later_sets_the_shares_and_capacity_its_own_gauges():
    """Volcano: both set deserved, allocated, request, inqueue and share at session open and on every
    event, in conf order (the later wins); only capacity sets capacity and real capacity, and its
    overused at session close, after proportion's."""
    snap = two_queues_and_an_idle_one()
    proportion_last = cycle(snap, conf("capacity", "proportion")).report.queue_shares["cm-a"]
    capacity_last = cycle(snap, conf("proportion", "capacity")).report.queue_shares["cm-a"]
    proportion_only = cycle(snap, conf("proportion")).report.queue_shares["cm-a"]
    capacity_only = cycle(snap, conf("capacity")).report.queue_shares["cm-a"]

    assert capacity_last == capacity_only
    assert proportion_only.deserved != capacity_only.deserved  # water-filled by weight, not spec.deserved
    assert proportion_last.deserved == proportion_only.deserved
    assert proportion_last.share == proportion_only.share
    assert (proportion_last.capability, proportion_last.real_capacity, proportion_last.overused) == (
        capacity_only.capability,
        capacity_only.real_capacity,
        capacity_only.overused,
    )


def test_proportion_alone_exports_no_real_capacity():
    result = cycle(two_queues_and_an_idle_one(), conf("proportion"))
    metrics = CycleMetrics()
    metrics.observe(result, 0.01, None)
    # a series left by another test of the process for these queues is gone after this cycle
    assert value("volcano_queue_real_capacity_milli_cpu", "cm-a") is None
    # the spec's capability, as before (no MaxFloat64 for the memory left out)
    assert value("volcano_queue_capacity_milli_cpu", "cm-a") == 6000
    assert value("volcano_queue_capacity_memory_bytes", "cm-a") == 0
    assert value("volcano_queue_capacity_milli_cpu", "cm-b") is None


def test_in_a_hierarchy_ancestors_sum_their_children_and_capabilities_are_inherited():
    """root > p (capability 8 cpu) > c1 (capability 16Gi), c2 (none). Volcano's
    ``checkHierarchicalQueue``: a child's cpu or memory left out is its parent's; the root's, none
    given, is unlimited (MaxFloat64). An ancestor's allocated and request are its children's sums."""
    queues = [
        queue("root"),
        queue("cm-p", parent="root", capability={"cpu": "8"}),
        queue("cm-c1", parent="cm-p", capability={"memory": "16Gi"}),
        queue("cm-c2", parent="cm-p"),
    ]
    made = [
        job("c1-run", "cm-c1", 2, phase="Running", node_name="n1", pod_phase="Running"),
        job("c1-new", "cm-c1", 1),
        job("c2-run", "cm-c2", 3, phase="Running", node_name="n1", pod_phase="Running"),
        job("c2-big", "cm-c2", 4, phase="Pending"),  # 2 + 1 + 3 + 4 is over cm-p's 8 cpu
    ]
    snap = cluster(
        nodes=[node("n1", cpu="16", memory="64Gi")],
        pods=[p for p, _ in made],
        podgroups=[pg for _, pg in made],
        queues=queues,
    )
    result = cycle(snap, conf("capacity"))
    assert {p.task.name for p in result.placements} == {"c1-new"}
    CycleMetrics().observe(result, 0.01, None)

    def cpu(metric, q):
        return value(f"volcano_queue_{metric}_milli_cpu", q)

    def memory(metric, q):
        return value(f"volcano_queue_{metric}_memory_bytes", q)

    assert {q: cpu("allocated", q) for q in ("cm-c1", "cm-c2", "cm-p")} == {
        "cm-c1": 3000,
        "cm-c2": 3000,
        "cm-p": 6000,
    }
    assert {q: cpu("request", q) for q in ("cm-c1", "cm-c2", "cm-p")} == {
        "cm-c1": 3000,
        "cm-c2": 7000,
        "cm-p": 10000,
    }
    assert (cpu("allocated", "root"), cpu("request", "root")) == (6000, 10000)
    assert (cpu("capacity", "root"), memory("capacity", "root")) == (MAX_FLOAT, MAX_FLOAT)
    assert (cpu("capacity", "cm-p"), memory("capacity", "cm-p")) == (8000, MAX_FLOAT)
    assert (cpu("capacity", "cm-c1"), memory("capacity", "cm-c1")) == (8000, 16 * GI)
    assert (cpu("capacity", "cm-c2"), memory("capacity", "cm-c2")) == (8000, MAX_FLOAT)
