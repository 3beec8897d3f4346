"""The cluster a soak runs on: the simulator's node templates and default queue, the scheduler conf, and
pods of another scheduler that ours must leave alone."""

from __future__ import annotations

from typing import Any

from caldera.hack.sim.nodes import NodeTemplate, build_nodes
from caldera.hack.soak.checker import Checker
from caldera.hack.workload.client import Api, pods_path
from caldera.hack.workload.manifests import IB_LABEL, pod_manifest

FOREIGN_SCHEDULER = "other-scheduler"

SOAK_CONF = f"""
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
  - name: network-topology-aware
    arguments:
      topologyKeys: [{IB_LABEL}]
"""


#: the name prefix of the nodes whose DRA driver publishes GPUs (`caldera-sim soak --dra`)
DRA_NODE_PREFIX = "dra"


def dra_node_names(count: int) -> tuple[str, ...]:
    """The DRA nodes' names, as the simulator names a template's nodes (hack/sim/nodes.py build_nodes)."""
    return tuple(
        n["metadata"]["name"] for n in build_nodes([NodeTemplate(name=DRA_NODE_PREFIX, count=count)])
    )


def cluster_file(nodes: int, ib_groups: int, dra_nodes: int = 0) -> dict[str, Any]:
    """The soak's cluster: CPU nodes in `ib_groups` InfiniBand groups, 4 GPU nodes (device plugin), 4 vGPU
    nodes, and `dra_nodes` untainted nodes for DRA (their ResourceSlices come from the `dra` generator)."""
    per = max(1, nodes // ib_groups)
    templates: list[dict[str, Any]] = [
        {
            "name": f"cpu-ib{g}",
            "count": per,
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "labels": {IB_LABEL: f"ib-{g}"},
        }
        for g in range(ib_groups)
    ]
    templates.append(
        {
            "name": "gpu",
            "count": 4,
            "capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
            "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        }
    )
    templates.append(
        {
            "name": "vgpu",
            "count": 4,
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "vgpu": {"cards": 4, "split": 10, "memory": 32768, "cores": 100},
        }
    )
    if dra_nodes:
        templates.append(
            {
                "name": DRA_NODE_PREFIX,
                "count": dra_nodes,
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
            }
        )
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "default"},
        # A share of the cluster guaranteed to the default queue, so that the `queues` generator's
        # oversubscribed guarantees (scaled down to the cluster) do not reserve all of it away from here.
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "guarantee": {"resource": {"cpu": str(nodes * 32 // 4), "memory": f"{nodes * 32}Gi"}},
        },
    }
    return {"nodes": templates, "objects": [queue]}


async def create_foreign_pods(api: Api, checker: Checker) -> None:
    """Pods of another scheduler: unbound ones must stay unbound, bound ones where they are."""
    for i in range(3):
        body = pod_manifest(
            f"foreign-{i}",
            "soak",
            workload="foreign",
            requests={"cpu": "100m"},
            scheduler=FOREIGN_SCHEDULER,
        )
        await api.create(pods_path("soak"), body)
        checker.foreign[f"soak/foreign-{i}"] = body
    body = pod_manifest(
        "foreign-bound", "soak", workload="foreign", requests={"cpu": "1"}, scheduler=FOREIGN_SCHEDULER
    )
    body["spec"]["nodeName"] = "cpu-ib0-0"
    await api.create(pods_path("soak"), body)
    checker.foreign["soak/foreign-bound"] = body
