"""Dynamic Resource Allocation end to end against caldera-sim's resource.k8s.io/v1: the pod lands where its
device is and its claim is allocated and reserved before the binding; three claims for two devices bind two
pods on distinct devices and the third waits, explained; a claim from a template; the configurations of the
class and the claim copied into the allocation; a selector that fails on
the devices is an Event on the claim and the scheduler goes on; a claim write that meets a conflict is
read again and retried."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from caldera.hack.sim import SimCluster
from caldera.hack.sim.dra import RESOURCE_CLAIMS

from .conftest import SCHEDULER, Api, eventually, needs_sim

GPU = "gpu.example.com"
RESOURCE = "/apis/resource.k8s.io/v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


async def device_class(api: Api) -> None:
    await api.create(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]},
        },
    )


async def gpus(api: Api, node: str, n: int) -> None:
    await api.create(
        f"{RESOURCE}/resourceslices",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {
                "driver": GPU,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{i}", "attributes": {"model": {"string": "a100"}}} for i in range(n)
                ],
            },
        },
    )


def claim_spec(selector: str = "") -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": GPU}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}


async def claim(api: Api, name: str, selector: str = "") -> None:
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": claim_spec(selector),
        },
    )


async def claim_pod(api: Api, name: str, entry: dict[str, Any]) -> None:
    """A pod of its own PodGroup using one claim (``entry``: resourceClaimName or resourceClaimTemplateName)."""
    await api.podgroup(name, 1)
    await api.create(
        f"/api/v1/namespaces/{api.ns}/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": api.ns,
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "resourceClaims": [{"name": "gpu", **entry}],
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "resources": {
                            "requests": {"cpu": "1", "memory": "64Mi"},
                            "claims": [{"name": "gpu"}],
                        },
                    }
                ],
            },
        },
    )


async def read_claim(api: Api, name: str) -> dict[str, Any]:
    return await api.get(f"{RESOURCE}/namespaces/{api.ns}/resourceclaims/{name}")


def devices(claim_obj: dict[str, Any]) -> list[tuple[str, str]]:
    allocation = (claim_obj.get("status") or {}).get("allocation") or {}
    return [(r["pool"], r["device"]) for r in allocation.get("devices", {}).get("results", [])]


async def test_the_pod_lands_where_its_device_is_with_its_claim_allocated_and_reserved(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1")
    await api.node("n2")
    await device_class(api)
    await gpus(api, "n2", 1)
    await claim(api, "c0")
    await start_scheduler()
    await claim_pod(api, "p", {"resourceClaimName": "c0"})
    nodes = await eventually(lambda: _bound(api, "p"))
    assert nodes["p"] == "n2"
    c0 = await read_claim(api, "c0")
    assert devices(c0) == [("n2", "gpu-0")]
    pod = next(p for p in await api.pods() if p["metadata"]["name"] == "p")
    assert c0["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": pod["metadata"]["uid"]}]
    assert FINALIZER in c0["metadata"]["finalizers"]


async def test_three_claims_for_two_devices_bind_two_pods_on_distinct_devices_and_the_third_waits(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1")
    await api.node("n2")
    await device_class(api)
    await gpus(api, "n1", 1)
    await gpus(api, "n2", 1)
    for i in range(3):
        await claim(api, f"c{i}")
    await start_scheduler()
    for i in range(3):
        await claim_pod(api, f"p{i}", {"resourceClaimName": f"c{i}"})

    async def two_bound() -> dict[str, str] | None:
        nodes = {k: v for k, v in (await api.node_of()).items() if v}
        return nodes if len(nodes) == 2 else None

    bound = await eventually(two_bound)
    held = [devices(await read_claim(api, f"c{p[1:]}"))[0] for p in bound]
    assert sorted(held) == [("n1", "gpu-0"), ("n2", "gpu-0")]
    [waiting] = [f"p{i}" for i in range(3) if f"p{i}" not in bound]

    async def explained() -> bool:
        pg = await api.read_podgroup(waiting)
        text = " ".join(c.get("message", "") for c in (pg.get("status") or {}).get("conditions") or [])
        return "no free device of class gpu.example.com" in text

    await eventually(explained)
    assert not devices(await read_claim(api, f"c{waiting[1:]}"))


async def test_a_claim_from_a_template_is_allocated_and_the_pod_bound(api: Api, start_scheduler: Any) -> None:
    await api.node("n1")
    await device_class(api)
    await gpus(api, "n1", 1)
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {"spec": claim_spec()},
        },
    )
    await start_scheduler()
    await claim_pod(api, "t", {"resourceClaimTemplateName": "one-gpu"})
    await eventually(lambda: _bound(api, "t"))
    pod = next(p for p in await api.pods() if p["metadata"]["name"] == "t")
    [status] = pod["status"]["resourceClaimStatuses"]
    assert devices(await read_claim(api, status["resourceClaimName"])) == [("n1", "gpu-0")]


TIME_SLICING = {
    "apiVersion": "gpu.example.com/v1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "TimeSlicing"},
}
MPS = {
    "apiVersion": "gpu.example.com/v1",
    "kind": "GpuConfig",
    "sharing": {"strategy": "MPS", "mps": {"threads": 50}},
}


def configuration(source: str, requests: list[str], parameters: dict[str, Any]) -> dict[str, Any]:
    return {"source": source, "requests": requests, "opaque": {"driver": GPU, "parameters": parameters}}


async def test_the_class_and_claim_configurations_reach_the_allocation_the_driver_reads(
    api: Api, start_scheduler: Any
) -> None:
    """A GPU driver reads its sharing settings from the claim's allocation (the kubelet plugin's
    ``GetOpaqueDeviceConfigs`` over ``status.allocation.devices.config``): the class's and the claim's
    configurations are copied there, each for the requests it applies to, its parameters unchanged."""
    await api.node("n1")
    await api.create(
        f"{RESOURCE}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": GPU},
            "spec": {
                "selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}],
                "config": [{"opaque": {"driver": GPU, "parameters": TIME_SLICING}}],
            },
        },
    )
    await gpus(api, "n1", 3)
    one = claim_spec()
    one["devices"]["config"] = [{"opaque": {"driver": GPU, "parameters": MPS}}]
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu-mps"},
            "spec": {"spec": one},
        },
    )
    two = {
        "devices": {
            "requests": [{"name": n, "exactly": {"deviceClassName": GPU}} for n in ("train", "serve")],
            "config": [{"requests": ["serve"], "opaque": {"driver": GPU, "parameters": MPS}}],
        }
    }
    await api.create(
        f"{RESOURCE}/namespaces/{api.ns}/resourceclaims",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "two"},
            "spec": two,
        },
    )
    await start_scheduler()
    await claim_pod(api, "t", {"resourceClaimTemplateName": "one-gpu-mps"})
    await claim_pod(api, "p", {"resourceClaimName": "two"})
    await eventually(lambda: _bound(api, "t", "p"))
    pod = next(p for p in await api.pods() if p["metadata"]["name"] == "t")
    [status] = pod["status"]["resourceClaimStatuses"]
    made = await read_claim(api, status["resourceClaimName"])
    assert made["status"]["allocation"]["devices"]["config"] == [
        configuration("FromClass", ["gpu"], TIME_SLICING),
        {"source": "FromClaim", "opaque": {"driver": GPU, "parameters": MPS}},
    ]
    shared = await read_claim(api, "two")
    assert shared["status"]["allocation"]["devices"]["config"] == [
        configuration("FromClass", ["train", "serve"], TIME_SLICING),
        configuration("FromClaim", ["serve"], MPS),
    ]
    assert sorted(devices(made) + devices(shared)) == [("n1", "gpu-0"), ("n1", "gpu-1"), ("n1", "gpu-2")]


async def test_a_selector_that_fails_on_the_devices_is_an_event_on_the_claim_and_others_go_on(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1")
    await device_class(api)
    await gpus(api, "n1", 2)
    # compiles, but the devices have no "memory" capacity: a run-time error on each of them
    await claim(api, "bad", selector=f'device.capacity["{GPU}"].memory.compareTo(quantity("1Gi")) >= 0')
    await claim(api, "good")
    await start_scheduler()
    await claim_pod(api, "b", {"resourceClaimName": "bad"})
    await claim_pod(api, "g", {"resourceClaimName": "good"})
    await eventually(lambda: _bound(api, "g"))

    async def claim_event() -> list[dict[str, Any]]:
        return [
            e
            for e in await api.events()
            if e["involvedObject"].get("kind") == "ResourceClaim" and e["involvedObject"]["name"] == "bad"
        ]

    [event] = await eventually(claim_event)
    assert event["reason"] == "FailedResourceClaimSelector" and "memory" in event["message"]
    assert not (await api.node_of()).get("b")


async def test_a_claim_write_that_meets_a_conflict_is_read_again_and_retried(
    sim: SimCluster | None, api: Api, start_scheduler: Any
) -> None:
    sim = needs_sim(sim)
    touched: list[str] = []

    async def another_writer_first(request: web.Request) -> None:
        # Just before the scheduler's first status write, someone else changes the claim: a 409.
        if request.method == "PATCH" and request.path.endswith("/resourceclaims/c0/status") and not touched:
            current = sim.store.get_obj(RESOURCE_CLAIMS, api.ns, "c0")
            assert current is not None
            labels = {**(current["metadata"].get("labels") or {}), "touched": "yes"}
            sim.store.patch(
                RESOURCE_CLAIMS,
                api.ns,
                "c0",
                "application/merge-patch+json",
                {"metadata": {"labels": labels}},
            )
            touched.append("c0")

    sim.add_request_hook(another_writer_first)
    await api.node("n1")
    await device_class(api)
    await gpus(api, "n1", 1)
    await claim(api, "c0")
    await start_scheduler()
    await claim_pod(api, "p", {"resourceClaimName": "c0"})
    await eventually(lambda: _bound(api, "p"))
    assert touched
    c0 = await read_claim(api, "c0")
    assert devices(c0) == [("n1", "gpu-0")] and c0["metadata"]["labels"]["touched"] == "yes"


async def _bound(api: Api, *names: str) -> dict[str, str] | None:
    nodes = await api.node_of()
    return nodes if all(nodes.get(n) for n in names) else None


async def test_a_claim_shared_by_two_pods_is_allocated_once_and_reserved_for_both(
    api: Api, start_scheduler: Any
) -> None:
    await api.node("n1")
    await api.node("n2")
    await device_class(api)
    await gpus(api, "n2", 2)
    await claim(api, "shared")
    await start_scheduler()
    await claim_pod(api, "a", {"resourceClaimName": "shared"})
    await claim_pod(api, "b", {"resourceClaimName": "shared"})
    nodes = await eventually(lambda: _bound(api, "a", "b"))
    assert nodes["a"] == nodes["b"] == "n2"

    async def reserved_for_both() -> dict[str, Any] | None:
        shared = await read_claim(api, "shared")
        names = sorted(r["name"] for r in (shared.get("status") or {}).get("reservedFor") or [])
        return shared if names == ["a", "b"] else None

    shared = await eventually(reserved_for_both)
    assert len(devices(shared)) == 1
