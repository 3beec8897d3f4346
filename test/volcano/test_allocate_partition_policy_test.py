"""Volcano's TestAllocateWithPartitionPolicyNetworkTopology (pkg/scheduler/actions/allocate/
allocate_test.go), case by case from ``partition_policy_cases``: PodGroups with ``subGroupPolicy``
over HyperNodes, one allocate session with the Go test's tier (gang with job order, ready,
pipelined, starving, sub-job ready and sub-job order on and nothing else; predicates; nodeorder;
network-topology-aware with node order, HyperNode order and HyperNode gradient). Cases that do
not pass are listed in ``KNOWN`` with the reason."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.framework.objects import HyperNode, convert
from caldera.hack import scenario
from volcano.partition_policy_cases import CASES
from volcano.port import T0, build_node, build_pod, build_queue, res, run

CONF = """
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
    enableReclaimable: false
    enabledSubJobPipelined: false
  - name: predicates
  - name: nodeorder
  - name: network-topology-aware
"""

#: case name → why it does not pass
KNOWN: dict[str, str] = {}


def hypernodes(tiers: dict[str, int], members: dict[str, list[str]]) -> dict[str, HyperNode]:
    """HyperNode objects from the test's HyperNodesSetByTier and HyperNodes (node sets): a
    HyperNode holds the HyperNodes of the next tier down whose nodes it holds, and its other nodes."""
    out = {}
    for name, tier in tiers.items():
        mine = set(members.get(name, ()))
        below = [t for t in tiers.values() if t < tier]
        child_tier = max(below) if below else None
        children = sorted(
            n
            for n, t in tiers.items()
            if t == child_tier and set(members.get(n, ())) <= mine and members.get(n)
        )
        covered = set().union(*(set(members[c]) for c in children)) if children else set()
        spec_members = [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
        spec_members += [
            {"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in sorted(mine - covered)
        ]
        out[name] = convert(
            HyperNode,
            {
                "metadata": {"name": name, "creationTimestamp": T0},
                "spec": {"tier": tier, "members": spec_members},
            },
        )
    return out


def podgroup(pg: dict[str, Any]):
    d = scenario.podgroup_dict(
        pg["name"],
        min_member=pg["min"],
        queue=pg["queue"],
        namespace=pg["ns"],
        min_task_member=pg["task_min"],
        phase=pg["phase"],
        uid=f"{pg['ns']}-{pg['name']}",
        network_topology={"mode": pg["mode"], "highestTierAllowed": pg["highest"]} if pg["mode"] else None,
        sub_group_policy=[
            {
                "name": p["name"],
                "matchLabelKeys": p["keys"],
                "subGroupSize": p["size"],
                "minSubGroups": p["min"],
                **(
                    {"networkTopology": {"mode": p["mode"], "highestTierAllowed": p["highest"]}}
                    if p["mode"]
                    else {}
                ),
            }
            for p in pg["policies"]
        ],
    )
    d["metadata"]["creationTimestamp"] = T0
    return convert(scenario.PodGroup, d)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case):
    if case["name"] in KNOWN:
        pytest.skip(KNOWN[case["name"]])
    out = run(
        CONF,
        nodes=[build_node(n["name"], res(**n["alloc"]), n["labels"]) for n in case["nodes"]],
        pods=[
            build_pod(
                p["ns"], p["name"], p["node"], p["phase"], p["req"], p["group"], p["labels"], p["selector"]
            )
            for p in case["pods"]
        ],
        podgroups=[podgroup(pg) for pg in case["podgroups"]],
        queues=[build_queue(q, 1) for q in case["queues"]],
        hypernodes=hypernodes(case["tiers"], case["hypernodes"]),
    )
    assert len(out.bound) == case["binds"], out.bound
    if not case["minimal"]:
        assert out.bound == case["bind_map"]
