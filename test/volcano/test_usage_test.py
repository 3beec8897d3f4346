"""Volcano's pkg/scheduler/plugins/usage tests, ported as data: usage_test.go (TestUsageEstimatorConfig,
TestUsageConfigParsesBestEffortResourceValues, TestUsageThresholdsKeepDefaultWhenOutOfRange,
TestUsageWeightsKeepDefaultWhenNegative, TestUsage_predicateFn, TestUsage_nodeOrderFn,
TestUsage_prioritizeNodesDoesNotDoubleCountNodeOrder, TestShouldAddToShadowCache), estimator_test.go
(every test) and shadow_cache_test.go.

Differs: TestUsageConfigKeepsDefaultForGenericStringValues. Volcano's ``GetInt`` / ``GetFloat64`` keep
the default for a number written as a string (``usage.weight: "7"``); Caldera reads every plugin's
numeric arguments from strings too (config/arguments.py ``coerce``), so here ``"7"`` is 7: the test
below checks that reading, and its case is counted as not passing.

Not ported from shadow_cache_test.go: TestShadowLoadCache_Reset, _ResetReusesMaps, _IsClean and
_ConcurrentAccess (Volcano keeps one cache across sessions, behind a lock, and resets it; here each
session builds its own ``ShadowLoad``, used from one thread): nothing of them has a counterpart.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from caldera.config.conf import parse_conf
from caldera.framework.model import TaskInfo, TaskStatus
from caldera.framework.objects import Pod, convert
from caldera.framework.resource import Resource
from caldera.framework.session import open_session
from caldera.framework.usage import NodeUsage, UsageView
from caldera.hack.scenario import cluster
from caldera.plugins.usage import (
    CPU_REASON,
    MEMORY_REASON,
    MIB,
    ShadowLoad,
    UsagePlugin,
    applied_risk_factor,
    composite_utilization,
    estimate_best_effort,
    estimate_pod_resource,
    in_metrics_blind_spot,
    load_composite,
    node_score,
    pod_request_limit,
)
from volcano.port import REGISTRY, build_node, build_pod, build_podgroup, build_queue, res

NOW = 1_800_000_000.0
EPS = 1e-8


def conf(arguments: dict | None = None) -> str:
    plugin: dict = {"name": "usage"}
    if arguments is not None:
        plugin["arguments"] = arguments
    return yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": [plugin]}]})


def plugin(arguments: dict) -> UsagePlugin:
    """Volcano's ``New(framework.Arguments{...})``: the arguments through the conf, then read."""
    option = parse_conf(conf(arguments), REGISTRY).tiers[0].plugins[0]
    p = UsagePlugin(option.arguments)
    p.read_arguments()
    return p


def settings(p: UsagePlugin) -> dict:
    return {
        "usage": p.usage_weight,
        "cpu": p.cpu_weight,
        "memory": p.memory_weight,
        "cpu_th": p.cpu_threshold,
        "mem_th": p.memory_threshold,
        "request_ratio": p.request_ratio,
        "burst_ratio": p.burst_ratio,
        "risk_threshold": p.risk_threshold,
        "risk_factor": p.risk_factor,
        "be_cpu": p.be_cpu,
        "be_mem": p.be_memory,
    }


DEFAULT_SETTINGS = {
    "usage": 5,
    "cpu": 1,
    "memory": 1,
    "cpu_th": 80,
    "mem_th": 80,
    "request_ratio": 0.7,
    "burst_ratio": 0.0,
    "risk_threshold": 0.6,
    "risk_factor": 1.2,
    "be_cpu": 250,
    "be_mem": 200 * MIB,
}

# --- usage_test.go: the configuration tests --------------------------------------------------------
# (Go test / part, arguments, settings that differ from the defaults)
CONFIG = [
    ("TestUsageEstimatorConfig/default", {}, {}),
    (
        "TestUsageEstimatorConfig/configured",
        {
            "estimator": {
                "request_ratio": 0.8,
                "burst_ratio": 0.3,
                "risk_threshold": 0.75,
                "risk_factor": 1.5,
                "be_cpu": "500m",
                "be_mem": "300Mi",
            }
        },
        {
            "request_ratio": 0.8,
            "burst_ratio": 0.3,
            "risk_threshold": 0.75,
            "risk_factor": 1.5,
            "be_cpu": 500,
            "be_mem": 300 * MIB,
        },
    ),
    (
        "TestUsageEstimatorConfig/invalid",
        {
            "estimator": {
                "request_ratio": 1.5,
                "burst_ratio": -0.1,
                "risk_threshold": 2.0,
                "risk_factor": 0.5,
                "be_cpu": "-1",
                "be_mem": "bad",
            }
        },
        {},
    ),
    (
        "TestUsageConfigParsesBestEffortResourceValues/string",
        {"estimator": {"be_cpu": "500m", "be_mem": "300Mi"}},
        {"be_cpu": 500, "be_mem": 300 * MIB},
    ),
    (
        "TestUsageConfigParsesBestEffortResourceValues/numeric",
        {"estimator": {"be_cpu": 500, "be_mem": 200}},
        {"be_cpu": 500, "be_mem": 200 * MIB},
    ),
    ("TestUsageThresholdsKeepDefaultWhenOutOfRange", {"thresholds": {"cpu": -1, "mem": 101}}, {}),
    (
        "TestUsageWeightsKeepDefaultWhenNegative",
        {"usage.weight": -1, "cpu.weight": -1, "memory.weight": -1},
        {},
    ),
]


@pytest.mark.parametrize(("case", "arguments", "differs"), CONFIG, ids=[c[0] for c in CONFIG])
def test_configuration(case, arguments, differs):
    got = settings(plugin(arguments))
    want = {**DEFAULT_SETTINGS, **differs}
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert math.isclose(got[key], value, abs_tol=EPS), (key, got[key], value)


def test_numbers_written_as_strings_are_read_as_numbers_unlike_volcano():
    """TestUsageConfigKeepsDefaultForGenericStringValues's arguments: Volcano keeps 5/1/1, 80/80 and
    the estimator's defaults (but parses be_cpu and be_mem); Caldera reads each string as its number."""
    got = settings(
        plugin(
            {
                "usage.weight": "7",
                "cpu.weight": "2",
                "memory.weight": "3",
                "thresholds": {"cpu": "85", "mem": "75"},
                "estimator": {
                    "request_ratio": "0.8",
                    "burst_ratio": "0.3",
                    "risk_threshold": "0.75",
                    "risk_factor": "1.5",
                    "be_cpu": "500m",
                    "be_mem": "300Mi",
                },
            }
        )
    )
    assert (got["usage"], got["cpu"], got["memory"], got["cpu_th"], got["mem_th"]) == (7, 2, 3, 85, 75)
    assert (got["request_ratio"], got["burst_ratio"], got["risk_threshold"], got["risk_factor"]) == (
        0.8,
        0.3,
        0.75,
        1.5,
    )
    assert (got["be_cpu"], got["be_mem"]) == (500, 300 * MIB)


def test_a_setting_volcano_does_not_read_is_refused():
    from caldera.config.conf import ConfError

    with pytest.raises(ConfError, match="thresholds has no setting 'gpu'"):
        parse_conf(conf({"thresholds": {"cpu": 80, "gpu": 50}}), REGISTRY)


# --- usage_test.go: the session tests ---------------------------------------------------------------
def usage(cpu: float, memory: float, age: float | None) -> NodeUsage:
    """Volcano's buildNodeUsage: ``age`` seconds before now; None: the zero time."""
    return NodeUsage(cpu, memory, 0.0 if age is None else NOW - age)


ARGS = {"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1, "thresholds": {"cpu": 80, "mem": 80}}
NODES = ["n1", "n2", "n3", "n4", "n5"]


def session(arguments: dict, node_names: list[str], usages: dict[str, NodeUsage], pods: int = 2):
    parsed = parse_conf(conf(arguments), REGISTRY)
    node_alloc = res("4", "8Gi", pods="10")
    snap = cluster(
        nodes=[build_node(name, node_alloc) for name in node_names],
        pods=[build_pod("c1", f"p{i}", "", "Pending", res("1", "1Gi"), "pg1") for i in range(1, pods + 1)],
        podgroups=[build_podgroup("pg1", "c1", "q1", 0, None, "")],
        queues=[build_queue("q1", 1)],
    )
    snap.node_usage = UsageView(usages, NOW)
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


PREDICATE_USAGE = {
    "n1": usage(81, 60, 0),
    "n2": usage(60, 81, 0),
    "n3": usage(80, 79, 0),
    "n4": usage(90, 81, 6 * 60),
    "n5": usage(90, 81, None),
}
# (case name in TestUsage_predicateFn, node, the reason it fails with or None)
PREDICATE = [
    (
        "The node cannot be scheduled, because of the CPU load of the node exceeds the upper limit.",
        "n1",
        CPU_REASON,
    ),
    (
        "The node cannot be scheduled, because of the memory load of the node exceeds the upper limit.",
        "n2",
        MEMORY_REASON,
    ),
    (
        "The node can be scheduled, because of the CPU usage and memory usage do not exceed the upper limit.",
        "n3",
        None,
    ),
    (
        "The node can be scheduled, because of the metrics are not updated in the latest 5 minutes, "
        "and the usage function is invalid.",
        "n4",
        None,
    ),
    (
        "The node can be scheduled, because of the metric time is in the initial state, and the usage "
        "function is invalid.",
        "n5",
        None,
    ),
]


@pytest.mark.parametrize(("case", "node", "reason"), PREDICATE, ids=[c[1] for c in PREDICATE])
def test_predicate(case, node, reason):
    ssn = session(ARGS, [node], PREDICATE_USAGE)
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            feasible = ssn.feasible_rows(task, resources=False)
            explained = ssn.explain_predicates(task, resources=False)
            if reason is None:
                assert list(feasible) == [0]
                assert explained == {}
            else:
                assert list(feasible) == []
                assert explained == {reason: 1}


NODE_ORDER_USAGE = {
    "n1": usage(30, 50, 0),
    "n2": usage(60, 50, 0),
    "n3": usage(60, 80, 0),
    "n4": usage(10, 20, 6 * 60),
    "n5": usage(0, 0, None),
}
# (case name in TestUsage_nodeOrderFn, arguments, expected score per node for c1/p1)
NODE_ORDER = [
    (
        "Node scoring in the default weight configuration scenario.",
        ARGS,
        {"n1": 300, "n2": 225, "n3": 150, "n4": 0, "n5": 0},
    ),
    (
        "Node scoring gives priority to memory resources",
        {**ARGS, "cpu.weight": 2, "memory.weight": 8},
        {"n1": 270, "n2": 240, "n3": 120, "n4": 0, "n5": 0},
    ),
]


def scores(ssn) -> dict[str, float]:
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values() if t.name == "p1")
    names = [n.name for n in ssn.node_list]
    return dict(zip(names, map(float, ssn.node_scores(task, ssn.all_rows)), strict=True))


@pytest.mark.parametrize(("case", "arguments", "expected"), NODE_ORDER, ids=[c[0][:40] for c in NODE_ORDER])
def test_node_order(case, arguments, expected):
    got = scores(session(arguments, NODES, NODE_ORDER_USAGE, pods=1))
    assert got.keys() == expected.keys()
    for name, want in expected.items():
        assert math.isclose(got[name], want, abs_tol=EPS), (name, got[name], want)


def test_prioritize_nodes_does_not_double_count_node_order():
    """TestUsage_prioritizeNodesDoesNotDoubleCountNodeOrder: the session's total score is the plugin's once."""
    args = {"usage.weight": 5, "cpu.weight": 1, "memory.weight": 1}
    got = scores(session(args, ["n1", "n2"], {"n1": usage(30, 50, 0), "n2": usage(60, 50, 0)}, pods=1))
    assert got == pytest.approx({"n1": 300, "n2": 225}, abs=EPS)


# TestShouldAddToShadowCache: (case, status, node, started seconds ago or None, expected)
SHADOW_DECISIONS = [
    ("pending without node is not tracked", TaskStatus.PENDING, "", None, False),
    ("pending with node is not treated as allocated", TaskStatus.PENDING, "node1", None, False),
    ("allocated task is tracked", TaskStatus.ALLOCATED, "node1", None, True),
    ("binding task is tracked", TaskStatus.BINDING, "node1", None, True),
    ("bound task is tracked", TaskStatus.BOUND, "node1", None, True),
    ("recent running task is tracked", TaskStatus.RUNNING, "node1", 60, True),
    ("old running task is not tracked", TaskStatus.RUNNING, "node1", 600, False),
    ("completed task is not tracked", TaskStatus.SUCCEEDED, "node1", None, False),
]


def _stamp(seconds_ago: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(NOW - seconds_ago, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.mark.parametrize(
    ("case", "status", "node", "started", "expected"), SHADOW_DECISIONS, ids=[c[0] for c in SHADOW_DECISIONS]
)
def test_should_add_to_shadow_cache(case, status, node, started, expected):
    pod = Pod() if started is None else convert(Pod, {"status": {"startTime": _stamp(started)}})
    task = TaskInfo("u", "p", "ns", "j", Resource(), status=status, node_name=node, pod=pod)
    assert in_metrics_blind_spot(task, 5 * 60, NOW) is expected


# --- estimator_test.go ----------------------------------------------------------------------------------
LOAD_COMPOSITE = [  # TestCalcLoadCompositePercentage
    ("equal weights", 0.4, 0.6, 1, 1, 0.5),
    ("cpu weight dominant", 0.8, 0.2, 3, 1, 0.65),
    ("zero weights", 0.8, 0.2, 0, 0, 0),
]


@pytest.mark.parametrize(
    ("case", "cpu", "mem", "cw", "mw", "want"), LOAD_COMPOSITE, ids=[c[0] for c in LOAD_COMPOSITE]
)
def test_calc_load_composite_percentage(case, cpu, mem, cw, mw, want):
    assert math.isclose(load_composite(cpu, mem, cw, mw), want, abs_tol=1e-6)


RISK = [  # TestCalcAppliedRiskFactor
    ("below threshold", 0.59, 0.6, 1.2, 1.0),
    ("at threshold", 0.6, 0.6, 1.2, 1.2),
    ("above threshold", 0.9, 0.6, 1.2, 1.2),
    ("risk factor lower than one is ignored", 0.9, 0.6, 0.8, 1.0),
]


@pytest.mark.parametrize(("case", "load", "threshold", "factor", "want"), RISK, ids=[c[0] for c in RISK])
def test_calc_applied_risk_factor(case, load, threshold, factor, want):
    assert math.isclose(applied_risk_factor(load, threshold, factor), want, abs_tol=1e-6)


POD_ESTIMATE = [  # TestEstimatePodResource
    ("default weights estimate request", 500, 2000, 1.0, 0.0, 1.0, 500),
    ("zero weights estimate zero", 500, 2000, 0.0, 0.0, 1.0, 0),
    ("request and burst weights cover full limit", 500, 2000, 1.0, 1.0, 1.0, 2000),
    ("custom burst weight", 500, 2000, 0.5, 0.2, 1.0, 550),
    ("risk factor applies and clamps to limit", 500, 600, 1.0, 0.0, 1.2, 600),
    ("missing limit uses request as effective limit", 500, 0, 1.0, 1.0, 1.2, 500),
]


@pytest.mark.parametrize(
    ("case", "req", "lim", "rw", "bw", "risk", "want"), POD_ESTIMATE, ids=[c[0] for c in POD_ESTIMATE]
)
def test_estimate_pod_resource(case, req, lim, rw, bw, risk, want):
    assert math.isclose(estimate_pod_resource(req, lim, rw, bw, risk), want, abs_tol=1e-6)


BEST_EFFORT = [  # TestEstimateBestEffortResource
    ("base configured value", 250, 1.0, 250),
    ("risk factor applies", 250, 1.2, 300),
    ("negative configured value is clamped to zero", -1, 1.2, 0),
]


@pytest.mark.parametrize(("case", "value", "risk", "want"), BEST_EFFORT, ids=[c[0] for c in BEST_EFFORT])
def test_estimate_best_effort_resource(case, value, risk, want):
    assert math.isclose(estimate_best_effort(value, risk), want, abs_tol=1e-6)


COMPOSITE = [  # TestCalcCompositeUtilization
    ("no shadow load, 50% real", 50, 0, 8000, 0.5),
    ("50% real + shadow brings to 75%", 50, 2000, 8000, 0.75),
    ("overflow clamped to 1.0", 80, 5000, 8000, 1.0),
    ("zero capacity returns 0", 50, 1000, 0, 0),
    ("zero everything", 0, 0, 8000, 0),
    ("100% real load, no shadow", 100, 0, 8000, 1.0),
]


@pytest.mark.parametrize(("case", "real", "shadow", "cap", "want"), COMPOSITE, ids=[c[0] for c in COMPOSITE])
def test_calc_composite_utilization(case, real, shadow, cap, want):
    assert math.isclose(float(composite_utilization(real, shadow, cap)), want, abs_tol=1e-6)


NODE_SCORE = [  # TestCalcNodeScore
    ("zero utilization - max score with usageWeight=1", 0, 0, 1, 1, 1, 100),
    ("full utilization - zero score", 1.0, 1.0, 1, 1, 1, 0),
    ("50% utilization both - score 250 with usageWeight=5", 0.5, 0.5, 1, 1, 5, 250),
    ("cpu 30%, mem 50%, equal weights, usageWeight=5", 0.3, 0.5, 1, 1, 5, 300),
    ("cpu 60%, mem 50%, cpu weight=2, mem weight=8, usageWeight=5", 0.6, 0.5, 2, 8, 5, 240),
    ("zero weights returns 0", 0.5, 0.5, 0, 0, 5, 0),
]


@pytest.mark.parametrize(
    ("case", "cpu", "mem", "cw", "mw", "uw", "want"), NODE_SCORE, ids=[c[0] for c in NODE_SCORE]
)
def test_calc_node_score(case, cpu, mem, cw, mw, uw, want):
    assert math.isclose(float(node_score(cpu, mem, cw, mw, uw)), want, abs_tol=1e-6)


def _container(req: dict, lim: dict, restart: str = "") -> dict:
    c: dict = {"name": "c", "resources": {"requests": req, "limits": lim}}
    if restart:
        c["restartPolicy"] = restart
    return c


GI = 1024**3
REQUEST_LIMIT = [  # TestGetPodResourceRequestLimit: (case, containers, init containers, expected)
    (
        "single container with cpu and memory request and limit",
        [_container({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1000m", "memory": "2Gi"})],
        [],
        (500, 1000, GI, 2 * GI),
    ),
    (
        "multiple containers - requests/limits summed",
        [
            _container({"cpu": "200m", "memory": "1Gi"}, {"cpu": "500m", "memory": "2Gi"}),
            _container({"cpu": "300m", "memory": "2Gi"}, {"cpu": "700m", "memory": "3Gi"}),
        ],
        [],
        (500, 1200, 3 * GI, 5 * GI),
    ),
    (
        "init container takes max",
        [_container({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1000m", "memory": "2Gi"})],
        [_container({"cpu": "2000m", "memory": "4Gi"}, {"cpu": "3000m", "memory": "5Gi"})],
        (2000, 3000, 4 * GI, 5 * GI),
    ),
    (
        "restartable init container is added as sidecar",
        [_container({"cpu": "1000m", "memory": "2Gi"}, {"cpu": "2000m", "memory": "3Gi"})],
        [_container({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "2000m", "memory": "2Gi"}, "Always")],
        (2000, 4000, 3 * GI, 5 * GI),
    ),
    ("no resources specified (BestEffort)", [{"name": "c"}], [], (0, 0, 0, 0)),
]


@pytest.mark.parametrize(
    ("case", "containers", "inits", "want"), REQUEST_LIMIT, ids=[c[0] for c in REQUEST_LIMIT]
)
def test_get_pod_resource_request_limit(case, containers, inits, want):
    pod = convert(Pod, {"spec": {"containers": containers, "initContainers": inits}})
    assert pod_request_limit(pod) == pytest.approx(want)


# --- shadow_cache_test.go -------------------------------------------------------------------------------
def test_new_shadow_load_is_clean():
    """TestNewShadowLoadCache."""
    shadow = ShadowLoad(2)
    assert not shadow.added and not shadow.cpu.any() and not shadow.memory.any()


def test_add_estimate():
    """TestShadowLoadCache_AddEstimate."""
    shadow = ShadowLoad(1)
    for uid, cpu, mem, total in [
        ("task1", 1000, 2048, (1000, 2048)),
        ("task2", 500, 1024, (1500, 3072)),
        ("task3", 800, 1600, (2300, 4672)),
    ]:
        shadow.add(uid, 0, cpu, mem)
        assert (shadow.cpu[0], shadow.memory[0]) == pytest.approx(total)
    assert shadow.added["task1"] == (0, 1000, 2048)
    assert shadow.added["task3"] == (0, 800, 1600)


def test_add_estimate_update_existing_task():
    """TestShadowLoadCache_AddEstimate_UpdateExistingTask: node1 is row 0, node2 row 1."""
    shadow = ShadowLoad(2)
    shadow.add("task1", 0, 1000, 2048)
    shadow.add("task1", 1, 500, 1024)
    assert (shadow.cpu[0], shadow.memory[0]) == (0, 0)
    assert (shadow.cpu[1], shadow.memory[1]) == (500, 1024)
    shadow.subtract("task1")
    assert (shadow.cpu[1], shadow.memory[1]) == (0, 0)


def test_sub_estimate_by_snapshot():
    """TestShadowLoadCache_SubEstimateBySnapshot."""
    shadow = ShadowLoad(1)
    shadow.add("task1", 0, 1000, 2048)
    shadow.add("task2", 0, 500, 1024)
    shadow.subtract("task2")
    assert (shadow.cpu[0], shadow.memory[0]) == (1000, 2048)
    shadow.subtract("task1")
    assert (shadow.cpu[0], shadow.memory[0]) == (0, 0)
    assert "task1" not in shadow.added


def test_sub_estimate_of_unknown_task_is_a_no_op():
    """TestShadowLoadCache_SubEstimateBySnapshot_NonExistent."""
    shadow = ShadowLoad(1)
    shadow.add("task1", 0, 100, 200)
    shadow.subtract("nonexistent")
    assert (shadow.cpu[0], shadow.memory[0]) == (100, 200)


def test_snapshot_consistency():
    """TestShadowLoadCache_SnapshotConsistency."""
    shadow = ShadowLoad(1)
    for uid, cpu, mem in [("pod1", 800, 1600), ("pod2", 960, 1920), ("pod3", 1152, 2304)]:
        shadow.add(uid, 0, cpu, mem)
    assert (shadow.cpu[0], shadow.memory[0]) == pytest.approx((2912, 5824))
    shadow.subtract("pod3")
    assert (shadow.cpu[0], shadow.memory[0]) == pytest.approx((1760, 3520))
    shadow.subtract("pod1")
    assert shadow.cpu[0] == pytest.approx(960)
    shadow.subtract("pod2")
    assert (shadow.cpu[0], shadow.memory[0]) == (0, 0)


def test_multiple_nodes():
    """TestShadowLoadCache_MultipleNodes and _GetNodeEst_NonExistentNode (row 3: nothing added)."""
    shadow = ShadowLoad(4)
    shadow.add("t1", 0, 1000, 2000)
    shadow.add("t2", 1, 3000, 4000)
    shadow.add("t3", 2, 500, 800)
    assert list(zip(shadow.cpu, shadow.memory, strict=True)) == [
        (1000, 2000),
        (3000, 4000),
        (500, 800),
        (0, 0),
    ]


def test_allocate_deallocate_exact_match():
    """TestShadowLoadCache_AllocateDeallocateExactMatch."""
    shadow = ShadowLoad(1)
    shadow.add("task-a", 0, 1234.5678, 9876543.21)
    shadow.add("task-b", 0, 567.89, 1234567.89)
    shadow.subtract("task-a")
    shadow.subtract("task-b")
    assert abs(shadow.cpu[0]) < 1e-6 and abs(shadow.memory[0]) < 1e-6


def test_shadow_estimates_follow_the_sessions_placements():
    """handleAllocate / handleDeallocate in a session: a placement on n1 lowers n1's score by its
    estimate (1 cpu, 1Gi requested, no limits: 0.7 of each, risk 1 below 0.6 load), and discarding
    it gives the score back exactly."""
    args = {"usage.weight": 1, "cpu.weight": 1, "memory.weight": 1}
    ssn = session(args, ["n1", "n2"], {"n1": usage(10, 10, 0), "n2": usage(10, 10, 0)}, pods=1)
    before = scores(ssn)
    task = next(t for j in ssn.jobs.values() for t in j.tasks.values())
    stmt = ssn.statement()
    stmt.allocate(task, "n1")
    after = dict(
        zip([n.name for n in ssn.node_list], map(float, ssn.node_scores(task, ssn.all_rows)), strict=True)
    )
    # cpu: 10% of 4000m + 700m over 4000m = 0.275; memory: 10% of 8Gi + 0.7Gi over 8Gi = 0.1875
    assert after["n1"] == pytest.approx(((1 - 0.275) + (1 - 0.1875)) / 2 * 100)
    assert after["n2"] == before["n2"] == pytest.approx(90)
    stmt.discard()
    assert float(ssn.node_scores(task, ssn.all_rows)[0]) == pytest.approx(before["n1"])
    assert np.all(ssn.plugins["usage"].shadow.cpu == 0)
