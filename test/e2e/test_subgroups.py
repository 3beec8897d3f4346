"""A PodGroup with ``subGroupPolicy`` (Volcano 1.14's multi-level gang) end to end on caldera-sim:
the disaggregated-serving shape, a prefill group and a decode group of four pods each (split by the
``role`` label through ``matchLabelKeys``), each bound to one leaf HyperNode (tier 1, hard)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from caldera.scheduler.registry import builtin_registry

from .conftest import SCHEDULER, Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""
HYPERNODES = "/apis/topology.volcano.sh/v1alpha1/hypernodes"


@pytest.fixture
def conf_file(tmp_path: Path) -> tuple[Any, Path]:
    path = tmp_path / "scheduler.conf"
    path.write_text(CONF)
    return builtin_registry(), path


async def hypernode(api: Api, name: str, tier: int, members: list[str], kind: str = "Node") -> None:
    await api.create(
        HYPERNODES,
        {
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {
                "tier": tier,
                "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
            },
        },
    )


async def leaf(api: Api, name: str, nodes: int, cpu: str = "4") -> None:
    names = [f"{name}-n{i}" for i in range(nodes)]
    for n in names:
        await api.node(n, cpu=cpu)
    await hypernode(api, name, 1, names)


async def serving_group(api: Api, min_sub_groups: int) -> None:
    await api.create(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "llm", "namespace": api.ns},
            "spec": {
                "minMember": 4,
                "queue": "default",
                "subGroupPolicy": [
                    {
                        "name": "role",
                        "matchLabelKeys": ["role"],
                        "subGroupSize": 4,
                        "minSubGroups": min_sub_groups,
                        "networkTopology": {"mode": "hard", "highestTierAllowed": 1},
                    }
                ],
            },
        },
    )
    for role in ("prefill", "decode"):
        for i in range(4):
            await api.create(
                f"/api/v1/namespaces/{api.ns}/pods",
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{role}-{i}",
                        "namespace": api.ns,
                        "labels": {"role": role},
                        "annotations": {"scheduling.k8s.io/group-name": "llm"},
                    },
                    "spec": {
                        "schedulerName": SCHEDULER,
                        "containers": [
                            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}
                        ],
                    },
                },
            )


async def test_each_role_lands_inside_one_leaf(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    # three leaves of two 4-cpu nodes under one spine: each leaf holds one role's four 2-cpu pods
    for name in ("leaf-a", "leaf-b", "leaf-c"):
        await leaf(api, name, 2)
    await hypernode(api, "spine", 2, ["leaf-a", "leaf-b", "leaf-c"], kind="HyperNode")
    await serving_group(api, min_sub_groups=2)
    running = await start_scheduler()

    async def all_bound() -> dict[str, str] | None:
        nodes = await api.node_of()
        return nodes if len(nodes) == 8 and all(nodes.values()) else None

    nodes = await eventually(all_bound, timeout=20)
    leaves = {
        role: {nodes[f"{role}-{i}"].rsplit("-n", 1)[0] for i in range(4)} for role in ("prefill", "decode")
    }
    assert all(len(found) == 1 for found in leaves.values()), leaves
    # /debug/jobs names the HyperNode each sub-group went to
    doc = await debug_job(running, api, "llm")
    assert doc["sub_groups"]["policies"] == [{"policy": "role", "min_sub_groups": 2, "whole": 2}]
    went = {g["name"]: g["hypernode"] for g in doc["sub_groups"]["groups"]}
    assert went == {f"role-{role}": leaves[role].pop() for role in ("prefill", "decode")}


async def test_room_for_one_role_only_binds_nothing_when_both_are_needed(sim, api, start_scheduler) -> None:  # type: ignore[no-untyped-def]
    # one leaf with room for a whole role; the other leaf holds only two of a role's four pods
    await leaf(api, "leaf-a", 2)
    await leaf(api, "leaf-b", 1)
    await hypernode(api, "spine", 2, ["leaf-a", "leaf-b"], kind="HyperNode")
    await serving_group(api, min_sub_groups=2)
    running = await start_scheduler()

    async def reported() -> bool:
        pg = await api.read_podgroup("llm")
        return any(
            c["type"] == "Unschedulable" and c["status"] == "True"
            for c in pg.get("status", {}).get("conditions", [])
        )

    await eventually(reported, timeout=20)
    assert not any((await api.node_of()).values()), "no pod binds: both roles must be placed whole"
    # /debug/jobs: one role fits leaf-a, the other fits nowhere, and why
    doc = await debug_job(running, api, "llm")
    groups = doc["sub_groups"]["groups"]
    assert sorted(g["fit_in"] for g in groups) == ["", "leaf-a"]
    assert next(g["reason"] for g in groups if not g["fit_in"]).startswith("no group up to tier 1")


async def debug_job(running: Any, api: Api, name: str) -> dict[str, Any]:
    server = f"http://127.0.0.1:{running.app.http.port}"

    async def doc() -> dict[str, Any] | None:
        async with aiohttp.ClientSession() as http, http.get(f"{server}/debug/jobs/{api.ns}/{name}") as resp:
            found = await resp.json() if resp.status == 200 else {}
        return found if found.get("sub_groups") else None

    found = await eventually(doc, timeout=20)
    assert found is not None
    return found
