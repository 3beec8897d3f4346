"""Custom resources under deploy/crds: structural pruning and defaults, and Volcano's fields kept whole."""

from __future__ import annotations

import copy
from typing import Any

from .conftest import Cluster

V1BETA1 = "/apis/scheduling.volcano.sh/v1beta1"

QUANTITIES = {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"}

# A PodGroup with every field of Volcano's v1beta1 PodGroup (spec and status).
FULL_PODGROUP_SPEC = {
    "minMember": 4,
    "minTaskMember": {"ps": 1, "worker": 3},
    "queue": "default",
    "priorityClassName": "high",
    "minResources": QUANTITIES,
    "networkTopology": {"mode": "soft", "highestTierAllowed": 2, "highestTierName": "spine"},
    "subGroupPolicy": [
        {
            "name": "workers",
            "networkTopology": {"mode": "hard", "highestTierAllowed": 1, "highestTierName": "leaf"},
            "subGroupSize": 2,
            "minSubGroups": 1,
            "labelSelector": {
                "matchLabels": {"role": "worker"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}],
            },
            "matchLabelKeys": ["replica-index"],
        }
    ],
}
FULL_PODGROUP_STATUS = {
    "phase": "Running",
    "running": 3,
    "succeeded": 1,
    "failed": 0,
    "conditions": [
        {
            "type": "Scheduled",
            "status": "True",
            "transitionID": "5f7c9a",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "tasks in gang are ready to be scheduled",
            "message": "4/4 tasks in gang",
        }
    ],
}
# A Queue with every field of Volcano's v1beta1 Queue.
FULL_QUEUE_SPEC = {
    "weight": 3,
    "capability": QUANTITIES,
    "deserved": {"cpu": "2", "memory": "4Gi"},
    "guarantee": {"resource": {"cpu": "1"}},
    "reclaimable": False,
    "parent": "root",
    "priority": 5,
    "type": "compute",
    "dequeueStrategy": "fifo",
    "affinity": {
        "nodeGroupAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["group-a"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["group-b"],
        },
        "nodeGroupAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": ["group-c"],
            "preferredDuringSchedulingIgnoredDuringExecution": ["group-d"],
        },
    },
    "extendClusters": [{"name": "east", "weight": 2, "capacity": {"cpu": "100"}}],
}
FULL_QUEUE_STATUS = {
    "state": "Open",
    "pending": 1,
    "inqueue": 2,
    "running": 3,
    "unknown": 0,
    "completed": 4,
    "allocated": {"cpu": "3"},
    "reservation": {"nodes": ["n1"], "resource": {"cpu": "1"}},
}


def podgroup(name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": copy.deepcopy(spec),
        **extra,
    }


async def test_a_podgroup_with_every_volcano_field_round_trips_unchanged(cluster: Cluster) -> None:
    c = cluster
    path = f"{V1BETA1}/namespaces/{c.ns}/podgroups"
    created = await c.create(path, podgroup("full", FULL_PODGROUP_SPEC, status=FULL_PODGROUP_STATUS))
    assert created["spec"] == FULL_PODGROUP_SPEC
    # The CRD has no status subresource: the status is written with the object.
    assert created["status"] == FULL_PODGROUP_STATUS
    read = await c.http.ok("GET", f"{path}/full")
    assert (read["spec"], read["status"]) == (FULL_PODGROUP_SPEC, FULL_PODGROUP_STATUS)


async def test_a_queue_with_every_volcano_field_round_trips_unchanged(cluster: Cluster) -> None:
    c = cluster
    name = c.name("full")
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": copy.deepcopy(FULL_QUEUE_SPEC),
    }
    created = await c.create(f"{V1BETA1}/queues", body, cluster_scoped=True)
    assert created["spec"] == FULL_QUEUE_SPEC
    created["status"] = copy.deepcopy(FULL_QUEUE_STATUS)
    written = await c.http.ok("PUT", f"{V1BETA1}/queues/{name}/status", created)
    assert written["status"] == FULL_QUEUE_STATUS
    read = await c.http.ok("GET", f"{V1BETA1}/queues/{name}")
    assert (read["spec"], read["status"]) == (FULL_QUEUE_SPEC, FULL_QUEUE_STATUS)


async def test_fields_the_schema_does_not_declare_are_dropped_and_defaults_filled(cluster: Cluster) -> None:
    c = cluster
    path = f"{V1BETA1}/namespaces/{c.ns}/podgroups"
    body = podgroup(
        "pruned",
        {"minMember": 1, "notAVolcanoField": True, "networkTopology": {"highestTierAllowed": 1, "extra": 1}},
        extraTopLevel={"a": 1},
    )
    created = await c.create(path, body)
    assert "extraTopLevel" not in created
    assert created["spec"] == {
        "minMember": 1,
        "queue": "default",  # the schema's default
        "networkTopology": {"highestTierAllowed": 1, "mode": "hard"},
    }
    patched = await c.http.ok(
        "PATCH",
        f"{path}/pruned",
        {"spec": {"unknown": 1, "minMember": 2}},
        content_type="application/merge-patch+json",
    )
    assert patched["spec"]["minMember"] == 2 and "unknown" not in patched["spec"]


async def test_a_queue_gets_volcano_s_defaults(cluster: Cluster) -> None:
    c = cluster
    body = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": c.name("bare")},
        "spec": {},
    }
    created = await c.create(f"{V1BETA1}/queues", body, cluster_scoped=True)
    assert created["spec"] == {"weight": 1, "dequeueStrategy": "traverse"}


# A HyperNode with every field of Volcano's v1alpha1 HyperNode.
FULL_HYPERNODE_SPEC = {
    "tier": 2,
    "tierName": "spine",
    "members": [
        {"type": "HyperNode", "selector": {"exactMatch": {"name": "leaf-a"}}},
        {"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-[0-9]+$"}}},
        {
            "type": "Node",
            "selector": {
                "labelMatch": {
                    "matchLabels": {"rack": "r1"},
                    "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}],
                }
            },
        },
    ],
}


async def test_a_hypernode_with_every_volcano_field_round_trips_unchanged(cluster: Cluster) -> None:
    c = cluster
    name = c.name("spine")
    body = {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": copy.deepcopy(FULL_HYPERNODE_SPEC),
    }
    created = await c.create("/apis/topology.volcano.sh/v1alpha1/hypernodes", body, cluster_scoped=True)
    assert created["spec"] == FULL_HYPERNODE_SPEC
    status = {
        "nodeCount": 3,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
                "reason": "Synced",
                "message": "members resolved",
            }
        ],
    }
    created["status"] = status
    written = await c.http.ok("PUT", f"/apis/topology.volcano.sh/v1alpha1/hypernodes/{name}/status", created)
    assert written["status"] == status


# A Numatopology with every field of Volcano's nodeinfo/v1alpha1 Numatopology.
FULL_NUMATOPOLOGY_SPEC = {
    "policies": {"CPUManagerPolicy": "static", "TopologyManagerPolicy": "single-numa-node"},
    "resReserved": {"cpu": "1", "memory": "1Gi"},
    "numares": {"cpu": {"allocatable": "1-7", "capacity": 8}},
    "cpuDetail": {"0": {"numa": 0, "socket": 0, "core": 0}, "4": {"numa": 1, "socket": 1, "core": 2}},
    "podAllocations": [
        {
            "uid": "u-1",
            "name": "trainer-0",
            "namespace": "team-a",
            "containerAllocations": [{"name": "main", "allocations": {"cpu": "4-5", "memory": "2Gi"}}],
        }
    ],
}


async def test_a_numatopology_with_every_volcano_field_round_trips_unchanged_and_undeclared_ones_go(
    cluster: Cluster,
) -> None:
    c = cluster
    name = c.name("numa-node")
    body = {
        "apiVersion": "nodeinfo.volcano.sh/v1alpha1",
        "kind": "Numatopology",
        "metadata": {"name": name},
        "spec": {**copy.deepcopy(FULL_NUMATOPOLOGY_SPEC), "notAField": True},
    }
    created = await c.create("/apis/nodeinfo.volcano.sh/v1alpha1/numatopologies", body, cluster_scoped=True)
    assert created["spec"] == FULL_NUMATOPOLOGY_SPEC
