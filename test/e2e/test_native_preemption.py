"""Preempting a native PodGroup end to end (KEP-5710), against caldera-sim serving
``scheduling.k8s.io/v1alpha2``: a group of ``disruptionMode: PodGroup`` is evicted whole though one
pod would make room, and the PodGroup says so in its ``DisruptionTarget`` condition (reason
``PreemptionByScheduler``), written through ``podgroups/status``, False again once its pods are gone."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import SCHEDULER, Api, eventually
from .test_rare_calls import PREEMPT_CONF

pytestmark = pytest.mark.e2e
NATIVE_GANG_API = True
V1A2 = "/apis/scheduling.k8s.io/v1alpha2"


async def native_group(api: Api, name: str, min_count: int, priority: str, mode: str = "") -> None:
    spec: dict[str, Any] = {
        "schedulingPolicy": {"gang": {"minCount": min_count}},
        "priorityClassName": priority,
    }
    if mode:
        spec["disruptionMode"] = mode
    await api.create(
        f"{V1A2}/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.k8s.io/v1alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": spec,
        },
    )
    for i in range(min_count if name != "batch" else 4):
        await api.create(
            f"/api/v1/namespaces/{api.ns}/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-{i}"},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "schedulingGroup": {"podGroupName": name},
                    "priorityClassName": priority,
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
                        }
                    ],
                },
            },
        )


async def test_a_group_disrupted_as_a_whole_is_preempted_whole_and_marked(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(PREEMPT_CONF)
    for name, value in (("high", 1000), ("low", 1)):
        await api.create(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
        )
    await api.node("n1", cpu="4")
    await start_scheduler()
    await native_group(api, "batch", 2, "low", mode="PodGroup")

    async def bound(*names: str) -> bool:
        nodes = await api.node_of()
        return all(nodes.get(n) for n in names)

    await eventually(lambda: bound(*(f"batch-{i}" for i in range(4))), timeout=15)
    await native_group(api, "urgent", 1, "high")
    await eventually(lambda: bound("urgent-0"), timeout=20)
    left = {p["metadata"]["name"] for p in await api.pods()} & {f"batch-{i}" for i in range(4)}
    assert not left, "the whole group went, though one pod would have made room"

    async def marked() -> dict[str, Any] | None:
        pg = await api.get(f"{V1A2}/namespaces/{api.ns}/podgroups/batch")
        conds = (pg.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "DisruptionTarget"), None)

    cond = await eventually(marked, timeout=15)
    # True once the evictions were carried out; the pods go at once (grace period 0), after which
    # it is set back to False: either may be read first, both say what happened
    assert cond["reason"] == "PreemptionByScheduler"
    assert "4 pod(s) by preempt" in cond["message"]

    async def over() -> dict[str, Any] | None:
        cond = await marked()
        return cond if cond is not None and cond["status"] == "False" else None

    cond = await eventually(over, timeout=15)
    assert "the evicted pods are gone" in cond["message"]
