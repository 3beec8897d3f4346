"""The task-topology plugin end to end: a TensorFlow-style job whose roles all want to be near
each other (parameter server, workers, evaluators), but whose two evaluators must not share a node.

Volcano's rules (pkg/scheduler/plugins/task-topology/): the PodGroup's
``volcano.sh/task-topology-affinity`` ("ps,worker,evaluator") and
``volcano.sh/task-topology-anti-affinity`` ("evaluator": a group of one role keeps that role's pods
apart) name roles, a pod's role being its
``volcano.sh/task-spec`` annotation (``readTopologyFromPgAnnotations``, ``getTaskName``). The job's
pending pods are put into buckets (``ConstructBucket``), affine roles together, and a node scores by
the pod's bucket mates on it less its anti-affinity with the roles placed there (``calcBucketScore``),
times ``task-topology.weight``: the evaluators go into two buckets, the parameter server and the
workers join one of them. Without the plugin, nodeorder spreads the five pods over the nodes; without
the anti-affinity, all five share one node."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: task-topology
    arguments:
      task-topology.weight: 10
"""
ROLES = {"ps": 1, "worker": 2, "evaluator": 2}


async def test_affine_roles_share_a_node_and_anti_affine_pods_are_kept_apart(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    for name in ("n1", "n2", "n3"):
        await api.node(name, cpu="8")
    await start_scheduler()

    await api.podgroup(
        "tf",
        sum(ROLES.values()),
        annotations={
            "volcano.sh/task-topology-affinity": "ps,worker,evaluator",
            "volcano.sh/task-topology-anti-affinity": "evaluator",
        },
    )
    pods = [f"{role}-{i}" for role, n in ROLES.items() for i in range(n)]
    for name in pods:
        await api.pod(name, cpu="1", group="tf", annotations={"volcano.sh/task-spec": name.split("-")[0]})

    nodes = await eventually(lambda: api.placed(*pods))
    assert nodes["ps-0"] == nodes["worker-0"] == nodes["worker-1"], nodes
    assert nodes["evaluator-0"] != nodes["evaluator-1"], nodes
    assert nodes["ps-0"] in (nodes["evaluator-0"], nodes["evaluator-1"]), nodes
