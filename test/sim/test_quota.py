"""ResourceQuota as a real control plane keeps it: the quota controller's ``status`` (hard, used) and the
API server's quota admission refusing a pod that would exceed ``hard``, in its words."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from caldera.hack.sim.quota import QuotaController

from .conftest import Cluster
from .test_validation import pod


@pytest.fixture(autouse=True)
async def quota_controller(cluster: Cluster):
    """The conformance suite's simulator runs no controllers; a real cluster runs this one in
    kube-controller-manager."""
    controller = QuotaController(cluster.sim.store) if cluster.sim is not None else None
    if controller is not None:
        controller.start()
    yield
    if controller is not None:
        await controller.stop()


async def status_of(cluster: Cluster, name: str, want: dict[str, str] | None = None) -> dict[str, Any]:
    """The quota's status once the controller has synced it (and ``used`` equals ``want`` if given)."""
    path = f"/api/v1/namespaces/{cluster.ns}/resourcequotas/{name}"
    status: dict[str, Any] = {}
    for _ in range(100):
        status = (await cluster.http.ok("GET", path)).get("status") or {}
        if status.get("hard") and (want is None or status.get("used") == want):
            return status
        await asyncio.sleep(0.05)
    raise AssertionError(f"quota {name} status never became {want}: {status}")


def quota(name: str, hard: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": name}, "spec": {"hard": hard}}


async def test_the_controller_counts_the_pods_requests_and_admission_refuses_what_exceeds_hard(
    cluster: Cluster,
) -> None:
    ns = cluster.ns
    await cluster.http.ok(
        "POST", f"/api/v1/namespaces/{ns}/resourcequotas", quota("compute", {"cpu": "2", "pods": "5"})
    )
    status = await status_of(cluster, "compute", {"cpu": "0", "pods": "0"})
    assert status["hard"] == {"cpu": "2", "pods": "5"}

    await cluster.http.ok("POST", f"/api/v1/namespaces/{ns}/pods", pod("first", {"cpu": "1500m"}))
    await status_of(cluster, "compute", {"cpu": "1500m", "pods": "1"})

    code, doc = await cluster.http("POST", f"/api/v1/namespaces/{ns}/pods", pod("second", {"cpu": "1"}))
    assert code == 403 and doc["reason"] == "Forbidden"
    assert doc["message"] == (
        'pods "second" is forbidden: exceeded quota: compute, requested: cpu=1, used: cpu=1500m, limited: cpu=2'
    )

    await cluster.http.ok("DELETE", f"/api/v1/namespaces/{ns}/pods/first", {"gracePeriodSeconds": 0})
    await status_of(cluster, "compute", {"cpu": "0", "pods": "0"})
    await cluster.http.ok("POST", f"/api/v1/namespaces/{ns}/pods", pod("second", {"cpu": "1"}))


async def test_a_quota_limits_only_what_it_names(cluster: Cluster) -> None:
    ns = cluster.ns
    await cluster.http.ok("POST", f"/api/v1/namespaces/{ns}/resourcequotas", quota("mem", {"memory": "1Gi"}))
    await status_of(cluster, "mem", {"memory": "0"})
    # cpu is not limited by a memory quota; memory is
    await cluster.http.ok(
        "POST", f"/api/v1/namespaces/{ns}/pods", pod("cpu-heavy", {"cpu": "64", "memory": "1Gi"})
    )
    code, doc = await cluster.http("POST", f"/api/v1/namespaces/{ns}/pods", pod("more", {"memory": "1Mi"}))
    assert code == 403
    assert doc["message"].endswith(
        "exceeded quota: mem, requested: memory=1Mi, used: memory=1Gi, limited: memory=1Gi"
    )
