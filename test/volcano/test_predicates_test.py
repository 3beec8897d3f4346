"""Volcano's pkg/scheduler/plugins/predicates/predicates_test.go: TestEventHandler ("pod-deallocate"),
TestNodeNum ("pod-predicate") and TestPodAntiAffinity ("pod-anti-affinity"). TestTaskPodAnnotations,
TestSetUpDynamicResourcesArgs_*, TestInitPlugin and TestBatchNodeOrderRunsPreScorePlugins check
Volcano internals (kube-scheduler plugin wiring, DRA arguments) and are not ported."""

from volcano.port import build_node, build_pod, build_podgroup, build_queue, priority_classes, res, run

WORKER_ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "role", "operator": "In", "values": ["worker"]}]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}
WORKER = {"role": "worker"}
PCS = priority_classes(p1=1, p2=2)


def test_event_handler_pod_deallocate():
    """TestEventHandler/pod-deallocate: pg1 (2 workers, anti-affine) cannot both fit; its
    placement is undone and the node is free again for pg2's worker-3."""
    pods = [
        build_pod(
            "ns1",
            "worker-1",
            "",
            "Pending",
            res("3", "3k"),
            "pg1",
            WORKER,
            {"selector": "worker"},
            affinity=WORKER_ANTI_AFFINITY,
        ),
        build_pod(
            "ns1", "worker-2", "", "Pending", res("5", "5k"), "pg1", WORKER, affinity=WORKER_ANTI_AFFINITY
        ),
        build_pod(
            "ns1", "worker-3", "", "Pending", res("4", "4k"), "pg2", WORKER, affinity=WORKER_ANTI_AFFINITY
        ),
    ]
    nodes = [
        build_node("node1", res("14", "14k", pods="10"), {"selector": "worker"}),
        build_node("node2", res("3", "3k", pods="10")),
    ]
    pgs = [
        build_podgroup("pg1", "ns1", "q1", 2, None, "Inqueue", "p2"),
        build_podgroup("pg2", "ns1", "q1", 1, None, "Inqueue", "p1"),
    ]
    conf = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: gang
    enableJobOrder: false
    enablePreemptable: false
    enableReclaimable: false
  - name: priority
    enableTaskOrder: false
"""
    assert run(conf, nodes, pods, pgs, [build_queue("q1", 0)], PCS).bound == {"ns1/worker-3": "node1"}


def test_node_num_pod_predicate():
    """TestNodeNum/pod-predicate: a node of 2 pod slots takes the two best-effort pods of the
    higher-priority job (allocate then backfill, predicates alone)."""
    pods = [
        build_pod("ns1", "worker-1", "", "Pending", {}, "pg1", WORKER, {"selector": "worker"}),
        build_pod("ns1", "worker-2", "", "Pending", {}, "pg1", WORKER),
        build_pod("ns1", "worker-3", "", "Pending", {}, "pg2", WORKER),
    ]
    pgs = [
        build_podgroup("pg1", "ns1", "q1", 2, None, "Inqueue", "p2"),
        build_podgroup("pg2", "ns1", "q1", 1, None, "Inqueue", "p1"),
    ]
    conf = 'actions: "allocate, backfill"\ntiers:\n- plugins:\n  - name: predicates\n'
    out = run(
        conf,
        [build_node("node1", res("4", "4k", pods="2"), {"selector": "worker"})],
        pods,
        pgs,
        [build_queue("q1", 0)],
        PCS,
    )
    assert out.bound == {"ns1/worker-1": "node1", "ns1/worker-2": "node1"}


def test_pod_anti_affinity():
    """TestPodAntiAffinity/pod-anti-affinity: the preemptor's anti-affinity to a running worker is
    not something preemption resolves here: nothing is evicted or pipelined. (The Go test runs
    Volcano's topology-aware preemption, which Caldera refuses; the normal preempt is used.)"""
    pods = [
        build_pod(
            "ns1",
            "worker-1",
            "n1",
            "Running",
            res("3", "3G"),
            "pg1",
            WORKER,
            priority=100000,
            affinity=WORKER_ANTI_AFFINITY,
        ),
        build_pod("ns1", "worker-2", "n1", "Running", res("3", "3G"), "pg1", priority=10),
        build_pod(
            "ns1",
            "worker-3",
            "",
            "Pending",
            res("3", "3G"),
            "pg2",
            WORKER,
            priority=100000,
            affinity=WORKER_ANTI_AFFINITY,
        ),
    ]
    pgs = [
        build_podgroup("pg1", "ns1", "q1", 0, None, "Running", "low-priority"),
        build_podgroup("pg2", "ns1", "q1", 1, None, "Inqueue", "high-priority"),
    ]
    conf = """
actions: "allocate, preempt"
tiers:
- plugins:
  - name: predicates
  - name: priority
    enableTaskOrder: false
    enableJobOrder: false
    enableJobPipelined: false
"""
    out = run(
        conf,
        [build_node("n1", res("12", "12G", pods="2"), {"kubernetes.io/hostname": "node1"})],
        pods,
        pgs,
        [build_queue("q1", 0, res("9", "9G"))],
        priority_classes(high_priority=100000, low_priority=10),
    )
    assert out.evicted == [] and out.pipelined == {}
