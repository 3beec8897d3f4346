"""A Volcano PodGroup created before its pods gets a status: Volcano's job controller creates the
PodGroup and waits for it to be Inqueue before it creates the pods (pkg/controllers/job), so the
scheduler must move a pod-less PodGroup from Pending to Inqueue when its queue has room for its
``minResources`` (Volcano's enqueue action, then ``jobStatus`` / ``getPodGroupPhase`` in
pkg/scheduler/framework/session.go written by its JobUpdater), and leave it Pending when not."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import Api, eventually

pytestmark = pytest.mark.e2e


async def podgroup(api: Api, name: str, cpu: str) -> None:
    await api.create(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": 2, "queue": "small", "minResources": {"cpu": cpu}},
        },
    )


async def phase(api: Api, name: str) -> str:
    return str((await api.read_podgroup(name)).get("status", {}).get("phase", ""))


async def test_a_podless_podgroup_becomes_inqueue_when_its_queue_has_room_and_then_its_pods_bind(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1", cpu="8")
    await api.create(
        "/apis/scheduling.volcano.sh/v1beta1/queues",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "small"},
            "spec": {"weight": 1, "capability": {"cpu": "3"}},
        },
    )
    await start_scheduler()
    await podgroup(api, "fits", "2")

    async def inqueue() -> bool:
        return await phase(api, "fits") == "Inqueue"

    await eventually(inqueue)

    # 2 cpu let in already; 2 more would pass the queue's capability of 3: it stays Pending
    await podgroup(api, "beyond", "2")

    async def pending() -> bool:
        return await phase(api, "beyond") == "Pending"

    await eventually(pending)  # written, as Volcano's JobUpdater writes it
    for _ in range(10):
        await eventually(pending)
        await eventually(inqueue)

    # the job controller's part: the pods of the Inqueue group come, and are bound
    for i in range(2):
        await api.pod(f"fits-{i}", cpu="1", group="fits")

    async def bound() -> bool:
        nodes = await api.node_of()
        return nodes.get("fits-0") == "n1" and nodes.get("fits-1") == "n1"

    await eventually(bound)
    assert await phase(api, "beyond") == "Pending"
