"""Volcano's pkg/scheduler/plugins/nodeorder/nodeorder_test.go, TestNodeOrderPlugin: allocate with
gang and nodeorder, every weight given (those a case does not set are 0, as in the Go test).
TestInitPlugin checks which kube-scheduler score plugins Volcano instantiates: internal, not ported."""

import pytest

from volcano.port import build_node, build_pod, build_podgroup, build_queue, res, run

KEYS = [
    "leastrequested.weight",
    "mostrequested.weight",
    "balancedresource.weight",
    "nodeaffinity.weight",
    "tainttoleration.weight",
    "podaffinity.weight",
    "podtopologyspread.weight",
    "imagelocality.weight",
]


def conf(**weights):
    args = "\n".join(f"      {k}: {weights.get(k.split('.')[0], 0)}" for k in KEYS)
    return f"""
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: nodeorder
    arguments:
{args}
"""


PG = [build_podgroup("pg1", "c1", "c1", 0, None, "Inqueue")]
Q = [build_queue("c1", 1)]


def pending(name, req=None, **kw):
    return build_pod("c1", name, "", "Pending", req or res("1", "1G"), "pg1", **kw)


def n(name, cpu, mem, labels=None, **kw):
    return build_node(name, res(cpu, mem, pods="10"), labels, **kw)


SPREAD = {
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "foo"}},
        }
    ]
}

CASES = {
    "leastAllocated strategy": (
        conf(leastrequested=1),
        [pending("p1")],
        [n("n1", "2", "4Gi"), n("n2", "4", "8Gi")],
        {"c1/p1": "n2"},
    ),
    "mostAllocated strategy": (
        conf(mostrequested=1),
        [pending("p1")],
        [n("n1", "2", "4Gi"), n("n2", "4", "8Gi")],
        {"c1/p1": "n1"},
    ),
    "balanced allocation prefers balanced node": (
        conf(balancedresource=10),
        [pending("p1", res("1", "1Gi"))],
        [n("n1", "2", "2Gi"), n("n2", "4", "2Gi")],
        {"c1/p1": "n1"},
    ),
    "node affinity prefers labeled node": (
        conf(nodeaffinity=10),
        [
            pending(
                "p1",
                affinity={
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "preference": {
                                    "matchExpressions": [
                                        {"key": "zone", "operator": "In", "values": ["zone1"]}
                                    ]
                                },
                            }
                        ]
                    }
                },
            )
        ],
        [n("n1", "2", "4Gi", {"zone": "zone1"}), n("n2", "2", "4Gi", {"zone": "zone2"})],
        {"c1/p1": "n1"},
    ),
    "taint toleration prefers non-tainted node": (
        conf(tainttoleration=10),
        [pending("p1")],
        [
            n("n1", "2", "4Gi"),
            n("n2", "2", "4Gi", taints=[{"key": "key1", "value": "value1", "effect": "PreferNoSchedule"}]),
        ],
        {"c1/p1": "n1"},
    ),
    "inter-pod affinity prefers node with matching pod": (
        conf(podaffinity=10),
        [
            build_pod("c1", "p1", "n1", "Running", res("1", "1G"), "pg1", {"service": "s1"}),
            build_pod("c1", "p-noise", "n3", "Running", res("1", "1G"), "pg1", {"service": "s2"}),
            pending(
                "p2",
                affinity={
                    "podAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 100,
                                "podAffinityTerm": {
                                    "labelSelector": {"matchLabels": {"service": "s1"}},
                                    "topologyKey": "kubernetes.io/hostname",
                                },
                            }
                        ]
                    }
                },
            ),
        ],
        [n("n1", "2", "4Gi"), n("n2", "2", "4Gi"), n("n3", "2", "4Gi")],
        {"c1/p2": "n1"},
    ),
    "pod topology spread prefers node to reduce skew": (
        conf(podtopologyspread=10),
        [
            build_pod("c1", "p1", "n1", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
            build_pod("c1", "p2", "n1", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
            build_pod("c1", "p3", "n2", "Running", res("1", "1G"), "pg1", {"app": "foo"}),
            build_pod("c1", "p4", "", "Pending", res("1", "1G"), "pg1", {"app": "foo"}, spec=SPREAD),
        ],
        [
            n("n1", "4", "4Gi", {"zone": "zone1"}),
            n("n2", "4", "4Gi", {"zone": "zone2"}),
            n("n3", "4", "4Gi", {"zone": "zone3"}),
        ],
        {"c1/p4": "n3"},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_node_order_plugin(case):
    """TestNodeOrderPlugin: the case named by the parameter; expected binds as ExpectBindMap."""
    text, pods, nodes, bound = CASES[case]
    assert run(text, nodes, pods, PG, Q).bound == bound
