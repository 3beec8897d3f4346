"""Volcano's pkg/scheduler/plugins/binpack/binpack_test.go, TestNode: binpack alone; the node score of
every task on every node for two sets of arguments. (TestArguments checks Volcano's parsed weight
struct: internal; the arguments' effect is what TestNode checks.)"""

import pytest

from caldera.config.conf import parse_conf
from caldera.framework.session import open_session
from caldera.hack.scenario import cluster
from volcano.port import REGISTRY, build_node, build_pod, build_podgroup, build_queue, res

PODS = [
    build_pod("c1", "p1", "n1", "Pending", res("1", "1Gi"), "pg1"),
    build_pod("c1", "p2", "n3", "Pending", res("1.5", "0Gi"), "pg1"),
    build_pod("c1", "p3", "", "Pending", res("2", "10Gi", **{"nvidia.com/gpu": "2"}), "pg1"),
    build_pod("c1", "p4", "", "Pending", res("3", "4Gi", **{"example.com/foo": "3"}), "pg1"),
]
NODES = [
    build_node("n1", res("2", "4Gi", pods="10")),
    build_node("n2", res("4", "16Gi", pods="10", **{"nvidia.com/gpu": "4"})),
    build_node("n3", res("2", "4Gi", pods="10", **{"example.com/foo": "16"})),
]

CASES = [
    (
        {
            "binpack.weight": 10,
            "binpack.cpu": 2,
            "binpack.memory": 3,
            "binpack.resources": "nvidia.com/gpu, example.com/foo",
            "binpack.resources.nvidia.com/gpu": 7,
            "binpack.resources.example.com/foo": 8,
        },
        {
            "p1": {"n1": 700, "n2": 137.5, "n3": 0},
            "p2": {"n1": 0, "n2": 375, "n3": 0},
            "p3": {"n1": 0, "n2": 531.25, "n3": 0},
            "p4": {"n1": 0, "n2": 173.076923076, "n3": 0},
        },
    ),
    (
        {
            "binpack.weight": 1,
            "binpack.cpu": 1,
            "binpack.memory": 1,
            "binpack.resources": "nvidia.com/gpu",
            "binpack.resources.nvidia.com/gpu": 23,
        },
        {
            "p1": {"n1": 75, "n2": 15.625, "n3": 0},
            "p2": {"n1": 0, "n2": 37.5, "n3": 0},
            "p3": {"n1": 0, "n2": 50.5, "n3": 0},
            "p4": {"n1": 0, "n2": 50, "n3": 0},
        },
    ),
]


@pytest.mark.parametrize(("arguments", "expected"), CASES, ids=["case0", "case1"])
def test_node(arguments, expected):
    """TestNode "single job" (both cases): binpack score per task and node, as expected[task][node]."""
    args = "\n".join(f"      {k}: {v!r}" for k, v in arguments.items())
    text = f'actions: "allocate"\ntiers:\n- plugins:\n  - name: binpack\n    arguments:\n{args}\n'
    conf = parse_conf(text, REGISTRY)
    snap = cluster(
        nodes=NODES,
        pods=PODS,
        podgroups=[build_podgroup("pg1", "c1", "c1", 0, None, "")],
        queues=[build_queue("c1", 1)],
    )
    ssn = open_session(snap, conf.tiers, REGISTRY.plugins, conf.configurations)
    names = [n.name for n in ssn.node_list]
    for job in ssn.jobs.values():
        for task in job.tasks.values():
            got = dict(zip(names, ssn.node_scores(task, ssn.all_rows), strict=True))
            want = expected[task.name]
            assert {k: round(float(v), 4) for k, v in got.items()} == pytest.approx(
                {k: round(v, 4) for k, v in want.items()}, abs=1e-3
            ), task.name
