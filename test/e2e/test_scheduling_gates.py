"""A pod with scheduling gates beside ordinary pods: never bound while gated, no FailedScheduling
storm about it, bound within two scheduling periods once its gates are removed."""

from __future__ import annotations

import asyncio
import time

from .conftest import SCHEDULER, Api, eventually

PERIOD = 1.0


async def _gated_pod(api: Api, name: str, group: str) -> None:
    await api.podgroup(group, 1)
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": api.ns,
                "annotations": {"scheduling.k8s.io/group-name": group},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "schedulingGates": [{"name": "example.com/approval"}],
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


async def _failed_scheduling_about(api: Api, names: set[str]) -> int:
    """Occurrences (the Events' counts) of FailedScheduling about the pod or its PodGroup."""
    return sum(
        int(e.get("count") or 1)
        for e in await api.events()
        if e.get("reason") == "FailedScheduling" and e["involvedObject"].get("name") in names
    )


async def test_gated_pod_is_left_alone_until_its_gates_are_removed(api: Api, start_scheduler) -> None:
    await api.node("n1", cpu="4")
    await _gated_pod(api, "gated", "gated-pg")
    await api.gang("plain", 2, cpu="1")
    await start_scheduler(schedule_period=PERIOD)

    async def plain_bound() -> bool:
        nodes = await api.node_of()
        return bool(nodes.get("plain-0") and nodes.get("plain-1"))

    await eventually(plain_bound)
    # Ten seconds of cycles: the gated pod is never bound and not complained about.
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        assert (await api.node_of())["gated"] == ""
        await asyncio.sleep(0.5)
    assert await _failed_scheduling_about(api, {"gated", "gated-pg"}) <= 3
    pg = await api.read_podgroup("gated-pg")
    conds = {c["type"]: c for c in pg.get("status", {}).get("conditions", [])}
    assert conds["SchedulingGated"]["status"] == "True"
    assert "example.com/approval" in conds["SchedulingGated"]["message"]
    assert conds.get("Unschedulable", {}).get("status") != "True"

    await api.client.request(
        "PATCH",
        f"/api/v1/namespaces/{api.ns}/pods/gated",
        body={"spec": {"schedulingGates": None}},
        content_type="application/merge-patch+json",
    )
    ungated = time.monotonic()

    async def gated_bound() -> bool:
        return (await api.node_of())["gated"] == "n1"

    await eventually(gated_bound, timeout=2 * PERIOD, interval=0.05)
    print(f"bound {time.monotonic() - ungated:.2f}s after its gates were removed")
