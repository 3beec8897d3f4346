"""The resourcequota plugin end to end: a namespace's Kubernetes ResourceQuota lets its first job in
and keeps the second Pending, saying why, and the API server itself refuses a pod beyond the quota.

As with Volcano's job controller, a job's pods are created once its PodGroup is Inqueue: the
PodGroups (with ``minResources``) come first."""

from __future__ import annotations

from typing import Any

import pytest

from caldera.cache.client import ApiError

from .conftest import SCHEDULER, Api, eventually

pytestmark = pytest.mark.e2e

CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: resourcequota
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
"""


async def podgroup(api: Api, name: str, cpu: str) -> None:
    await api.create(
        f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{api.ns}/podgroups",
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": 2, "minResources": {"cpu": cpu}},
        },
    )


async def phase(api: Api, name: str) -> str:
    return str((await api.read_podgroup(name)).get("status", {}).get("phase", ""))


async def test_a_namespace_quota_admits_the_first_job_and_holds_the_second_with_the_reason(
    api: Api, start_scheduler: Any, conf_file: Any
) -> None:
    _, path = conf_file
    path.write_text(CONF)
    await api.node("n1", cpu="16")
    await api.create(
        f"/api/v1/namespaces/{api.ns}/resourcequotas",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "compute"},
            "spec": {"hard": {"cpu": "5"}},
        },
    )
    running = await start_scheduler()

    # The first job: its two 1-cpu pods are counted (used 2); 2 used + its minResources 2 <= 5.
    await podgroup(api, "first", "2")
    for i in range(2):
        await api.pod(f"first-{i}", cpu="1", group="first")

    async def first_running() -> bool:
        nodes = await api.node_of()
        return all(nodes.get(f"first-{i}") for i in range(2)) and await phase(api, "first") == "Running"

    await eventually(first_running)

    # The second job's pods are admitted too (used 4), but 4 used + its minResources 2 > 5. Its
    # PodGroup comes once the scheduler's cache has seen the quota count them.
    for i in range(2):
        await api.pod(f"second-{i}", cpu="1", group="second")
    quotas = running.app.cache.resource_quotas
    key = f"{api.ns}/compute"

    async def counted() -> bool:
        return key in quotas and quotas[key].status.used.get("cpu") == "4"

    await eventually(counted)
    await podgroup(api, "second", "2")
    reason = "resource quota insufficient, requested: cpu=2, used: cpu=4, limited: cpu=5"

    async def second_held() -> list[dict[str, Any]]:
        return [
            e
            for e in await api.events()
            if e["involvedObject"]["name"] == "second" and e["message"] == reason
        ]

    held = await eventually(second_held)
    assert held[0]["reason"] == "Unschedulable"
    assert await phase(api, "second") == "Pending"
    conditions = (await api.read_podgroup("second")).get("status", {}).get("conditions", [])
    assert any(reason in c.get("message", "") for c in conditions), conditions
    nodes = await api.node_of()
    assert not any(nodes.get(f"second-{i}") for i in range(2))

    # The API server's own quota admission: a pod beyond the quota is refused, in its words.
    with pytest.raises(ApiError) as refused:
        await api.pod("third", cpu="2", scheduler=SCHEDULER)
    assert refused.value.code == 403
    assert "exceeded quota: compute, requested: cpu=2, used: cpu=4, limited: cpu=5" in str(refused.value)
