"""Volcano's pkg/scheduler/plugins/numaaware tests, ported as data (volcano-sh/volcano at
ed72c7c815a9fd547a787134676f73d42e9d049c):

- policy/policy_best_effort_test.go ``Test_best_effort_predicate`` (test-1 .. test-6),
  policy/policy_restricted_test.go ``Test_restricted_predicate`` (test-1 .. test-6),
  policy/policy_single_numa_node_test.go ``Test_single_numa_node_predicate`` (test-1 .. test-5),
  policy/policy_none_test.go ``Test_none_predicate`` (test-1): the best hint each policy merges from
  the providers' hints (``policy_predicate``);
- provider/cpumanager/cpu_mng_test.go ``Test_GetTopologyHints`` (test-1 .. test-6) and
  ``Test_Allocate`` (test-1 .. test-5), on the test's 8-CPU machine (two NUMA nodes, two cores each);
- numaaware_test.go ``TestNuma_OnSessionClose`` ("taskBindNodeMap is empty" and "normal case"),
  ``TestNuma_OnSessionClose_MultipleTasksAccumulate`` and ``TestNuma_OnSessionClose_VerifiesContent``:
  what a session assigned reaches the cache's per-node assumptions (Volcano's ``UnassignedNumaPods``),
  keyed by the pod, on the node it was placed on. Here a placement carries its sets to the cache
  (``Placement.numa``), so the tests run a session and apply its result instead of filling the
  plugin's maps by hand.

Not ported (3 cases of ``TestNuma_OnSessionClose``): "assignRes missing taskID", "assignRes has taskID
but missing nodeName" and "taskPodMetaMap missing taskID" fill the plugin's three maps inconsistently by
hand to check that ``OnSessionClose`` skips such entries; here one record per placed task holds the node,
the pod and the sets together, so those states cannot be made.
"""

from __future__ import annotations

import pytest

from caldera.cache.store import ClusterCache
from caldera.framework.numa import NumaInfo, PodMeta
from caldera.framework.objects import Container, ResourceRequirements
from caldera.hack import scenario
from caldera.plugins.numaaware import (
    TopologyHint,
    cpu_allocate,
    cpu_hints,
    mask_of,
    policy_predicate,
)


def H(bits: tuple[int, ...], preferred: bool) -> TopologyHint:
    return TopologyHint(mask_of(*bits), preferred)


#: policy/policy_best_effort_test.go
BEST_EFFORT_CASES = [
    (
        "test-1",
        [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), False), H((0,), True)]}],
        H((0,), True),
    ),
    (
        "test-2",
        [{"cpu": [H((0, 1), False), H((1,), True)]}, {"gpu": [H((0, 1), False), H((1,), True)]}],
        H((1,), True),
    ),
    (
        "test-3",
        [
            {"cpu": [H((0, 1), False), H((0,), True), H((1,), True)]},
            {"gpu": [H((0, 1), False), H((0,), True), H((1,), True)]},
        ],
        H((0,), True),
    ),
    (
        "test-4",
        [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), False), H((1,), True)]}],
        H((0,), False),
    ),
    ("test-5", [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), True)]}], H((0,), True)),
    ("test-6", [{"cpu": [H((0, 1), True)]}, {"gpu": [H((0, 1), True)]}], H((0, 1), True)),
]
#: policy/policy_restricted_test.go: the same six cases, hints and expected best hits as best-effort's
#: (the two Go files hold identical tables; restricted differs only in what it admits)
RESTRICTED_CASES = BEST_EFFORT_CASES
#: policy/policy_single_numa_node_test.go
SINGLE_NUMA_NODE_CASES = [
    (
        "test-1",
        [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), False), H((0,), True)]}],
        H((0,), True),
    ),
    (
        "test-2",
        [{"cpu": [H((0, 1), False), H((1,), True)]}, {"gpu": [H((0, 1), False), H((1,), True)]}],
        H((1,), True),
    ),
    (
        "test-3",
        [
            {"cpu": [H((0, 1), False), H((0,), True), H((1,), True)]},
            {"gpu": [H((0, 1), False), H((0,), True), H((1,), True)]},
        ],
        H((0,), True),
    ),
    (
        "test-4",
        [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), False), H((1,), True)]}],
        H((0, 1), False),
    ),
    ("test-5", [{"cpu": [H((0, 1), False), H((0,), True)]}, {"gpu": [H((0, 1), True)]}], H((0, 1), False)),
]


@pytest.mark.parametrize(
    ("policy", "name", "providers", "expect"),
    [("best-effort", *c) for c in BEST_EFFORT_CASES]
    + [("restricted", *c) for c in RESTRICTED_CASES]
    + [("single-numa-node", *c) for c in SINGLE_NUMA_NODE_CASES],
)
def test_policy_predicate(policy, name, providers, expect) -> None:
    """Test_best_effort_predicate / Test_restricted_predicate / Test_single_numa_node_predicate: the
    best hit of ``NewPolicyX([]int{0, 1}).Predicate(providersHints)``."""
    best, _ = policy_predicate(policy, [0, 1], providers)
    assert best == expect


def test_none_predicate() -> None:
    """Test_none_predicate test-1: the none policy's hit is the zero TopologyHint, and it admits."""
    assert policy_predicate("none", [0, 1], []) == (TopologyHint(None, False), True)


# --- provider/cpumanager/cpu_mng_test.go: the 8-CPU machine of ``numaInfo`` ---------------------------
MACHINE = {
    0: (0, 0, 0),
    1: (0, 0, 0),
    2: (0, 0, 1),
    3: (0, 0, 1),
    4: (1, 1, 2),
    5: (1, 1, 2),
    6: (1, 1, 3),
    7: (1, 1, 3),
}
INFO = NumaInfo(
    name="", policies={}, free={}, capacity={}, cpus=MACHINE, reserved_cpus=None, numa_nodes=(0, 1)
)


def container(cpus: int) -> Container:
    return Container(name="c", resources=ResourceRequirements(requests={"cpu": str(cpus)}))


@pytest.mark.parametrize(
    ("name", "cpus", "free", "expect"),
    [
        ("test-1", 4, range(8), [H((0,), True), H((1,), True), H((0, 1), False)]),
        ("test-2", 4, (1, 2, 3, 4, 5, 6, 7), [H((1,), True), H((0, 1), False)]),
        ("test-3", 5, range(8), [H((0, 1), True)]),
        ("test-4", 8, range(8), [H((0, 1), True)]),
        ("test-5", 9, range(8), []),
        ("test-6", 4, (2, 3, 4, 5), [H((0, 1), False)]),
    ],
)
def test_get_topology_hints(name, cpus, free, expect) -> None:
    """Test_GetTopologyHints: the cpu hints for a container of ``cpus`` whole CPUs with ``free`` CPUs."""
    hints = cpu_hints(container(cpus), INFO, {"cpu": frozenset(free)})
    assert hints is not None
    assert hints["cpu"] == expect


@pytest.mark.parametrize(
    ("name", "cpus", "free", "best", "expect"),
    [
        ("test-1", 4, range(8), H((0,), True), {0, 1, 2, 3}),
        ("test-2", 4, (1, 2, 3, 4, 5, 6, 7), H((1,), True), {4, 5, 6, 7}),
        ("test-3", 5, range(8), H((0, 1), True), {0, 1, 2, 3, 4}),
        ("test-4", 5, (1, 2, 3, 4, 5, 6, 7), H((0, 1), True), {1, 4, 5, 6, 7}),
        ("test-5", 8, (1, 2, 3, 4, 5, 6, 7), H((0, 1), True), set()),
    ],
)
def test_allocate(name, cpus, free, best, expect) -> None:
    """Test_Allocate: the CPUs picked for the best hit (none when the request cannot be met)."""
    assert cpu_allocate(container(cpus), best, INFO, {"cpu": frozenset(free)}) == {"cpu": frozenset(expect)}


# --- numaaware_test.go: what a session assigned reaches the cache ----------------------------------
CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: numa-aware
"""


def guaranteed(name: str, cpus: str, **kw):
    return scenario.pod(
        name,
        cpu=cpus,
        memory="1Gi",
        limits={"cpu": cpus, "memory": "1Gi"},
        annotations={"volcano.sh/numa-topology-policy": "single-numa-node"},
        uid=f"c1-{name}",
        namespace="c1",
        **kw,
    )


def placed(nodes, pods, topologies) -> ClusterCache:
    """Volcano's OpenSession / OnSessionClose over these objects: one session, its result applied."""
    cache = scenario.load(
        ClusterCache(("caldera",)),
        nodes=nodes,
        pods=pods,
        podgroups=[scenario.podgroup("pg1", min_member=1, namespace="c1")],
        queues=[scenario.queue("default")],
        numatopologies=topologies,
    )
    _, result = scenario.run_session(cache.snapshot(), CONF)
    cache.apply(result)
    return cache


def test_on_session_close_nothing_bound() -> None:
    """TestNuma_OnSessionClose "taskBindNodeMap is empty, no unassigned numa pods": a pod that fits no
    node (4 CPUs on a node whose NUMA nodes hold 2 each) assigns nothing."""
    cpus = scenario.cpu_detail(2, 1)
    cache = placed(
        [scenario.node("n1", cpu="4", memory="4Gi")],
        [guaranteed("p1", "4", group="pg1")],
        [scenario.numatopology("n1", cpus)],
    )
    assert cache.numa_assumed == {}


def test_on_session_close_normal_case() -> None:
    """TestNuma_OnSessionClose "normal case": the pod placed on n2 is assumed there, n1 has none."""
    cache = placed(
        [scenario.node("n1", cpu="2", memory="4Gi"), scenario.node("n2", cpu="4", memory="8Gi")],
        [guaranteed("p1", "2", group="pg1", node_selector={"kubernetes.io/hostname": "n2"})],
        [
            scenario.numatopology("n1", scenario.cpu_detail(1, 1)),
            scenario.numatopology("n2", scenario.cpu_detail(2, 1)),
        ],
    )
    assert {node: len(pods) for node, pods in cache.numa_assumed.items()} == {"n2": 1}


def test_on_session_close_multiple_tasks_accumulate() -> None:
    """TestNuma_OnSessionClose_MultipleTasksAccumulate: pods placed on different nodes are each assumed
    on their own node (here p1 on n2 and p2 on n1)."""
    cache = placed(
        [scenario.node("n1", cpu="4", memory="8Gi"), scenario.node("n2", cpu="4", memory="8Gi")],
        [
            guaranteed("p1", "2", group="pg1", node_selector={"kubernetes.io/hostname": "n2"}),
            guaranteed("p2", "2", group="pg1", node_selector={"kubernetes.io/hostname": "n1"}),
        ],
        [
            scenario.numatopology("n1", scenario.cpu_detail(2, 1)),
            scenario.numatopology("n2", scenario.cpu_detail(2, 1)),
        ],
    )
    assert {node: [p.name for p in pods] for node, pods in cache.numa_assumed.items()} == {
        "n2": ["p1"],
        "n1": ["p2"],
    }


def test_on_session_close_verifies_content() -> None:
    """TestNuma_OnSessionClose_VerifiesContent: the entry is keyed by the pod (uid, name, namespace)
    and holds the CPUs assigned: on n2 with only CPUs 7 and 8 free, on NUMA node 1, those two."""
    cpus = {c: (c // 5, c // 5, c // 2) for c in range(10)}  # CPUs 0-4 on NUMA node 0, 5-9 on 1
    cache = placed(
        [scenario.node("n2", cpu="10", memory="8Gi")],
        [guaranteed("p1", "2", group="pg1")],
        [scenario.numatopology("n2", cpus, allocatable="7-8")],
    )
    assert cache.numa_assumed == {"n2": {PodMeta("c1-p1", "p1", "c1"): {"cpu": frozenset({7, 8})}}}
