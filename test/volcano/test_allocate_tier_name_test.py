"""The ``highestTierName`` cases of Volcano's TestAllocateWithNetWorkTopologies
(pkg/scheduler/actions/allocate/allocate_test.go, volcano-sh/volcano ed72c7c8), as data: a
PodGroup's ``networkTopology.highestTierName`` (util.BuildPodGroupUsingNetWorkTopologiesWithTierName)
over HyperNodes carrying ``spec.tierName`` (api.BuildHyperNodeWithTierName), one allocate session
with the Go test's tier (gang with job order, ready, pipelined, starving; predicates;
network-topology-aware with node order, HyperNode order and HyperNode gradient). The name is
translated to a tier as Volcano's ``translateHighestTierNameToAllowed`` does
(pkg/scheduler/framework/session.go); a name no HyperNode carries bounds nothing.

Every pod asks 2 cpu and 4G; every node has 2 cpu and 4Gi. The PodGroup's job-allocated-hypernode
annotation is not read: Caldera derives where a job runs from its pods. Each case's name is Go's
``Name``."""

from __future__ import annotations

import pytest

from caldera.framework.objects import HyperNode, PodGroup, convert
from caldera.hack import scenario
from volcano.port import T0, build_node, build_pod, build_queue, res, run

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
  - name: predicates
  - name: network-topology-aware
"""

TASK, JOB, CLUSTER = "volcano.sh/task-spec", "volcano.sh/job-spec", "volcano.sh/hypernode-spec"

#: HyperNodes by layout: name → (tier, tierName, members); a member of a higher tier is a HyperNode
LAYOUTS = {
    "two leaves, one spine": {
        "s0": (1, TASK, ["s0-n1", "s0-n2"]),
        "s1": (1, TASK, ["s1-n3", "s1-n4"]),
        "s2": (2, JOB, ["s0", "s1"]),
    },
    "three tiers": {
        "s0": (3, CLUSTER, ["s1", "s2"]),
        "s1": (2, JOB, ["s3", "s4"]),
        "s2": (2, JOB, ["s5", "s6"]),
        "s3": (1, TASK, ["s3-n1", "s3-n2"]),
        "s4": (1, TASK, ["s4-n1", "s4-n2"]),
        "s5": (1, TASK, ["s5-n1", "s5-n2"]),
        "s6": (1, TASK, ["s6-n1", "s6-n2"]),
    },
    "two leaves": {
        "s0": (1, TASK, ["s0-n1", "s0-n2"]),
        "s1": (1, TASK, ["s1-n3", "s1-n4"]),
    },
}

PENDING3 = {"p1": "", "p2": "", "p3": ""}
RESCHEDULED = {"p1": "s0-n1", "p2": "s0-n2", "p3": ""}

#: Go Name → (layout, min member, highestTierName, pods by node ("" pending), ExpectBindsNum)
CASES = {
    "hard network topology constrain, can not allocate job when cross highestTierName tier": (
        "two leaves, one spine",
        3,
        TASK,
        PENDING3,
        0,
    ),
    "hard network topology constrain, can allocate job when the tier corresponding to highestTierName not reached": (
        "two leaves, one spine",
        3,
        JOB,
        PENDING3,
        3,
    ),
    "hard network topology constrain, can allocate job when multi hyperNodes are available": (
        "two leaves, one spine",
        2,
        TASK,
        {"p1": "", "p2": ""},
        2,
    ),
    "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached": (
        "two leaves, one spine",
        2,
        JOB,
        RESCHEDULED,
        1,
    ),
    "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached and minavailable = replicas": (
        "two leaves, one spine",
        3,
        JOB,
        RESCHEDULED,
        1,
    ),
    "hard network topology constrain and task in job rescheduled, can allocate job when the tier corresponding to highestTierName not reached and hyperNodesInfo has three tier": (
        "three tiers",
        2,
        JOB,
        RESCHEDULED,
        1,
    ),
    "hard network topology constrain and tasks in job rescheduled, can not allocate job when cross the tier corresponding to highestTierName": (
        "two leaves, one spine",
        2,
        TASK,
        RESCHEDULED,
        0,
    ),
    "hard network topology with highestTierName constrain and tasks in job rescheduled, can allocate job when here is no corresponding highestTierAllowed for highestTierName": (
        "two leaves",
        2,
        "volcano.sh/hypercluster",
        RESCHEDULED,
        1,
    ),
}


def hypernodes(layout: dict[str, tuple[int, str, list[str]]]) -> dict[str, HyperNode]:
    out = {}
    for name, (tier, tier_name, members) in layout.items():
        kind = "HyperNode" if members[0] in layout else "Node"
        spec = {
            "tier": tier,
            "tierName": tier_name,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        }
        out[name] = convert(HyperNode, {"metadata": {"name": name, "creationTimestamp": T0}, "spec": spec})
    return out


def podgroup(min_member: int, tier_name: str) -> PodGroup:
    d = scenario.podgroup_dict(
        "pg1",
        min_member=min_member,
        queue="q1",
        namespace="c1",
        phase="Inqueue",
        uid="c1-pg1",
        network_topology={"mode": "hard", "highestTierName": tier_name},
    )
    d["metadata"]["creationTimestamp"] = T0
    return convert(PodGroup, d)


@pytest.mark.parametrize("name", list(CASES))
def test_case(name):
    layout, min_member, tier_name, pods, binds = CASES[name]
    nodes = sorted(n for _, _, members in LAYOUTS[layout].values() for n in members if n.count("-"))
    role = {"p1": "master", "p2": "worker", "p3": "worker"}
    out = run(
        CONF,
        nodes=[build_node(n, res("2", "4Gi", pods="10")) for n in nodes],
        pods=[
            build_pod("c1", p, on, "Running" if on else "Pending", res("2", "4G"), "pg1", {TASK: role[p]})
            for p, on in pods.items()
        ],
        podgroups=[podgroup(min_member, tier_name)],
        queues=[build_queue("q1", 1)],
        hypernodes=hypernodes(LAYOUTS[layout]),
    )
    assert len(out.bound) == binds, out.bound
