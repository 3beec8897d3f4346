"""Volcano's pkg/scheduler/plugins/nodegroup/nodegroup_test.go, ported as data: the nodegroup plugin
alone (predicate and node order enabled), every task against every node.

TestNodeGroup: each case's expected node scores and whether the predicate passes (Volcano's
api.Success) or fails (UnschedulableAndUnresolvable). TestNodeGroupResourceLimits: the predicate of
the pending task per node under the ``volcano.sh/nodegroup-resource-limits`` annotation.
TestNodeGroupResourceLimitAllocationEvent: an allocation in the session counts against the limit.
"""

from __future__ import annotations

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster
from volcano.port import REGISTRY, build_node, build_pod, build_podgroup, build_queue, res

GROUP = "volcano.sh/nodegroup-name"
LIMITS = "volcano.sh/nodegroup-resource-limits"
OK, FAIL = "Success", "UnschedulableAndUnresolvable"


def conf(arguments: dict[str, object] | None = None, hierarchy: bool = False) -> str:
    lines = ['actions: "allocate"', "tiers:", "- plugins:", "  - name: nodegroup"]
    if hierarchy:
        lines.append("    enableHierarchy: true")
    if arguments:
        lines.append("    arguments:")
        lines += [f"      {k}: {str(v).lower()}" for k, v in arguments.items()]
    return "\n".join(lines) + "\n"


def affinity(required=(), preferred=(), anti_required=(), anti_preferred=()):
    out: dict[str, dict[str, list[str]]] = {}
    if required or preferred:
        out["nodeGroupAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(required),
            "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
        }
    if anti_required or anti_preferred:
        out["nodeGroupAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": list(anti_required),
            "preferredDuringSchedulingIgnoredDuringExecution": list(anti_preferred),
        }
    return out


NODES = [
    build_node("n1", res("2", "4Gi"), {GROUP: "group1"}),
    build_node("n2", res("4", "16Gi"), {GROUP: "group2"}),
    build_node("n3", res("4", "16Gi"), {GROUP: "group3"}),
    build_node("n4", res("4", "16Gi"), {GROUP: "group4"}),
    build_node("n5", res("4", "16Gi")),
]
FULL = affinity(["group1", "group3"], ["group3"], ["group2", "group4"], ["group4"])
ROOT_Q = build_queue("root", affinity=FULL)
NO_AFFINITY_ROOT_Q = build_queue("root-no-affinity")
Q1 = build_queue("q1", affinity=FULL, parent="root")
Q2 = build_queue("q2", affinity=affinity(["group1"], ["group3"], ["group2"], ["group4"]), parent="root")
Q3 = build_queue("q3", affinity=affinity(preferred=["group1", "group3"]))
NO_AFFINITY_Q = build_queue("q-no-affinity", parent="root")
Q1_CHILD = build_queue("q1-child", parent="q1")
NO_AFFINITY_Q_CHILD = build_queue("q-no-affinity-child", parent="q-no-affinity")

#: the scores and statuses of the cases where the queue's affinity is FULL (own or inherited)
FULL_SCORES = {"n1": 100, "n2": 0, "n3": 150, "n4": -1, "n5": 0}
FULL_STATUS = {"n1": OK, "n2": FAIL, "n3": OK, "n4": OK, "n5": FAIL}
NONE_SCORES = dict.fromkeys(["n1", "n2", "n3", "n4", "n5"], 0)

# (TestNodeGroup case name, queue of the pod's group, queues, arguments, enableHierarchy, scores, statuses)
CASES = [
    ("soft constraints is subset of hard constraints", "q1", [Q1], {}, False, FULL_SCORES, FULL_STATUS),
    (
        "soft constraints is not subset of hard constraints",
        "q2",
        [Q2],
        {},
        False,
        {"n1": 100, "n2": 0, "n3": 50, "n4": -1, "n5": 0},
        {"n1": OK, "n2": FAIL, "n3": OK, "n4": OK, "n5": FAIL},
    ),
    (
        "affinity is not set for the queue, pods still cannot be scheduled to nodes with the nodegroup "
        "label when strict=false",
        "root-no-affinity",
        [NO_AFFINITY_ROOT_Q],
        {"strict": False},
        False,
        NONE_SCORES,
        {"n1": FAIL, "n2": FAIL, "n3": FAIL, "n4": FAIL, "n5": OK},
    ),
    (
        "affinity inherits from parent queue",
        "q1-child",
        [ROOT_Q, Q1, Q1_CHILD],
        {},
        True,
        FULL_SCORES,
        FULL_STATUS,
    ),
    (
        "affinity inherits from ancestor queue if parent queue has no affinity",
        "q-no-affinity-child",
        [ROOT_Q, NO_AFFINITY_Q, NO_AFFINITY_Q_CHILD],
        {},
        True,
        FULL_SCORES,
        FULL_STATUS,
    ),
    (
        "queue without affinity",
        "q-no-affinity",
        [NO_AFFINITY_Q],
        {},
        False,
        NONE_SCORES,
        dict.fromkeys(["n1", "n2", "n3", "n4", "n5"], FAIL),
    ),
    (
        "preferred nodegroup priority ordering",
        "q3",
        [Q3],
        {"enablePreferredOrder": True},
        False,
        {"n1": 50, "n2": 0, "n3": 25, "n4": 0, "n5": 0},
        {"n1": OK, "n2": FAIL, "n3": OK, "n4": FAIL, "n5": FAIL},
    ),
]


def session(text, queues, pods, podgroups, nodes=NODES):
    parsed = parse_conf(text, REGISTRY)
    snap = cluster(nodes=nodes, pods=pods, podgroups=podgroups, queues=queues)
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def statuses(ssn, task):
    return {n.name: OK if ssn.predicate(task, n) is None else FAIL for n in ssn.node_list}


@pytest.mark.parametrize(
    ("name", "queue", "queues", "arguments", "hierarchy", "scores", "status"),
    CASES,
    ids=[f"case{i}" for i in range(len(CASES))],
)
def test_node_group(name, queue, queues, arguments, hierarchy, scores, status):
    """TestNodeGroup, each case by its name: score and predicate status of the one pod per node."""
    ssn = session(
        conf(arguments, hierarchy),
        queues,
        [build_pod("c1", "p", "", "Pending", res("2", "4Gi"), "pg")],
        [build_podgroup("pg", "c1", queue, 0, None, "")],
    )
    (task,) = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    names = [n.name for n in ssn.node_list]
    got = dict(zip(names, (float(s) for s in ssn.node_scores(task, ssn.all_rows)), strict=True))
    assert got == scores, name
    assert statuses(ssn, task) == status, name


LIMIT_NODES = [
    build_node("n1", res("16", "64Gi", pods="32"), {GROUP: "group1"}),
    build_node("n2", res("16", "64Gi", pods="32"), {GROUP: "group2"}),
]
LIMIT_AFFINITY = affinity(["group1", "group2"], ["group1"])
PENDING = build_pod("limit", "pending", "", "Pending", res("2", "4Gi"), "pg-pending")
PENDING_PG = build_podgroup("pg-pending", "limit", "q", 0, None, "")

# (TestNodeGroupResourceLimits case name, annotation or None, extra running pods, statuses)
LIMIT_CASES = [
    ("no annotation keeps existing behavior", None, False, {"n1": OK, "n2": OK}),
    (
        "under nodegroup limit permits preferred nodegroup",
        '{"group1":{"cpu":"3","memory":"8Gi"}}',
        False,
        {"n1": OK, "n2": OK},
    ),
    ("omitted resource dimension is unlimited", '{"group1":{"cpu":"3"}}', False, {"n1": OK, "n2": OK}),
    ("specified resource dimension is enforced", '{"group1":{"cpu":"1"}}', False, {"n1": FAIL, "n2": OK}),
    (
        "over nodegroup limit rejects preferred nodegroup and permits fallback",
        '{"group1":{"cpu":"3","memory":"8Gi"}}',
        True,
        {"n1": FAIL, "n2": OK},
    ),
    ("invalid annotation rejects queue tasks", '{"group1":{"cpu":', False, {"n1": FAIL, "n2": FAIL}),
]


@pytest.mark.parametrize(
    ("name", "annotation", "used", "status"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES]
)
def test_node_group_resource_limits(name, annotation, used, status):
    """TestNodeGroupResourceLimits: the pending task's predicate per node ("used": the case's
    running 2-cpu pod of the same queue on n1)."""
    queue = build_queue(
        "q", affinity=LIMIT_AFFINITY, annotations={LIMITS: annotation} if annotation else None
    )
    pods, pgs = [PENDING], [PENDING_PG]
    if used:
        pods.append(build_pod("limit", "used", "n1", "Running", res("2", "4Gi"), "pg-used"))
        pgs.append(build_podgroup("pg-used", "limit", "q", 0, None, "Running"))
    ssn = session(conf(), [queue], pods, pgs, LIMIT_NODES)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "pending")
    assert statuses(ssn, task) == status, name


def test_node_group_resource_limit_allocation_event():
    """TestNodeGroupResourceLimitAllocationEvent: after the first task is allocated on n1 in the
    session, the second (2 cpu more, limit 3) no longer passes there."""
    queue = build_queue(
        "q-event-limit",
        affinity=affinity(["group1"]),
        annotations={LIMITS: '{"group1":{"cpu":"3","memory":"8Gi"}}'},
    )
    ssn = session(
        conf(),
        [queue],
        [
            build_pod("limit", "pending-1", "", "Pending", res("2", "4Gi"), "pg-1"),
            build_pod("limit", "pending-2", "", "Pending", res("2", "4Gi"), "pg-2"),
        ],
        [
            build_podgroup("pg-1", "limit", "q-event-limit", 0, None, ""),
            build_podgroup("pg-2", "limit", "q-event-limit", 0, None, ""),
        ],
        [build_node("n1", res("16", "64Gi", pods="32"), {GROUP: "group1"})],
    )
    tasks = {t.name: t for j in ssn.jobs.values() for t in j.tasks.values()}
    (node,) = ssn.node_list
    assert ssn.predicate(tasks["pending-1"], node) is None
    stmt = ssn.statement()
    stmt.allocate(tasks["pending-1"], "n1")
    assert ssn.predicate(tasks["pending-2"], node) == "node group resource limit exceeded"
