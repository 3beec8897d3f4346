"""caldera-sim serves PodDisruptionBudgets: the disruption controller keeps their status, and the
eviction subresource refuses with 429 an eviction that would violate one."""

from __future__ import annotations

import asyncio
import time

import msgspec

from caldera.cache.client import ApiClient, ApiError, ClusterConfig
from caldera.hack.sim import SimCluster

NS = "default"


async def _until(check, timeout=5.0):
    deadline = time.monotonic() + timeout
    while True:
        got = await check()
        if got:
            return got
        assert time.monotonic() < deadline, "condition not met"
        await asyncio.sleep(0.05)


async def test_a_budget_allows_exactly_its_disruptions_then_answers_429(sim: SimCluster) -> None:
    client = ApiClient(await ClusterConfig.load(str(sim.kubeconfig_path)))
    try:
        nodes = [
            n["metadata"]["name"]
            for n in msgspec.json.decode(await client.request("GET", "/api/v1/nodes"))["items"]
        ]
        for i in range(3):
            await client.request(
                "POST",
                f"/api/v1/namespaces/{NS}/pods",
                body={
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"db-{i}", "labels": {"app": "db"}},
                    "spec": {"nodeName": nodes[0], "containers": [{"name": "c", "image": "busybox"}]},
                },
            )
        await client.request(
            "POST",
            f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
            body={
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "db"},
                "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
            },
        )
        path = f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets/db"

        async def allowed_one():
            pdb = msgspec.json.decode(await client.request("GET", path))
            status = pdb.get("status") or {}
            return (
                status
                if status.get("disruptionsAllowed") == 1 and status.get("currentHealthy") == 3
                else None
            )

        status = await _until(allowed_one)
        assert status["desiredHealthy"] == 2 and status["expectedPods"] == 3

        def eviction(name):
            return {
                "apiVersion": "policy/v1",
                "kind": "Eviction",
                "metadata": {"name": name, "namespace": NS},
            }

        await client.request("POST", f"/api/v1/namespaces/{NS}/pods/db-0/eviction", body=eviction("db-0"))
        # terminating (a 30 s grace period), marked by the eviction as kube-apiserver marks it
        evicted = msgspec.json.decode(await client.request("GET", f"/api/v1/namespaces/{NS}/pods/db-0"))
        assert evicted["metadata"]["deletionTimestamp"]
        assert [
            (c["status"], c["reason"], c["message"])
            for c in evicted["status"]["conditions"]
            if c["type"] == "DisruptionTarget"
        ] == [("True", "EvictionByEvictionAPI", "Eviction API: evicting")]
        pdb = msgspec.json.decode(await client.request("GET", path))
        assert pdb["status"]["disruptionsAllowed"] == 0 and "db-0" in pdb["status"]["disruptedPods"]
        try:
            await client.request("POST", f"/api/v1/namespaces/{NS}/pods/db-1/eviction", body=eviction("db-1"))
            raise AssertionError("the second eviction should have been refused")
        except ApiError as exc:
            assert exc.code == 429
            assert "disruption budget" in exc.message
        pod = msgspec.json.decode(await client.request("GET", f"/api/v1/namespaces/{NS}/pods/db-1"))
        assert not pod["metadata"].get("deletionTimestamp")
        # a refused eviction leaves no mark
        assert all(c["type"] != "DisruptionTarget" for c in pod["status"].get("conditions") or [])
    finally:
        await client.close()
