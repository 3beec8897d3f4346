"""Volcano's pkg/scheduler/plugins/resource-strategy-fit tests, ported as data:
resource_strategy_fit_test.go (Test_calculateWeight, TestScore, TestResourceStrategyFitPlugin_OnSessionOpen,
TestResourceStrategyFitPlugin, TestAllocate, Test_findResourceConfigWithPrefix), sra_test.go
(TestArguments, TestNode) and proportional_test.go (Test_checkNodeResourceIsProportional).

Not ported: Test_mostRequestedScore / Test_leastRequestedScore (a helper's (score, error) pair with no
counterpart here; what they check, a node without the resource and a request over capacity, is in
TestScore's "test8" and "node-fully-allocated" below).
"""

from __future__ import annotations

import pytest
import yaml

from caldera.config.conf import parse_conf
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster
from caldera.plugins.resource_strategy_fit import find_setting, proportions, sra_weights
from volcano.port import REGISTRY, build_node, build_pod, build_podgroup, build_queue, res, run

GPU, FOO = "nvidia.com/gpu", "example.com/foo"
LEAST, MOST = "LeastAllocated", "MostAllocated"


def conf(arguments: dict, *more: str) -> str:
    """The plugin alone (node order enabled), with these arguments, as Volcano's tests build the tier."""
    doc = {
        "actions": "allocate",
        "tiers": [{"plugins": [{"name": "resource-strategy-fit", "arguments": arguments}, *more]}],
    }
    return yaml.safe_dump(doc)


def session(arguments, nodes, pods, queue="c1"):
    parsed = parse_conf(conf(arguments), REGISTRY)
    snap = cluster(
        nodes=nodes,
        pods=pods,
        podgroups=[build_podgroup("pg1", "c1", queue, 0, None, "")],
        queues=[build_queue(queue, 1)],
    )
    return open_session(snap, parsed.tiers, REGISTRY.plugins, parsed.configurations)


def scores(ssn) -> dict[str, dict[str, float]]:
    names = [n.name for n in ssn.node_list]
    return {
        f"{t.namespace}/{t.name}": dict(zip(names, map(float, ssn.node_scores(t, ssn.all_rows)), strict=True))
        for j in ssn.jobs.values()
        for t in j.tasks.values()
        if not t.node_name
    }


def resources(**settings: tuple[str, int]) -> dict:
    return {name.replace("_", "."): {"type": kind, "weight": w} for name, (kind, w) in settings.items()}


# --- Test_calculateWeight ------------------------------------------------------------------------
# (case, resourceStrategyFitWeight given or None, resources argument, expected (weight, resources))
CALCULATE_WEIGHT = [
    (
        "test1",
        10,
        {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}},
        (10, {"cpu": (MOST, 1), "memory": (LEAST, 2)}),
    ),
    (
        "test2",
        None,
        {"cpu": {"type": MOST, "weight": 1}, "memory": {"type": LEAST, "weight": 2}},
        (10, {"cpu": (MOST, 1), "memory": (LEAST, 2)}),
    ),
    ("test3", 10, None, (10, {"cpu": (LEAST, 1), "memory": (LEAST, 1)})),
    (
        "test4",
        None,
        {"cpu": {"type": LEAST, "weight": 1}, "*": {"type": MOST, "weight": 2}},
        (10, {"cpu": (LEAST, 1)}),
    ),
    (
        "test5",
        None,
        {"nvidia.com/gpu/*": {"type": MOST, "weight": 3}, "cloudml.gpu**": {"type": LEAST, "weight": 2}},
        (10, {"nvidia.com/gpu/*": (MOST, 3)}),
    ),
    (
        "test6",
        None,
        {
            "memory": {"type": LEAST, "weight": 1},
            "cloudml.*.gpu": {"type": MOST, "weight": 2},
            "*.com/gpu": {"type": MOST, "weight": 3},
        },
        (10, {"memory": (LEAST, 1)}),
    ),
    (
        "test7",
        None,
        {
            "nvidia.com/gpu/*": {"type": MOST, "weight": 3},
            "example.com/foo/*": {"type": LEAST, "weight": 2},
            "*test*resource*": {"type": MOST, "weight": 4},
            "*": {"type": LEAST, "weight": 1},
        },
        (10, {"nvidia.com/gpu/*": (MOST, 3), "example.com/foo/*": (LEAST, 2)}),
    ),
]


@pytest.mark.parametrize(
    ("case", "weight", "given", "expected"), CALCULATE_WEIGHT, ids=[c[0] for c in CALCULATE_WEIGHT]
)
def test_calculate_weight(case, weight, given, expected):
    """Test_calculateWeight. Cases test4-7 also pass ``ResourceStrategyFitPlusWeight``, an argument
    Volcano does not read (so the weight is its default, 10); Caldera refuses an unknown argument,
    so it is left out here and its refusal checked below."""
    arguments = {}
    if weight is not None:
        arguments["resourceStrategyFitWeight"] = weight
    if given is not None:
        arguments["resources"] = given
    plugin = REGISTRY.plugins["resource-strategy-fit"](
        parse_conf(conf(arguments), REGISTRY).tiers[0].plugins[0].arguments
    )
    plugin.on_session_open(session({}, [], []))
    assert (plugin.weight, plugin.resources) == expected, case


def test_an_argument_volcano_does_not_read_is_refused():
    from caldera.config.conf import ConfError

    with pytest.raises(ConfError, match="has no argument 'ResourceStrategyFitPlusWeight'"):
        parse_conf(conf({"ResourceStrategyFitPlusWeight": 10}), REGISTRY)


# --- TestScore -------------------------------------------------------------------------------------
def least(weight, cpu, memory):
    return weight, resources(cpu=(LEAST, cpu), memory=(LEAST, memory))


def most(weight, cpu, memory):
    return weight, resources(cpu=(MOST, cpu), memory=(MOST, memory))


def mixed(weight, cpu_type, cpu, memory_type, memory):
    return weight, resources(cpu=(cpu_type, cpu), memory=(memory_type, memory))


def pod_level(kind, weights):
    return {"volcano.sh/resource-strategy-scoring-type": kind, "volcano.sh/resource-strategy-weight": weights}


# (case, task (milli cpu, memory bytes, annotations), node (used cpu, used memory, allocatable cpu,
#  allocatable memory), (plugin weight, resources), expected score)
SCORE = [
    ("test1", (100, 100, {}), (200, 200, 500, 500), least(10, 1, 1), 400),
    ("test2", (100, 100, {}), (200, 200, 400, 400), least(10, 1, 1), 250),
    ("test3", (100, 100, {}), (200, 200, 500, 500), most(10, 1, 1), 600),
    ("test4", (100, 100, {}), (200, 200, 400, 400), most(10, 1, 1), 750),
    ("test5", (100, 100, {}), (200, 200, 500, 500), mixed(10, LEAST, 2, MOST, 1), 466.66666667),
    ("test6", (100, 100, {}), (200, 200, 500, 500), mixed(10, LEAST, 1, MOST, 2), 533.33333333),
    ("test7", (0, 100, {}), (200, 200, 500, 500), mixed(10, LEAST, 1, MOST, 2), 600),
    ("test8", (100, 100, {}), (200, 200, 0, 400), mixed(10, LEAST, 1, MOST, 2), 500),
    ("test9", (100, 100, {}), (200, 200, 500, 500), (10, resources(memory=(MOST, 2))), 600),
    (
        "pod-level-scoring-least-allocated",
        (100, 100, pod_level(LEAST, '{"cpu": 2, "memory": 1}')),
        (200, 200, 500, 500),
        least(10, 1, 1),
        400,
    ),
    (
        "pod-level-scoring-most-allocated",
        (100, 100, pod_level(MOST, '{"cpu": 1, "memory": 2}')),
        (200, 200, 500, 500),
        least(10, 1, 1),
        600,
    ),
    (
        "pod-level-scoring-invalid-json",
        (100, 100, pod_level(LEAST, "invalid-json")),
        (200, 200, 500, 500),
        least(10, 1, 1),
        0,
    ),
    (
        "pod-level-scoring-missing-resource-weight",
        (100, 100, pod_level(LEAST, '{"cpu": 2}')),
        (200, 200, 500, 500),
        least(10, 1, 1),
        400,
    ),
    ("zero-resources-requested", (0, 0, {}), (200, 200, 500, 500), least(10, 1, 1), 0),
    ("node-fully-allocated", (100, 100, {}), (500, 500, 500, 500), least(10, 1, 1), 0),
    ("mixed-scoring-strategies", (100, 100, {}), (200, 200, 500, 500), mixed(10, LEAST, 3, MOST, 1), 450),
    ("high-weight-scenario", (100, 100, {}), (200, 200, 500, 500), least(20, 5, 5), 800),
]


@pytest.mark.parametrize(("case", "task", "node", "weights", "expected"), SCORE, ids=[c[0] for c in SCORE])
def test_score(case, task, node, weights, expected):
    """TestScore: one task on one node whose used and allocatable cpu (millicores) and memory
    (bytes) are the case's; the used part is a running pod of another scheduler."""
    cpu, memory, annotations = task
    used_cpu, used_memory, alloc_cpu, alloc_memory = node
    weight, given = weights
    n = build_node("n1", {"cpu": f"{alloc_cpu}m", "memory": str(alloc_memory)})
    other = build_pod(
        "c1", "used", "n1", "Running", res(f"{used_cpu}m", str(used_memory)), "", scheduler="other"
    )
    pod = build_pod("c1", "p", "", "Pending", res(f"{cpu}m", str(memory)), "pg1", annotations=annotations)
    ssn = session({"resourceStrategyFitWeight": weight, "resources": given}, [n], [other, pod])
    assert scores(ssn)["c1/p"]["n1"] == pytest.approx(expected, abs=1e-6), case


def test_on_session_open_with_nothing_in_the_session():
    """TestResourceStrategyFitPlugin_OnSessionOpen: opening on a session without nodes or pods works,
    and with default arguments only the score is registered (no proportional predicate)."""
    ssn = session({}, [], [])
    assert "resource-strategy-fit" in ssn.score_parts
    assert "resource-strategy-fit" not in ssn.bulk_predicate_fns


# --- TestResourceStrategyFitPlugin -----------------------------------------------------------------
def plugin_pods():
    return {
        "p1": build_pod("c1", "p1", "", "Pending", res("1", "1Gi", **{FOO: "2"}), "pg1"),
        "p2": build_pod("c1", "p2", "", "Pending", res("1", "1Gi", **{FOO: "3"}), "pg1"),
        "p3": build_pod("c1", "p3", "", "Pending", res("1", "10Gi", **{GPU: "2"}), "pg1"),
        "p4": build_pod("c1", "p4", "", "Pending", res("1", "1Gi", **{GPU: "3"}), "pg1"),
        "p5": build_pod("c1", "p5", "", "Pending", res("1", "1Gi", **{GPU: "4", FOO: "4"}), "pg1"),
    }


def plugin_nodes():
    base = {"cpu": "4", "memory": "4Gi", "pods": "10"}
    return {
        "n1": build_node("n1", {**base, GPU: "10"}),
        "n2": build_node("n2", {**base, GPU: "5"}),
        "n3": build_node("n3", {**base, FOO: "10"}),
        "n4": build_node("n4", {**base, FOO: "5"}),
        "n5": build_node("n5", {**base, GPU: "10", FOO: "5"}),
        # Go's addResource twice on one map: the second value (10) stands
        "n6": build_node("n6", {**base, FOO: "10"}),
    }


PLUGIN_CASES = [
    (
        ["p1", "p2", "p3", "p4"],
        ["n1", "n2", "n3", "n4"],
        {"nvidia.com/gpu": (MOST, 1), "example.com/foo": (LEAST, 1)},
        {
            "c1/p1": {"n1": 0, "n2": 0, "n3": 800, "n4": 600},
            "c1/p2": {"n1": 0, "n2": 0, "n3": 700, "n4": 400},
            "c1/p3": {"n1": 200, "n2": 400, "n3": 0, "n4": 0},
            "c1/p4": {"n1": 300, "n2": 600, "n3": 0, "n4": 0},
        },
    ),
    (
        ["p5"],
        ["n5", "n6"],
        {"nvidia.com/gpu": (MOST, 1), "example.com/foo": (LEAST, 2)},
        {"c1/p5": {"n5": 266.66666666, "n6": 399.99999999}},
    ),
]


@pytest.mark.parametrize(("pods", "nodes", "given", "expected"), PLUGIN_CASES, ids=["case0", "case1"])
def test_resource_strategy_fit_plugin(pods, nodes, given, expected):
    """TestResourceStrategyFitPlugin "single job" (both cases): the score of every task on every node."""
    all_pods, all_nodes = plugin_pods(), plugin_nodes()
    arguments = {
        "resourceStrategyFitWeight": 10,
        "resources": {name: {"type": k, "weight": w} for name, (k, w) in given.items()},
    }
    got = scores(session(arguments, [all_nodes[n] for n in nodes], [all_pods[p] for p in pods]))
    assert got == {t: pytest.approx(row, abs=1e-6) for t, row in expected.items()}


# --- TestAllocate ----------------------------------------------------------------------------------
ALLOCATE_CONF = conf(
    {
        "resourceStrategyFitWeight": 10,
        "resources": {GPU: {"type": MOST, "weight": 2}, "cpu": {"type": LEAST, "weight": 1}},
    }
).replace(
    "  - arguments:",
    "  - name: gang\n  - name: drf\n  - name: proportion\n  - name: predicates\n  - name: nodeorder\n  - arguments:",
)


def allocate_cluster():
    worker = {"volcano.sh/task-spec": "worker"}
    gpu_sel, cpu_sel = {"nodeResourceType": "gpu"}, {"nodeResourceType": "cpu"}
    base = {"cpu": "5", "memory": "10Gi", "pods": "10"}
    nodes = [
        build_node("n1", {**base, GPU: "10"}, gpu_sel),
        build_node("n2", {**base, GPU: "10"}, gpu_sel),
        build_node("n3", base, cpu_sel),
        build_node("n4", base, cpu_sel),
    ]
    pods = {
        "gpu": [
            build_pod("c1", "p1", "", "Pending", res("1", "1G", **{GPU: "2"}), "pg1", worker, gpu_sel),
            build_pod("c1", "p2", "n2", "Running", res("1", "1G", **{GPU: "2"}), "pg1", worker, gpu_sel),
        ],
        "cpu": [
            build_pod("c1", "p3", "", "Pending", res("1", "1G"), "pg1", worker, cpu_sel),
            build_pod("c1", "p4", "n3", "Running", res("1", "1G"), "pg1", worker, cpu_sel),
        ],
    }
    return nodes, pods


@pytest.mark.parametrize(
    ("case", "kind", "expected"),
    [("GPU MostAllocated", "gpu", {"c1/p1": "n2"}), ("cpu LeastAllocated", "cpu", {"c1/p3": "n4"})],
)
def test_allocate(case, kind, expected):
    """TestAllocate: with gang, drf, proportion, predicates and nodeorder, the GPU pod joins the GPU
    node already in use (MostAllocated) and the cpu pod takes the idle cpu node (LeastAllocated)."""
    nodes, pods = allocate_cluster()
    out = run(
        ALLOCATE_CONF,
        nodes,
        pods[kind],
        [build_podgroup("pg1", "c1", "c1", 1, None, "Inqueue")],
        [build_queue("c1", 1)],
    )
    assert out.bound == expected, case


# --- Test_findResourceConfigWithPrefix -------------------------------------------------------------
FIND = [
    (
        "exact_match_priority",
        "nvidia.com/gpu",
        {"nvidia.com/gpu": (MOST, 3), "nvidia.com/*": (LEAST, 1)},
        (MOST, 3),
    ),
    (
        "longest_prefix_match",
        "nvidia.com/gpu/v100",
        {"nvidia.com/gpu/*": (MOST, 2), "nvidia.com/*": (LEAST, 1)},
        (MOST, 2),
    ),
    ("no_match_found", "example.com/foo", {"nvidia.com/gpu/*": (MOST, 2)}, None),
    ("empty_resources_map", "any.resource", {}, None),
    (
        "multiple_valid_wildcards_longest_match",
        "cloudml.gpu/tensorflow/v2",
        {"cloudml.gpu/tensorflow/*": (MOST, 3), "cloudml.gpu/*": (LEAST, 2), "cloudml/*": (MOST, 1)},
        (MOST, 3),
    ),
]


@pytest.mark.parametrize(("case", "name", "given", "expected"), FIND, ids=[c[0] for c in FIND])
def test_find_resource_config_with_prefix(case, name, given, expected):
    assert find_setting(name, given) == expected, case


# --- sra_test.go -----------------------------------------------------------------------------------
def test_arguments():
    """sra_test.go TestArguments: the sra and proportional settings as the plugin reads them."""
    parsed = parse_conf(
        conf(
            {
                "sra": {
                    "enable": True,
                    "resources": "nvidia.com/t4, nvidia.com/a10",
                    "weight": 3,
                    "resourceWeight": {"nvidia.com/t4": 1, "nvidia.com/a10": 2},
                },
                "proportional": {
                    "enable": True,
                    "resources": "nvidia.com/t4, nvidia.com/a10",
                    "resourceProportion": {
                        "nvidia.com/t4.cpu": 3,
                        "nvidia.com/t4.memory": 6,
                        "nvidia.com/a10.cpu": 4,
                        "nvidia.com/a10.memory": 8,
                    },
                },
            }
        ),
        REGISTRY,
    )
    arguments = parsed.tiers[0].plugins[0].arguments
    weight, weights = sra_weights(arguments.get_typed("sra", dict, {}))
    assert (weight, sum(weights.values()), weights) == (3, 3, {"nvidia.com/t4": 1, "nvidia.com/a10": 2})
    assert proportions(arguments.get_typed("proportional", dict, {})) == {
        "nvidia.com/t4": (3.0, 6.0),
        "nvidia.com/a10": (4.0, 8.0),
    }


T4, A10 = "nvidia.com/t4", "nvidia.com/a10"


def sra_cluster():
    base = {"cpu": "8", "memory": "16Gi", "pods": "10"}
    nodes = [
        build_node("n1", {"cpu": "32", "memory": "64Gi", "pods": "10"}),
        build_node("n2", {**base, T4: "16"}),
        build_node("n3", {**base, A10: "16"}),
        build_node("n4", {**base, T4: "8", A10: "16"}),
    ]
    pods = [
        build_pod("c1", "p1", "", "Pending", res("1", "1Gi"), "pg1"),
        build_pod("c1", "p2", "", "Pending", res("1.5", "0Gi", **{T4: "2"}), "pg1"),
        build_pod("c1", "p3", "", "Pending", res("2", "4Gi", **{A10: "2"}), "pg1"),
        build_pod("c1", "p4", "", "Pending", res("3", "4Gi", **{T4: "1", A10: "3"}), "pg1"),
    ]
    return nodes, pods


def sra(resources_text, weight, resource_weight):
    return {"enable": True, "resources": resources_text, "weight": weight, "resourceWeight": resource_weight}


STRATEGY = {"nvidia.com/t4": {"type": MOST, "weight": 3}, "cpu": {"type": LEAST, "weight": 1}}
SRA_CASES = [
    (
        "case1: single job score result in multi-GPU resource",
        {"resourceStrategyFitWeight": 0, "sra": sra("nvidia.com/t4, nvidia.com/a10", 5, {T4: 2, A10: 3})},
        {
            "c1/p1": {"n1": 500, "n2": 300, "n3": 200, "n4": 0},
            "c1/p2": {"n1": 0, "n2": 300, "n3": 0, "n4": 0},
            "c1/p3": {"n1": 0, "n2": 0, "n3": 200, "n4": 0},
            "c1/p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
        },
    ),
    (
        "case2: single job score result in single GPU resource",
        {"resourceStrategyFitWeight": 0, "sra": sra("nvidia.com/t4", 5, {T4: 2})},
        {
            "c1/p1": {"n1": 500, "n2": 0, "n3": 500, "n4": 0},
            "c1/p2": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
            "c1/p3": {"n1": 0, "n2": 0, "n3": 500, "n4": 0},
            "c1/p4": {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
        },
    ),
    (
        "case3: single job score result with sra policy and resourceStrategyFit",
        {"resourceStrategyFitWeight": 8, "resources": STRATEGY, "sra": sra("nvidia.com/t4", 0, {T4: 2})},
        {
            "c1/p1": {"n1": 775, "n2": 700, "n3": 700, "n4": 700},
            "c1/p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
            "c1/p3": {"n1": 750, "n2": 600, "n3": 600, "n4": 600},
            "c1/p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200},
        },
    ),
    (
        "case4: single job score result with sra policy and resourceStrategyFit",
        {"resourceStrategyFitWeight": 8, "resources": STRATEGY, "sra": sra("nvidia.com/t4", 5, {T4: 2})},
        {
            "c1/p1": {"n1": 1275, "n2": 700, "n3": 1200, "n4": 700},
            "c1/p2": {"n1": 190.625, "n2": 237.5, "n3": 162.5, "n4": 312.5},
            "c1/p3": {"n1": 750, "n2": 600, "n3": 1100, "n4": 600},
            "c1/p4": {"n1": 181.25, "n2": 162.5, "n3": 125, "n4": 200},
        },
    ),
]


@pytest.mark.parametrize(("case", "arguments", "expected"), SRA_CASES, ids=[c[0][:5] for c in SRA_CASES])
def test_node(case, arguments, expected):
    """sra_test.go TestNode: the plugin's score of every task on every node."""
    nodes, pods = sra_cluster()
    got = scores(session(arguments, nodes, pods))
    assert got == {t: pytest.approx(row, abs=1e-6) for t, row in expected.items()}, case


# --- proportional_test.go --------------------------------------------------------------------------
PROPORTIONAL = [
    ("cpu_task_less_than_reserved_resource", ("4", "4G", "0"), ("30", "30G", "6"), True),
    ("cpu_task_greater_than_reserved_resource", ("10", "10G", "0"), ("30", "30G", "6"), False),
    ("gpu_task_no_proportional_check", ("10", "10G", "1"), ("30", "30G", "6"), True),
    ("cpu_task_less_than_idle_resource", ("10", "10G", "0"), ("26", "26G", "2"), True),
]


@pytest.mark.parametrize(("case", "task", "node", "passes"), PROPORTIONAL, ids=[c[0] for c in PROPORTIONAL])
def test_check_node_resource_is_proportional(case, task, node, passes):
    """Test_checkNodeResourceIsProportional: nvidia.com/gpu reserving 4 cpu and 4 GB per idle GPU;
    the node's idle resources are the case's (nothing runs on it)."""
    cpu, memory, gpu = task
    requests = res(cpu, memory, **({GPU: gpu} if gpu != "0" else {}))
    n = build_node("n1", {"cpu": node[0], "memory": node[1], GPU: node[2]})
    arguments = {
        "resourceStrategyFitWeight": 0,
        "proportional": {
            "enable": True,
            "resources": GPU,
            "resourceProportion": {f"{GPU}.cpu": 4, f"{GPU}.memory": 4},
        },
    }
    ssn = session(arguments, [n], [build_pod("c1", "t1", "", "Pending", requests, "pg1")])
    (t,) = [t for j in ssn.jobs.values() for t in j.tasks.values()]
    reason = ssn.predicate(t, ssn.node_list[0])
    assert (reason is None) == passes, case
    if not passes:
        assert reason == f"proportional of resource {GPU} check failed"
